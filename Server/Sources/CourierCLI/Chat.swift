// Courier — Apache-2.0
import ArgumentParser
import CourierSDK
import CourierWire
import Foundation

/// `courier chat`: an interactive terminal chat on the SDK. The screen is redrawn from the local store whenever an
/// event arrives, so a message turns ✓ then ✓✓ in place, group messages show "read by N/M", and a recalled message is
/// replaced by a tip. The conversation on screen counts as read, as in an app.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat with PEER (or in g:GROUP) in the terminal: ✓ delivered, ✓✓ read, read by N/M, recalls.",
        discussion: """
            Type a line to send it. Commands: /recall [N] recalls your message #N (default: your last one); \
            /ask N asks the group for read receipts of your message #N; /receipts on|off asks for them on what you \
            send next (groups); /who N lists who read message #N; /quit (or end of input) leaves.
            """
    )

    @OptionGroup var options: ClientOptions
    @Argument(help: "A peer account, or a conversation id (g:GROUP for a group).") var peerOrGroup: String
    @Option(help: "How many of the newest messages to show.") var lines = 15

    func run() async throws {
        try await options.withClient { client in
            let screen = ChatScreen(
                client: client,
                me: options.accountID,
                conversation: options.conversation(peerOrGroup),
                lines: lines
            )
            try await screen.run(input: Self.standardInputLines())
        }
    }

    /// Lines typed on standard input, read on a thread of their own (reading blocks).
    static func standardInputLines() -> AsyncStream<String> {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        let reader = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        reader.start()
        return lines
    }
}

