// Courier — Apache-2.0
public import CourierWire

/// What a recall removes (SPEC §6), decided once for every backend: from the recalled message as the backend found
/// it in its transaction, the refusal or the writes that follow the recall notice's entry.
public struct RecallPlan: Sendable, Hashable {
    public enum Write: Sendable, Hashable {
        /// A one-way recall: the sender's account keeps the message as sent (its body and quote), readable by it alone.
        case keepSenderCopy(MessageID)
        /// The body and quote go, and the message stops counting as unread; the tombstone (ids, sender, seq, time)
        /// stays so that every device learns of the recall.
        case erase(MessageID)
        /// Replies stop quoting it.
        case unquoteReplies(MessageID)
        /// Its receipts go: the count, so that later reads neither raise it nor announce it, and the notes left with
        /// acks. Readers' positions stay: they are positions in the log, where the tombstone is.
        case dropReceipts(Seq)
    }

    public let writes: [Write]

    /// - Parameters:
    ///   - notice: The recall notice being appended.
    ///   - target: The recalled message's state, `nil` when there is no such message.
    /// - Throws: ``StorageError/conversationNotFound(_:)`` for no message, ``StorageError/alreadyRecalled`` when another
    ///   requester recalled it (a repeat by the same requester is answered earlier, as a duplicate of its notice).
    public init(
        _ notice: WireRecallNotice,
        target: (recalled: Bool, seq: Seq)?,
        in conversation: ConversationID
    ) throws(StorageError) {
        guard let target else { throw .conversationNotFound(conversation) }
        guard !target.recalled else { throw .alreadyRecalled }
        let id = notice.messageID
        writes = (notice.mode == .oneWay ? [.keepSenderCopy(id)] : [])
            + [.erase(id), .unquoteReplies(id), .dropReceipts(target.seq)]
    }
}
