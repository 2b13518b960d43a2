// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Typing indicators' reads and the account's setting, written once for every backend that runs ``SQLQuery``s.
extension TypingStore where Self: SQLRunner {
    public func sendsTypingIndicators(_ account: AccountID) async throws(StorageError) -> Bool {
        try await readRows("SELECT send_typing_indicators FROM account WHERE id = \(account.rawValue)")
            .first?.bool(0) ?? true
    }

    public func setSendsTypingIndicators(_ value: Bool, for account: AccountID) async throws(StorageError) {
        _ = try await writeRows(
            "UPDATE account SET send_typing_indicators = \(value) WHERE id = \(account.rawValue)"
        )
    }

    public func typingCheck(
        of account: AccountID,
        in conversation: ConversationID
    ) async throws(StorageError) -> TypingCheck {
        // One statement: one snapshot on either backend.
        let rows = try await readRows(
            """
            SELECT (SELECT send_typing_indicators FROM account WHERE id = \(account.rawValue)),
                (SELECT membership_seq FROM conversation
                    WHERE id = \(conversation.rawValue) AND kind = 'group' AND dismissed_seq IS NULL),
                EXISTS (SELECT 1 FROM conversation_member
                    WHERE conversation_id = \(conversation.rawValue) AND account = \(account.rawValue))
            """
        )
        guard let row = rows.first else { throw .failed("The typing check read no row.") }
        let setting: Bool = if case .null = row.values[0] { true } else { try row.bool(0) }
        return TypingCheck(
            sendsTypingIndicators: setting,
            membershipVersion: try row.optionalInt64(1).map { Seq(rawValue: $0) },
            isMember: try row.bool(2)
        )
    }

    public func tellOtherNodes(_ content: ChangeNotice.Content) async throws(StorageError) {
        guard let query = try notification(content) else { return }
        _ = try await readRows(query)
    }
}
