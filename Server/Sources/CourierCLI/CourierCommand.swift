// Courier — Apache-2.0
import ArgumentParser
import CourierSDK
import CourierWire
import CourierServer
import Foundation

/// `courier`: a scriptable client built on the SDK, exactly as an app uses it. Each command connects (catching up
/// into a local store per account), does one thing, prints it (a readable line, or one JSON object per line with
/// `--json`), and disconnects.
///
/// Exit codes: 0 success; 1 the server or SDK refused (the stable code and a sentence on standard error); 64 a usage
/// error.
@main
struct CourierCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A command-line Courier client: messages, reads, recalls, groups, receipts and live events.",
        subcommands: [
            Demo.self, Chat.self, Send.self, Read.self, Recall.self, History.self, Unread.self, GroupCommand.self,
            Receipts.self,
            Watch.self,
        ]
    )
}

/// Who to connect as, and where.
struct ClientOptions: ParsableArguments {
    @Option(help: "The server's WebSocket URL.") var server = "ws://127.0.0.1:8080/v1/ws"
    @Option(name: .customLong("as"), help: "The account to act as.") var account: String
    @Option(help: "A client token (default: minted with COURIER_APP_SECRET or the app secret of --data-dir).")
    var token: String?
    @Option(help: "The local server's data folder, whose app secret mints a token.") var dataDir = "./courier-data"
    @Option(help: "The local store folder (default: DATA_DIR/clients/ACCOUNT).") var store: String?
    @Flag(help: "Print one JSON object per line.") var json = false

    var accountID: AccountID { AccountID(rawValue: account) }

    func validate() throws {
        guard accountID.isValid else { throw ValidationError("Account ids are 1–128 characters of [A-Za-z0-9._@-].") }
        guard URL(string: server)?.scheme?.hasPrefix("ws") == true else {
            throw ValidationError("--server must be a ws:// or wss:// URL.")
        }
    }

    /// A peer account (a direct conversation with it) or a conversation id (`g:GROUP` for a group).
    func conversation(_ peerOrConversation: String) -> ConversationID {
        if peerOrConversation.contains(":") { return ConversationID(rawValue: peerOrConversation) }
        return .direct(accountID, AccountID(rawValue: peerOrConversation))
    }

    /// Connects a client (caught up) and runs `body`; maps failures to the documented exit codes.
    func withClient(_ body: (CourierClient) async throws -> Void) async throws {
        let folder = store ?? "\(dataDir)/clients/\(account)"
        let client = try CourierClient(
            configuration: .init(
                serverURL: URL(string: server)!,
                store: .file(URL(fileURLWithPath: folder).appendingPathComponent("store.sqlite"))
            )
        )
        do {
            // Connecting includes catching up into the local store, which takes a while after a long time offline:
            // say so on a terminal (scripts reading --json or a pipe get nothing extra).
            let showsProgress = isatty(STDERR_FILENO) == 1
            if showsProgress {
                FileHandle.standardError.write(Data("Connecting to \(server) as \(account) and catching up…".utf8))
            }
            try await client.connect(account: accountID, token: try await resolveToken())
            if showsProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            try await body(client)
            await client.disconnect()
        } catch let error as CourierError {
            await client.disconnect()
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    private func resolveToken() async throws -> String {
        if let token { return token }
        // The secret the local server uses: the environment's, as the server prefers it, or its data folder's.
        let environment = ProcessInfo.processInfo.environment["COURIER_APP_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        guard let secret = try environment.map(AppSecret.init) ?? AppSecret.load(inFolder: dataDir) else {
            throw ValidationError("No --token, no COURIER_APP_SECRET and no \(dataDir)/app-secret to mint one.")
        }
        return try await TokenAuthority(secret: secret).token(for: accountID, lifetime: .seconds(3600))
    }

    /// Prints a result: JSON (one object per line) or a readable line, flushed at once (a pipe would otherwise
    /// hold `watch`'s lines until exit).
    func emit(_ object: [String: Any], text: @autoclosure () -> String) {
        if json {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(text())
        }
        fflush(nil)
    }
}

extension Message {
    var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "id": id.rawValue, "conversation": conversation.rawValue, "seq": seq.rawValue, "sender": sender.rawValue,
            "time": time.rawValue, "body": body, "status": status.rawValue, "isReadAcked": isReadAcked,
            "kind": kind.rawValue,
        ]
        if let replyTo { object["replyTo"] = replyTo.rawValue }
        if let quote { object["quote"] = quote }
        if let editedAt { object["editedAt"] = editedAt.rawValue }
        return object
    }

