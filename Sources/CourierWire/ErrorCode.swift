// Courier — Apache-2.0

/// A stable, namespaced error code, the same on the wire and in the SDK (`"message.bodyTooLarge"`).
///
/// An open set: a newer server may send codes an older client does not know, so switch with a `default:` branch.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
}

extension ErrorCode {
    // MARK: Frames
    /// The frame is not valid JSON, or lacks `type`, `id` or a required field, or a field has the wrong type.
    public static let frameInvalid: ErrorCode = "frame.invalid"
    /// The frame's `type` is not one this server knows.
    public static let frameUnknownType: ErrorCode = "frame.unknownType"
    /// The frame is larger than `maxFrameBytes`.
    public static let frameTooLarge: ErrorCode = "frame.tooLarge"
    /// A request came before `connect` succeeded.
    public static let authRequired: ErrorCode = "auth.required"
    /// The token is malformed, has a bad signature, lacks `sub` or `exp`, or has expired.
    public static let authInvalidToken: ErrorCode = "auth.invalidToken"
    /// An account id in the frame that must be the caller's is someone else's.
    public static let authAccountMismatch: ErrorCode = "auth.accountMismatch"
    /// The REST API was called without the app secret.
    public static let authInvalidSecret: ErrorCode = "auth.invalidSecret"
    /// `connect` was sent twice on one connection.
    public static let authAlreadyConnected: ErrorCode = "auth.alreadyConnected"
    /// The session's token expired: sent without a request id just before the server closes the connection (close
    /// code 1008, reason `auth.tokenExpired`). Connect again with a fresh token.
    public static let authTokenExpired: ErrorCode = "auth.tokenExpired"
    /// Too many failed `connect`s (or REST calls with a wrong credential) came from this address lately; try again
    /// later.
    public static let authThrottled: ErrorCode = "auth.throttled"
    /// (REST) The API key has no scope that allows this operation (403): the operation's `security` in openapi.yaml
    /// lists those that do. Keys and signing keys are the app secret's alone.
    public static let authScopeMissing: ErrorCode = "auth.scopeMissing"
    /// The app's backend deactivated the account: its devices cannot connect until it is reactivated. Also the close
    /// reason (code 1008) of the sessions it had.
    public static let authAccountDeactivated: ErrorCode = "auth.accountDeactivated"
    /// The app's backend revoked the account's tokens issued before some time, this one among them: connect with a
    /// new token. Also the close reason (code 1008) of the sessions opened with such a token.
    public static let authTokenRevoked: ErrorCode = "auth.tokenRevoked"

