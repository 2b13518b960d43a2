// Courier — Apache-2.0
public import CourierWire

/// Every failure the SDK reports. Each case has a stable ``code`` that matches the wire.
///
/// New cases may be added in minor versions: switch with a `default:` branch. Codes this SDK version does not know
/// arrive as ``server(code:message:)``.
public enum CourierError: Error, Sendable, Hashable {
    /// The token is invalid or expired, or names another account (`auth.*`). The client stops reconnecting.
    case unauthorized(String)
    /// The account does not exist on the server (`account.notFound`).
    case accountNotFound(String)
    /// The caller is not a member of the conversation (`conversation.notAMember`).
    case notAMember(ConversationID)
    /// The message does not exist (`message.notFound`).
    case messageNotFound(String)
    /// The body exceeds the server's limit (`message.bodyTooLarge`).
    case bodyTooLarge(String)
    /// A recall the server refused: `recall.notPermitted`, `recall.windowExpired`, `recall.alreadyRecalled`, or
    /// (on the device) `recall.notSent` for a message the server never acknowledged.
    case recallRefused(code: ErrorCode, message: String)
    /// An edit the server refused: `edit.notPermitted`, `edit.windowExpired` or `edit.recalled`.
    case editRefused(code: ErrorCode, message: String)
    /// A group operation the server refused: `group.notFound`, `group.alreadyExists`, `group.notPermitted`,
    /// `group.ownerCannotLeave`, `group.notAMember`, `group.alreadyMember`, `group.tooManyAccounts`, or a read-receipt
    /// request it refused: `receipt.notPermitted`, `receipt.groupTooLarge`, `receipt.notRequested`,
    /// `receipt.alreadyRequested`.
    case groupRefused(code: ErrorCode, message: String)
    /// A malformed argument: a bad conversation id, client id, seq … (`request.invalidArgument`, `conversation.invalid`,
    /// `message.notInConversation`, `receipt.beyondLastMessage`, `frame.*`).
    case invalidInput(code: ErrorCode, message: String)
    /// No connection to the server right now, and the call needs one (it is not queued): it did not reach the server.
    /// Wait for ``ConnectionState/connected``, or use the calls that queue offline (sends, reads, view changes).
    case notConnected
    /// The client has no account yet: ``CourierClient/connect(account:token:)`` (or its token provider form) was not
    /// called, so the local store is not open and nothing is known of the account. Connect first.
    case noAccount
    /// The server answered with something else than this request's answer: a server and SDK of versions that do not
    /// agree. Update the SDK (or ask whoever runs the server).
    case unexpectedReply
    /// The task that made the call was cancelled before it finished (Swift's `CancellationError`).
    case cancelled
    /// The server did not answer in time. A send stays queued and is retried on the next connection.
    case timedOut
    /// The local store failed.
    case localStore(String)
    /// An attachment's file could not be uploaded (``AttachmentUploader``) after every attempt; its message is failed.
    case uploadFailed(String)
    /// Any other server error, including codes newer than this SDK.
    case server(code: ErrorCode, message: String)

    /// The stable code: the wire code, or `sdk.*` for failures that happen on the device.
    public var code: ErrorCode {
        switch self {
        case .unauthorized: .authInvalidToken
        case .accountNotFound: .accountNotFound
        case .notAMember: .conversationNotAMember
        case .messageNotFound: .messageNotFound
        case .bodyTooLarge: .messageBodyTooLarge
        case .recallRefused(let code, _): code
        case .editRefused(let code, _): code
        case .groupRefused(let code, _): code
        case .invalidInput(let code, _): code
        case .notConnected: "sdk.notConnected"
        case .noAccount: "sdk.noAccount"
        case .unexpectedReply: "sdk.unexpectedReply"
        case .cancelled: "sdk.cancelled"
        case .timedOut: "sdk.timedOut"
        case .localStore: "sdk.localStore"
        case .uploadFailed: "sdk.uploadFailed"
        case .server(let code, _): code
        }
    }

    /// `error` as the SDK reports it: itself when it is one, ``cancelled`` for a cancellation, ``localStore(_:)``
    /// with its description otherwise. (Not an `init(_:)`: it would be chosen over ``init(_:conversation:)`` for a
    /// `WireError`.)
    static func reported(_ error: any Error) -> CourierError {
        if error is CancellationError { return .cancelled }
        return (error as? CourierError) ?? .localStore(String(describing: error))
    }

    /// What a model shows of `error`: nothing for a cancellation (the model stopped, or its work was replaced).
    static func shown(_ error: any Error) -> CourierError? {
        let reported = reported(error)
        return reported == .cancelled ? nil : reported
    }

    /// Maps an `error` frame to the SDK's error, keeping its code and readable message.
    init(_ error: WireError, conversation: ConversationID? = nil) {
        switch error.code {
        case .authInvalidToken, .authAccountMismatch, .authRequired, .authTokenRevoked: self = .unauthorized(error.message)
        case .accountNotFound: self = .accountNotFound(error.message)
        case .conversationNotAMember:
            self = conversation.map { .notAMember($0) } ?? .server(code: error.code, message: error.message)
        case .messageNotFound: self = .messageNotFound(error.message)
        case .messageBodyTooLarge: self = .bodyTooLarge(error.message)
        case .recallNotPermitted, .recallWindowExpired, .recallAlreadyRecalled:
            self = .recallRefused(code: error.code, message: error.message)
        case .editNotPermitted, .editWindowExpired, .editRecalled:
            self = .editRefused(code: error.code, message: error.message)
        case .groupNotFound, .groupAlreadyExists, .groupNotPermitted, .groupOwnerCannotLeave, .groupNotAMember,
            .groupAlreadyMember, .groupTooManyAccounts, .receiptNotPermitted, .receiptGroupTooLarge,
            .receiptNotRequested,
            .receiptAlreadyRequested:
            self = .groupRefused(code: error.code, message: error.message)
        case .invalidArgument, .conversationInvalid, .messageNotInConversation, .receiptBeyondLastMessage,
            .frameInvalid,
            .frameTooLarge, .frameUnknownType:
            self = .invalidInput(code: error.code, message: error.message)
        default: self = .server(code: error.code, message: error.message)
        }
    }
}

extension CourierError: CustomStringConvertible {
    /// A readable sentence with the code; never a body or token.
    public var description: String {
        switch self {
        case .unauthorized(let message), .accountNotFound(let message), .messageNotFound(let message),
            .bodyTooLarge(let message), .invalidInput(_, let message), .server(_, let message),
            .recallRefused(_, let message), .editRefused(_, let message), .groupRefused(_, let message),
            .localStore(let message), .uploadFailed(let message):
            "\(code): \(message)"
        case .notAMember(let conversation): "\(code): You are not a member of \(conversation)."
        case .notConnected: "\(code): Not connected to the server; this call needs a connection."
        case .noAccount: "\(code): The client has no account yet: connect first."
        case .unexpectedReply: "\(code): The server answered something this SDK did not expect: versions that do not agree."
        case .cancelled: "\(code): The task was cancelled."
        case .timedOut: "\(code): The server did not answer in time."
        }
    }
}

extension ErrorCode {
    /// A refusal that says "not now" rather than "no": `store.unavailable` (the server's database cannot be reached).
    /// The SDK keeps what it was sending queued and sends it again on the next connection, after the backoff.
    var isRetriedLater: Bool { self == .storeUnavailable }
}