    var line: String {
        let mark =
            switch status {
            case .read: "✓✓"
            case .delivered: "✓"
            default: status.rawValue
            }
        return "#\(seq) \(sender): \(body)  \(mark)  [\(id)]"
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send a message to PEER (or a conversation id).")
    @OptionGroup var options: ClientOptions
    @Argument(help: "A peer account, or a conversation id.") var to: String
    @Argument(help: "The text.") var text: String
    @Option(help: "The id of the message this one replies to.") var replyTo: String?
    @Flag(help: "Ask the group's members for read receipts.") var needsReadReceipt = false

    func run() async throws {
        try await options.withClient { client in
            let message = try await client.send(
                text,
                to: options.conversation(to),
                replyTo: replyTo.map(MessageID.init(rawValue:)),
                needsReadReceipt: needsReadReceipt
            ).stored()
            options.emit(message.jsonObject, text: message.line)
        }
    }
}

struct Read: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark read: one message (--message), everything (--all) or up to a time (--up-to-time)."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "A peer account, or a conversation id.") var conversation: String
    @Option(help: "A message id (repeat for several).") var message: [String] = []
    @Flag(help: "Everything up to the newest message.") var all = false
    @Option(help: "Every message with time <= this (ms since the epoch).") var upToTime: Int64?
    @Flag(help: "Clear your unread state without telling the sender.") var privately = false
    @Option(help: "A short note for the sender of the group messages acked with --message (≤ 256 bytes).")
    var content: String?

    func validate() throws {
        guard [!message.isEmpty, all, upToTime != nil].filter({ $0 }).count == 1 else {
            throw ValidationError("Give exactly one of --message, --all and --up-to-time.")
        }
        guard content == nil || (!message.isEmpty && !privately) else {
            throw ValidationError("--content goes with --message (and is not private).")
        }
    }

    func run() async throws {
        try await options.withClient { client in
            let id = options.conversation(conversation)
            if all {
                try await client.markConversationRead(id, privately: privately)
            } else if let upToTime {
                try await client.markRead(upTo: Timestamp(milliseconds: upToTime), in: id, privately: privately)
            } else if let content {
                try await client.markRead(message.map(MessageID.init(rawValue:)), in: id, content: content)
            } else {
                try await client.markRead(message.map(MessageID.init(rawValue:)), in: id, privately: privately)
            }
            let unread = try await client.unreadCount(in: id)
            options.emit(["conversation": id.rawValue, "unreadCount": unread], text: "\(id): \(unread) unread")
        }
    }
}

struct Recall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Recall a message you sent.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "A peer account, or a conversation id.") var conversation: String
    @Argument(help: "The message id.") var messageID: String
    @Flag(help: "One-way: only the recipients' copies go.") var oneWay = false
    @Option(help: "A note shown with the recall.") var postscript: String?

    func run() async throws {
        try await options.withClient { client in
            let notice = try await client.recall(
                MessageID(rawValue: messageID),
                in: options.conversation(conversation),
                mode: oneWay ? .oneWay : .twoWay,
                postscript: postscript
            )
            options.emit(
                [
                    "messageId": notice.messageID.rawValue, "conversation": notice.conversation.rawValue,
                    "mode": notice.mode.rawValue, "time": notice.time.rawValue,
                ],
                text: "recalled \(notice.messageID)"
            )
        }
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a conversation's newest messages.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "A peer account, or a conversation id.") var conversation: String
    @Option(help: "How many.") var limit = 20

    func run() async throws {
        try await options.withClient { client in
            for message in try await client.messages(in: options.conversation(conversation), limit: limit) {
                options.emit(message.jsonObject, text: message.line)
            }
        }
    }
}