    // MARK: Domain
    /// A field's value is malformed (an account id with bad characters, a negative limit, …).
    public static let invalidArgument: ErrorCode = "request.invalidArgument"
    /// (REST) The request body is larger than the published limit.
    public static let requestTooLarge: ErrorCode = "request.tooLarge"
    /// (REST) No endpoint has this path.
    public static let requestNotFound: ErrorCode = "request.notFound"
    /// (REST) The endpoint does not take this method.
    public static let requestMethodNotAllowed: ErrorCode = "request.methodNotAllowed"
    /// (REST, `courier-server import`) A line of history lines is not a valid record (docs/import.md): nothing of it
    /// or after it was written.
    public static let importInvalidRecord: ErrorCode = "import.invalidRecord"
    /// (Import) A line's id is the id of another entry: message ids are unique in the database.
    public static let messageIDInUse: ErrorCode = "message.idInUse"
    /// (Media) No such file, or one the caller may not fetch (not a member of its conversation), or one that was
    /// erased: the same answer, so that whether a file exists does not leak.
    public static let mediaNotFound: ErrorCode = "media.notFound"
    /// (Media) The file is larger than the server's `--media-max-bytes`.
    public static let mediaTooLarge: ErrorCode = "media.tooLarge"
    /// (Media) The file's `Content-Type` is not one of the server's `--media-types`.
    public static let mediaTypeNotAllowed: ErrorCode = "media.typeNotAllowed"
    /// (REST) A webhook endpoint's URL names, or resolves to, an address webhooks may not reach: a link-local or
    /// cloud metadata address always; a loopback, private, unspecified, multicast or reserved one unless the server
    /// runs with `--webhook-allow-private true` (docs/webhooks.md). Nothing was created or changed.
    public static let webhookURLNotAllowed: ErrorCode = "webhook.urlNotAllowed"
    /// (REST) No API key or signing key has this id.
    public static let keyNotFound: ErrorCode = "key.notFound"
    /// (REST) The signing key is the only one that signs client tokens: make a new one first
    /// (`POST /v1/signing-keys`), which retires it after a grace period.
    public static let keyLastSigningKey: ErrorCode = "key.lastSigningKey"
    /// The account is not known to the server.
    public static let accountNotFound: ErrorCode = "account.notFound"
    /// (REST) The account is deactivated: the app's backend cannot send as it nor mint it tokens until it is
    /// reactivated.
    public static let accountDeactivated: ErrorCode = "account.deactivated"
    /// The conversation id is malformed.
    public static let conversationInvalid: ErrorCode = "conversation.invalid"
    /// The conversation has no messages yet, or does not exist.
    public static let conversationNotFound: ErrorCode = "conversation.notFound"
    /// The caller is not a participant of the conversation.
    public static let conversationNotAMember: ErrorCode = "conversation.notAMember"
    /// The body is larger than `maxBodyBytes`.
    public static let messageBodyTooLarge: ErrorCode = "message.bodyTooLarge"
    /// No message has that id.
    public static let messageNotFound: ErrorCode = "message.notFound"
    /// The message exists but belongs to another conversation than the one named.
    public static let messageNotInConversation: ErrorCode = "message.notInConversation"
    /// A receipt names a seq beyond the conversation's last message.
    public static let receiptBeyondLastMessage: ErrorCode = "receipt.beyondLastMessage"
    /// The server's read-receipt policy does not allow this: changing the setting while the policy fixes it, or a
    /// private read when every read must be shared.
    public static let receiptFixedByPolicy: ErrorCode = "receipt.fixedByPolicy"
    /// The caller may not recall this message (direct chats: only its sender).
    public static let recallNotPermitted: ErrorCode = "recall.notPermitted"
    /// The recall window has passed.
    public static let recallWindowExpired: ErrorCode = "recall.windowExpired"
    /// Someone else already recalled the message (a repeat by the same requester returns the original recall).
    public static let recallAlreadyRecalled: ErrorCode = "recall.alreadyRecalled"
    /// (SDK) The message never got the server's ack, so there is nothing to recall on the server.
    public static let recallNotSent: ErrorCode = "recall.notSent"
    /// The caller may not edit this message: only its sender does, and in a group the owner and admins when the
    /// server lets them (`--admins-edit-messages`).
    public static let editNotPermitted: ErrorCode = "edit.notPermitted"
    /// The edit window has passed (`--edit-window-seconds` after sending).
    public static let editWindowExpired: ErrorCode = "edit.windowExpired"
    /// The message was recalled: there is nothing left to edit.
    public static let editRecalled: ErrorCode = "edit.recalled"
    /// The message was recalled: it takes no reactions.
    public static let reactionMessageRecalled: ErrorCode = "reaction.messageRecalled"
    /// The caller has 20 reactions on the message, or the message 50 distinct ones.
    public static let reactionTooMany: ErrorCode = "reaction.tooMany"
    /// No group has that id.
    public static let groupNotFound: ErrorCode = "group.notFound"
    /// A group with that id exists already.
    public static let groupAlreadyExists: ErrorCode = "group.alreadyExists"
    /// The caller's role does not allow this change (see `groupChange`).
    public static let groupNotPermitted: ErrorCode = "group.notPermitted"
    /// The owner cannot leave; it transfers ownership first.
    public static let groupOwnerCannotLeave: ErrorCode = "group.ownerCannotLeave"
    /// An account named in a membership change is not a member (remove, setRole, transferOwnership).
    public static let groupNotAMember: ErrorCode = "group.notAMember"
    /// Every account named in an `add` is a member already.
    public static let groupAlreadyMember: ErrorCode = "group.alreadyMember"
    /// More accounts in one request than `maxGroupChangeAccounts`.
    public static let groupTooManyAccounts: ErrorCode = "group.tooManyAccounts"
    /// The caller may not ask for read receipts here: only the sender asks afterwards, and the server's
    /// `receipts.group.requesters` may limit asking to the owner and admins.
    public static let receiptNotPermitted: ErrorCode = "receipt.notPermitted"
    /// The group is larger than the server's `receipts.group.maxSize`.
    public static let receiptGroupTooLarge: ErrorCode = "receipt.groupTooLarge"
    /// The message did not ask for read receipts (receipt counts and lists exist only for those that did).
    public static let receiptNotRequested: ErrorCode = "receipt.notRequested"
    /// The message already asks for read receipts.
    public static let receiptAlreadyRequested: ErrorCode = "receipt.alreadyRequested"
    /// A `sync` request's `since` was not handed out by this server's database (a restored backup, a move between
    /// backends) or is malformed: sync again without it, naming the conversations you hold in `cursors`.
    public static let syncCursorInvalid: ErrorCode = "sync.cursorInvalid"
    /// The server's database cannot be reached right now (stopped, failing over, refusing connections, or not
    /// answering within the server's `--database-timeout-seconds`). Retry after a moment: REST answers 503 with
    /// `Retry-After`. A write answered so may have been committed if the database failed after it did; every write
    /// is idempotent (a send by its `clientId`, a read by its position), so the retry is safe.
    public static let storeUnavailable: ErrorCode = "store.unavailable"
    /// The device (or its account) sent more writes than the server takes in a while: nothing was written. Ask again
    /// after the error's `retryAfterMs`; requests sent before then are refused the same way, so none overtakes another.
    public static let rateLimited: ErrorCode = "rate.limited"
    /// Something went wrong on the server; nothing was written. Retrying is safe.
    public static let `internal`: ErrorCode = "internal"
}

/// The body of an `error` frame: a stable code and a readable sentence that never contains message bodies or
/// tokens.
public struct WireError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String
    /// With ``ErrorCode/rateLimited``: how long to wait before asking again, in milliseconds.
    public let retryAfterMs: Int?
    public init(code: ErrorCode, message: String, retryAfterMs: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfterMs = retryAfterMs
    }
    public var description: String { "\(code): \(message)" }
}
