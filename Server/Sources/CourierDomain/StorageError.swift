// Courier — Apache-2.0
public import CourierWire

/// Why a storage operation failed. Domain cases are mapped to wire error codes by the server; `failed` means the
/// database failed and nothing was written; `unreachable` that it could not be reached now.
public enum StorageError: Error, Hashable, Sendable {
    case accountNotFound(AccountID)
    case conversationNotFound(ConversationID)
    case seqBeyondLastMessage(last: Seq)
    /// The message was already recalled, by another requester.
    case alreadyRecalled
    /// A recall rule refused it (checked inside the transaction, against the roles and the message it reads).
    case recallRefused(RecallRefusal)
    /// An edit rule refused it (checked inside the transaction, against the roles and the message it reads).
    case editRefused(EditRefusal)
    /// A reaction rule refused it (checked inside the transaction, against the message it reads).
    case reactionRefused(ReactionRefusal)
    /// A group rule refused the change (checked inside the transaction, against the roles it reads).
    case groupRefused(GroupRefusal)
    /// An imported entry's id is another entry's (ids are unique in the database); nothing was written.
    case messageIDInUse(MessageID)
    /// A concurrent write won a uniqueness race; nothing was written and retrying is safe.
    case conflict
    /// The database failed (an error the server does not expect); nothing was written.
    case failed(String)
    /// The database could not be reached, or not in time (no connection within the store's timeout, a connection
    /// lost, a server shutting down, starting or in recovery, a standby after a failover): a retry in a moment may
    /// succeed. The cause says which.
    case unreachable(String)
}

extension StorageError {
    /// The database failed or could not be reached, rather than refused the request: what an import or a batch stops
    /// on instead of counting it against one line.
    public var isDatabaseFailure: Bool {
        switch self {
        case .failed, .unreachable: true
        default: false
        }
    }

    /// A database a newer build migrated (`found`, a schema this build does not know; it knows up to `known`):
    /// refused at start, or, met by a node while it runs, reported by its readiness (docs/operations.md). One line.
    public static func newerSchema(found: String, known: String, whileRunning: Bool = false) -> StorageError {
        .failed(
            "The database was migrated by a newer courier-server (schema \(found); this build knows up to \(known))"
                + (whileRunning
                    ? " while this node ran: upgrade this node."
                    : ". Run the newer build, or restore the backup taken before the upgrade.")
        )
    }
}