/// The chat's state and drawing. Redraws the whole screen from the local store after every change.
actor ChatScreen {
    let client: CourierClient
    let me: AccountID
    let conversation: ConversationID
    let lines: Int
    private var asksForReceipts: Bool
    private var status = "Type a message, or /help."
    private var connection = "connecting"

    init(client: CourierClient, me: AccountID, conversation: ConversationID, lines: Int) {
        self.client = client
        self.me = me
        self.conversation = conversation
        self.lines = lines
        self.asksForReceipts = conversation.kind == .group
    }

    var isGroup: Bool { conversation.kind == .group }

    func run(input: AsyncStream<String>) async throws {
        let events = client.events()
        connection = "connected"
        try await markReadIfNeeded()
        try await refreshGroupCounts()
        try await draw()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events { try await self.handle(event) }
            }
            group.addTask {
                for await line in input {
                    guard try await self.command(line) else { return }
                }
            }
            // Input ends (/quit or end of file): leave, which also ends the event loop.
            _ = try await group.next()
            group.cancelAll()
        }
    }

    // MARK: Events

    private func handle(_ event: CourierEvent) async throws {
        switch event {
        case .messageReceived(let message) where message.conversation == conversation:
            try await markReadIfNeeded()
        case .messageRecalled(let notice) where notice.conversation == conversation:
            let who = notice.recalledBy == me ? "You" : notice.recalledBy.rawValue
            _ = try await client.insertRecallTip(for: notice.messageID, text: "\(who) recalled a message")
        case .connectionStateChanged(let state):
            connection =
                switch state {
                case .connected: "connected"
                case .connecting: "connecting"
                case .waitingToReconnect: "reconnecting"
                case .disconnected: "disconnected"
                }
        default:
            break
        }
        try await draw()
    }

    /// The conversation is on screen: what others sent counts as read (a conversation read ack).
    private func markReadIfNeeded() async throws {
        guard try await client.unreadCount(in: conversation) > 0 else { return }
        try await client.markConversationRead(conversation)
    }

    private func refreshGroupCounts() async throws {
        guard isGroup else { return }
        let asked = try await client.messages(in: conversation, limit: lines)
            .filter { $0.sender == me && $0.needsReadReceipt }.map(\.id)
        if !asked.isEmpty { _ = try await client.readReceiptCounts(for: asked, in: conversation) }
    }

    // MARK: Commands

    /// Handles one typed line; `false` to leave.
    private func command(_ line: String) async throws -> Bool {
        let text = line.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return true }
        do {
            if text.hasPrefix("/") {
                guard try await slashCommand(text.split(separator: " ").map(String.init)) else { return false }
            } else {
                let sent = try await client.send(text, to: conversation, needsReadReceipt: isGroup && asksForReceipts).stored()
                if sent.needsReadReceipt { _ = try await client.readReceiptCounts(for: [sent.id], in: conversation) }
                status = "Sent #\(sent.seq)."
            }
        } catch let error as CourierError {
            status = "error: \(error)"
        }
        try await draw()
        return true
    }

    private func slashCommand(_ words: [String]) async throws -> Bool {
        switch words[0] {
        case "/quit", "/q":
            return false
        case "/recall":
            let target = try await ownMessage(words.dropFirst().first)
            _ = try await client.recall(target.id, in: conversation)
            _ = try await client.insertRecallTip(for: target.id, text: "You recalled a message")
            status = "Recalled #\(target.seq)."
        case "/ask" where isGroup:
            let target = try await ownMessage(words.dropFirst().first)
            try await client.requestReadReceipts(for: target.id, in: conversation)
            _ = try await client.readReceiptCounts(for: [target.id], in: conversation)
            status = "Asked for read receipts of #\(target.seq)."
        case "/receipts" where isGroup && words.count == 2 && ["on", "off"].contains(words[1]):
            asksForReceipts = words[1] == "on"
            status = "Read receipts are \(asksForReceipts ? "asked for" : "not asked for") on what you send."
        case "/who" where isGroup && words.count == 2:
            let target = try await message(numbered: words[1])
            let read = try await client.readReceiptList(for: target.id, in: conversation, list: .read)
            let unread = try await client.readReceiptList(for: target.id, in: conversation, list: .unread)
            let names = { (list: ReadReceiptList) in list.entries.map(\.account.rawValue).joined(separator: ", ") }
            status = "#\(target.seq) read by \(read.total): \(names(read)) · unread \(unread.total): \(names(unread))"
        default:
            status =
                isGroup
                ? "Commands: /recall [N], /ask N, /receipts on|off, /who N, /quit." : "Commands: /recall [N], /quit."
        }
        return true
    }

    /// Your message #`number`, or your newest one.
    private func ownMessage(_ number: String?) async throws -> Message {
        if let number { return try await message(numbered: number) }
        let newest = try await client.messages(in: conversation, limit: 200).last {
            $0.sender == me && $0.kind == .message && $0.status != .recalled
        }
        guard let newest else { throw CourierError.invalidInput(code: .invalidArgument, message: "Nothing of yours.") }
        return newest
    }

    private func message(numbered text: String) async throws -> Message {
        let shown = try await client.messages(in: conversation, limit: 200)
        guard let seq = Int64(text.trimmingCharacters(in: CharacterSet(charactersIn: "#"))),
            let found = shown.first(where: { $0.seq.rawValue == seq && $0.kind == .message && $0.status != .recalled })
        else {
            throw CourierError.invalidInput(code: .invalidArgument, message: "No message #\(text) on screen.")
        }
        return found
    }

    // MARK: Drawing

    private func draw() async throws {
        let messages = try await client.messages(in: conversation, limit: lines)
        let elsewhere = try await client.totalUnreadCount() - client.unreadCount(in: conversation)
        var screen = "\u{1B}[H\u{1B}[2J"
        let title = isGroup ? "in \(conversation)" : "with \(peerName)"
        screen += "Courier chat — \(me) \(title) · \(connection) · unread elsewhere: \(elsewhere)\n"
        screen += String(repeating: "─", count: 60) + "\n"
        for message in messages { screen += line(for: message) + "\n" }
        screen += String(repeating: "─", count: 60) + "\n"
        screen += status + "\n> "
        FileHandle.standardOutput.write(Data(screen.utf8))
    }

    private var peerName: String {
        conversation.directMembers.map { $0.0 == me ? $0.1.rawValue : $0.0.rawValue } ?? conversation.rawValue
    }

    private func line(for message: Message) -> String {
        let time = message.date.formatted(date: .omitted, time: .shortened)
        switch message.kind {
        case .recallTip: return "#\(message.seq) \(time)   ↩ \(message.body)"
        case .groupChange: return "#\(message.seq) \(time)   · \(message.body.isEmpty ? "group changed" : message.body)"
        case .message: break
        }
        if message.status == .recalled { return "#\(message.seq) \(time)   ↩ \(message.sender)'s message was recalled" }
        var text = "#\(message.seq) \(time) \(message.sender): \(message.body)"
        guard message.sender == me else { return text }
        if isGroup, message.needsReadReceipt, let counts = message.readReceiptCount {
            text += "  read by \(counts.readCount)/\(counts.readCount + counts.unreadCount)"
        } else if !isGroup {
            switch message.status {
            case .read: text += "  ✓✓"
            case .delivered: text += "  ✓"
            case .sending, .sent, .failed, .recalled: text += "  (\(message.status.rawValue))"
            }
        }
        return text
    }
}
