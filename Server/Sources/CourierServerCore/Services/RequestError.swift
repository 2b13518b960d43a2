// Courier — Apache-2.0
internal import CourierStorage
package import CourierDomain
public import CourierWire

/// A request the server refuses: a stable code and a readable sentence (never a body or token).
public struct RequestError: Error, Hashable, Sendable {
    public let code: ErrorCode
    public let message: String
    /// What failed inside the server, for its log (never sent): set on `internal` errors.
    public let cause: String?
    public init(_ code: ErrorCode, _ message: String, cause: String? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }
    package var wire: WireError { WireError(code: code, message: message) }
}

extension RequestError {
    /// Maps a storage failure to what the client sees.
    package init(_ error: StorageError) {
        switch error {
        case .accountNotFound(let account):
            self.init(.accountNotFound, "Account '\(account)' does not exist.")
        case .conversationNotFound(let conversation):
            self.init(.conversationNotFound, "Conversation '\(conversation)' has no messages.")
        case .seqBeyondLastMessage(let last):
            self.init(.receiptBeyondLastMessage, "The conversation's last message has seq \(last).")
        case .alreadyRecalled:
            self.init(.recallAlreadyRecalled, "The message was already recalled.")
        case .recallRefused(.notSender):
            self.init(.recallNotPermitted, "Only the sender may recall a message in a direct conversation.")
        case .recallRefused(.notManager):
            self.init(
                .recallNotPermitted,
                "In a group the owner may recall anyone's message and admins ordinary members' messages."
            )
        case .recallRefused(.windowExpired(let milliseconds)):
            self.init(.recallWindowExpired, "Messages can be recalled within \(milliseconds / 1000) s of sending.")
        case .editRefused(.notSender):
            self.init(.editNotPermitted, "Only the sender may edit a message in a direct conversation.")
        case .editRefused(.notManager):
            self.init(
                .editNotPermitted,
                "In a group the sender edits a message; the owner and admins only where the server lets them."
            )
        case .editRefused(.windowExpired(let milliseconds)):
            self.init(.editWindowExpired, "Messages can be edited within \(milliseconds / 1000) s of sending.")
        case .editRefused(.recalled):
            self.init(.editRecalled, "The message was recalled.")
        case .reactionRefused(.messageRecalled):
            self.init(.reactionMessageRecalled, "The message was recalled.")
        case .reactionRefused(.tooMany):
            self.init(
                .reactionTooMany,
                "An account puts at most \(ReactRequest.maxPerAccount) reactions on a message, and a message has at most \(ReactRequest.maxPerMessage) distinct ones."
            )
        case .groupRefused(let refusal):
            switch refusal {
            case .groupNotFound: self.init(.groupNotFound, "No such group.")
            case .alreadyExists: self.init(.groupAlreadyExists, "A group with that id exists already.")
            case .actorNotAMember: self.init(.conversationNotAMember, "You are not a member of this group.")
            case .notPermitted: self.init(.groupNotPermitted, "Your role in the group does not allow this change.")
            case .ownerCannotLeave:
                self.init(.groupOwnerCannotLeave, "The owner cannot leave: transfer ownership first.")
            case .notAMember(let account): self.init(.groupNotAMember, "'\(account)' is not a member of the group.")
            case .alreadyMember: self.init(.groupAlreadyMember, "Every account named is a member already.")
            case .alreadyRequested:
                self.init(.receiptAlreadyRequested, "The message already asks for read receipts.")
            }
        case .messageIDInUse(let id):
            self.init(.messageIDInUse, "'\(id)' is the id of another entry.")
        case .failed(let reason):
            self.init(.internal, "The server could not complete the request; nothing was written.", cause: reason)
        case .unreachable(let reason):
            self.init(
                .storeUnavailable,
                "The server's database cannot be reached right now; retry in a moment.",
                cause: reason
            )
        case .conflict:
            self.init(
                .internal,
                "The server could not complete the request; nothing was written.",
                cause: "A uniqueness conflict the request did not resolve."
            )
        }
    }
}

/// Runs a store call; its failure is what the client sees (``RequestError/init(_:)``).
package func storing<T>(_ body: () async throws(StorageError) -> T) async throws(RequestError) -> T {
    do { return try await body() } catch { throw RequestError(error) }
}