struct Unread: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print unread counts per conversation and in total.")
    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await options.withClient { client in
            var total = 0
            for conversation in try await client.conversations() where conversation.unreadCount > 0 {
                total += conversation.unreadCount
                options.emit(
                    ["conversation": conversation.id.rawValue, "unreadCount": conversation.unreadCount],
                    text: "\(conversation.id): \(conversation.unreadCount)"
                )
            }
            options.emit(["total": total], text: "total: \(total)")
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print events as they arrive.")
    @OptionGroup var options: ClientOptions
    @Option(help: "Stop after this many events (default: run until interrupted).") var count: Int?

    func run() async throws {
        try await options.withClient { client in
            let events = client.events()
            // Connected and caught up: say so, so that scripts know when to act.
            options.emit(["event": "ready"], text: "watching as \(options.account)")
            var seen = 0
            for await event in events {
                guard let (object, text) = Self.describe(event) else { continue }
                options.emit(object, text: text)
                seen += 1
                if let count, seen >= count { break }
            }
        }
    }

    static func describe(_ event: CourierEvent) -> ([String: Any], String)? {
        switch event {
        case .messageReceived(let message):
            var object = message.jsonObject
            object["event"] = "messageReceived"
            return (object, message.line)
        case .messageDelivered(let update):
            return (
                [
                    "event": "messageDelivered", "account": update.account.rawValue,
                    "messageIds": update.messageIDs.map(\.rawValue),
                ], "✓ delivered to \(update.account)"
            )
        case .messageRead(let update):
            return (
                [
                    "event": "messageRead", "account": update.account.rawValue,
                    "messageIds": update.messageIDs.map(\.rawValue),
                ], "✓✓ read by \(update.account)"
            )
        case .messageRecalled(let notice):
            return (
                [
                    "event": "messageRecalled", "messageId": notice.messageID.rawValue,
                    "arrival": notice.arrival.rawValue,
                ],
                "recalled \(notice.messageID) (\(notice.arrival))"
            )
        case .messageEdited(let message):
            var object = message.jsonObject
            object["event"] = "messageEdited"
            return (object, "edited \(message.id): \(message.line)")
        case .reactionsChanged(let update):
            return (
                [
                    "event": "reactionsChanged", "messageId": update.messageID.rawValue, "account": update.account.rawValue,
                    "reaction": update.reaction, "added": update.added,
                    "counts": Dictionary(update.counts.map { ($0.reaction, $0.count) }) { first, _ in first },
                ],
                "\(update.account) \(update.added ? "reacted" : "took back") \(update.reaction) on \(update.messageID)"
            )
        case .conversationRead(let update):
            return (
                ["event": "conversationRead", "conversation": update.conversation.rawValue],
                "read \(update.conversation) on another device"
            )
        case .unreadCountChanged(let update):
            return (
                [
                    "event": "unreadCountChanged", "conversation": update.conversation.rawValue,
                    "unreadCount": update.unreadCount, "total": update.totalUnreadCount,
                ],
                "unread \(update.conversation): \(update.unreadCount) (total \(update.totalUnreadCount))"
            )
        case .groupReadReceiptsChanged(let update):
            return (
                [
                    "event": "groupReadReceiptsChanged", "messageId": update.messageID.rawValue,
                    "readers": update.readers.keys.map(\.rawValue).sorted(), "readCount": update.readCount,
                    "unreadCount": update.unreadCount,
                ],
                "read by \(update.readCount)/\(update.readCount + update.unreadCount): \(update.messageID)"
            )
        case .readReceiptsRequested(let request):
            return (
                ["event": "readReceiptsRequested", "messageId": request.messageID.rawValue],
                "\(request.requester) asks for read receipts of \(request.messageID)"
            )
        case .typingChanged(let update):
            let who = update.accounts.map(\.rawValue)
            return (
                ["event": "typingChanged", "conversation": update.conversation.rawValue, "accounts": who],
                who.isEmpty ? "nobody typing in \(update.conversation)" : "\(who.joined(separator: ", ")) typing in \(update.conversation)"
            )
        case .profileChanged(let profile):
            return (
                [
                    "event": "profileChanged", "account": profile.account.rawValue,
                    "displayName": profile.displayName ?? "", "version": profile.version,
                ],
                "\(profile.account) is now \(profile.displayName.map { "“\($0)”" } ?? "nameless")"
            )
        case .connectionStateChanged, .uploadProgress:
            return nil
        }
    }
}
