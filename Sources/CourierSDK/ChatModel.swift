// Courier — Apache-2.0
public import Foundation
public import Observation
public import CourierWire

/// A chat screen's state, to bind a list to (Observation's `@Observable`: SwiftUI redraws what changed).
///
/// It shows a window of the conversation: the newest `pageSize` messages at first, then as far back as
/// ``loadOlder()`` paged, and everything newer as it arrives, with your messages still in the outbox after them
/// (local echo: a row appears as soon as you send, keeps its ``ChatItem/id`` when the server stores it, and shows
/// receipts and recalls in place). Paging is anchored: older rows are put before the ones shown, which stay as they
/// are, so the list does not jump.
///
/// ```swift
/// struct ChatView: View {
///     @State var model: ChatModel
///
///     var body: some View {
///         List(model.items) { item in
///             Text(item.kind == .recalled ? "Message recalled" : item.body)
///                 .onAppear { Task { await model.markVisibleRead(item) } }
///         }
///         .task { model.start() }
///     }
/// }
/// ```
///
/// NIM `messagesInSession:message:limit:` with `NIMChatManagerDelegate`, Agora
/// `loadMessagesStartFromId:count:searchDirection:completion:` with `AgoraChatManagerDelegate`, RongCloud
/// `getHistoryMessages:targetId:oldestMessageId:count:` with its receive delegate: one object instead.
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
@MainActor
@Observable
public final class ChatModel {
    /// Where a chat screen opens (``init(client:conversation:pageSize:openAt:)``, ``open(at:)``).
    public enum Anchor: Sendable, Hashable {
        /// The newest messages, following what arrives: the default.
        case newest
        /// The oldest message of others you have not read (where a "new messages" line goes), with the messages
        /// before it above; the newest when you have read everything. NIM's and Agora's "jump to the first unread".
        case firstUnread
        /// A message this device holds (a search result, the message a reply quotes, a notification's), half a
        /// page of messages before it and after it.
        case message(MessageID)
    }

    public let conversation: ConversationID
    /// The rows shown, oldest first: stored messages, then — when the window reaches the newest — yours still in the
    /// outbox.
    public private(set) var items: [ChatItem] = []
    /// Whether older messages may exist (here or on the server): ``loadOlder()`` pages them.
    public private(set) var hasOlder = true
    /// While ``loadOlder()`` runs.
    public private(set) var isLoadingOlder = false
    /// Whether newer messages than the rows shown exist: the window was opened at a message or at the first unread,
    /// and ``loadNewer()`` pages towards the newest. `false` once the window reaches the newest message, from when
    /// it follows what arrives.
    public private(set) var hasNewer = false
    /// While ``loadNewer()`` runs.
    public private(set) var isLoadingNewer = false
    /// The row the window was opened at (``Anchor/message(_:)``, ``Anchor/firstUnread``), by its ``ChatItem/id``:
    /// scroll to it once ``items`` holds it. `nil` when opened at the newest.
    public private(set) var anchorItemID: ChatItem.ID?
    /// Set it from the list's scroll position: `true` while the newest row is on screen. While it is `false`,
    /// ``newBelow`` counts the messages of others that arrive (for a "↓ 3 new messages" button); setting it back to
    /// `true` resets the count.
    public var isAtBottom = true {
        didSet { if isAtBottom { newBelow = 0 } }
    }
    /// Messages of others that arrived while ``isAtBottom`` was `false`.
    public private(set) var newBelow = 0
    /// The last error of the live window or of an action (cleared by the next success).
    public private(set) var error: CourierError?
    /// The other members typing now, in the order they started ("Bob is typing…"): kept up to date from when
    /// ``start()`` is called, emptied when their indicator runs out or their message arrives.
    public private(set) var typing: [AccountID] = []
    /// How far each of your rows still uploading its attachment has gone, 0…1, by its client id (the row's
    /// ``PendingMessage/clientID``): draw a progress ring on it; ``cancel(_:)`` stops it. A row leaves it when its
    /// upload ends.
    public private(set) var uploadProgress: [ClientMessageID: Double] = [:]

    @ObservationIgnored private let client: CourierClient
    @ObservationIgnored private let pageSize: Int
    @ObservationIgnored private var anchor: Anchor
    /// The oldest seq shown; `nil` until the first page was read.
    @ObservationIgnored private var first: Seq?
    /// The newest seq shown while the window stops short of the newest (``hasNewer``); `nil` when it follows.
    @ObservationIgnored private var last: Seq?
    /// The seq of the row opened at, until ``anchorItemID`` is found.
    @ObservationIgnored private var anchorSeq: Seq?
    /// Each opened window's number: a page loaded for a window that was replaced (``open(at:)``, ``stop()``) is
    /// dropped.
    @ObservationIgnored private var epoch = 0
    /// Whether the window's next emission may count arrivals (``newBelow``): not the first after it changed bounds.
    @ObservationIgnored private var countsArrivals = false
    /// The account and its role in the group, as last read: the deadlines are answered without a store read.
    @ObservationIgnored private var me: AccountID?
    @ObservationIgnored private var role: MemberRole?
    @ObservationIgnored private var window: Task<Void, Never>?
    /// Each window's number: an emission of a window that was replaced is dropped.
    @ObservationIgnored private var generation = 0
    @ObservationIgnored private var readUpTo = Seq.zero
    /// The newest row made visible since the last read was sent, and the read about to send it.
    @ObservationIgnored private var visibleRead: (seq: Seq, id: MessageID)?
    @ObservationIgnored private var visibleReadFlush: Task<Void, Never>?
    @ObservationIgnored private var typingWatch: Task<Void, Never>?

    /// - Parameters:
    ///   - client: The client whose local store it shows (it follows the client's account).
    ///   - conversation: The conversation shown.
    ///   - pageSize: How many messages the first page and each ``loadOlder()`` or ``loadNewer()`` show (at least 1).
    ///   - anchor: Where it opens: the newest (the default), the first unread, or a message.
    public init(client: CourierClient, conversation: ConversationID, pageSize: Int = 50, openAt anchor: Anchor = .newest) {
        self.client = client
        self.conversation = conversation
        self.pageSize = max(1, pageSize)
        self.anchor = anchor
    }

    isolated deinit {
        window?.cancel()
        typingWatch?.cancel()
    }

    /// Starts showing the conversation, live (works offline, from the local store). Calling it again does nothing.
    /// Started before the client knows its account (a launch before the first connect), it shows the conversation
    /// as soon as the client connects.
    public func start() {
        guard window == nil else { return }
        let (client, conversation) = (self.client, self.conversation)
        let events = client.events()
        typing = client.typingAccounts(in: conversation)
        typingWatch = Task { [weak self] in
            for await event in events {
                switch event {
                case .uploadProgress(let progress) where progress.conversation == conversation:
                    guard let self else { return }
                    self.uploadProgress[progress.clientID] = progress.fraction < 1 ? progress.fraction : nil
                case _ where event.typingUpdate?.conversation == conversation:
                    guard let self, let update = event.typingUpdate else { return }
                    self.typing = update.accounts
                default:
                    continue
                }
            }
        }
        openWindow()
    }

    /// Opens the window at `anchor` instead of the rows shown: jump to a message (a quote tapped, a search result),
    /// to the first unread, or back to the newest (a "↓" button). Before ``start()`` it sets where that opens.
    public func open(at anchor: Anchor) {
        self.anchor = anchor
        guard window != nil else { return }
        openWindow()
    }

    /// Reads where the window opens, then follows it.
    private func openWindow() {
        let (client, conversation, pageSize, anchor) = (self.client, self.conversation, self.pageSize, self.anchor)
        generation += 1
        epoch += 1
        let started = generation
        window?.cancel()
        window = Task { [weak self] in
            do {
                // Started before the client knows its account (at launch, before connect): it waits for it.
                guard let me = await client.knownAccount() else { return }
                let floor = try await client.oldestShown(in: conversation)
                let role = conversation.groupID != nil ? try await client.store.role(in: conversation) : nil
                var at: Seq?
                switch anchor {
                case .newest: at = nil
                case .firstUnread: at = try await client.store.anchorSeq(in: conversation, at: nil, me: me)
                case .message(let id):
                    at = try await client.store.anchorSeq(in: conversation, at: id, me: me)
                    guard at != nil else {
                        throw CourierError.messageNotFound("This device holds no message \(id) in \(conversation).")
                    }
                }
                var (first, last) = (floor, Seq?.none)
                if let at {
                    // Half a page before the anchor, the rest from it on.
                    // Only what the device holds without a gap: paging goes to the server past one.
                    let before = try await client.store.page(in: conversation, before: at, limit: pageSize / 2, me: me)
                    let after = try await client.store.page(
                        in: conversation, after: Seq(at.rawValue - 1), limit: pageSize - pageSize / 2, me: me
                    )
                    first = max(floor, before.complete ? before.lowest ?? at : at)
                    let highest = after.highest ?? at
                    last = after.complete && highest >= after.newest ? nil : highest
                } else {
                    // Everything from the oldest of the first page on; an empty conversation shows whatever comes.
                    let newest = try await client.messages(in: conversation, limit: pageSize)
                    first = newest.first?.seq ?? floor
                }
                guard let self, self.generation == started else { return }  // stopped or replaced meanwhile
                (self.me, self.role) = (me, role)
                self.first = first
                self.last = last
                self.anchorSeq = at
                self.anchorItemID = nil
                self.hasOlder = first > floor
                self.hasNewer = last != nil
                self.newBelow = 0
                self.follow(from: first)
            } catch {
                guard let self, self.generation == started else { return }
                if let reported = CourierError.shown(error) { self.error = reported }
            }
        }
    }

    /// Stops following the conversation (the rows stay).
    public func stop() {
        generation += 1
        epoch += 1
        window?.cancel()
        window = nil
        typingWatch?.cancel()
        typingWatch = nil
    }

    /// Puts up to `pageSize` older messages before the rows shown: from the local store when it holds them without a
    /// gap, from the server otherwise (``CourierClient/history(in:before:limit:)``, which stores them here). The rows
    /// already shown stay as they are.
    ///
    /// - Returns: How many messages were added: 0 at the start of the conversation (``hasOlder`` is then false), or
    ///   when the page held notices only (``hasOlder`` stays true: call again).
    @discardableResult
    public func loadOlder() async throws -> Int {
        guard hasOlder, !isLoadingOlder, let oldest = first, let me else { return 0 }
        isLoadingOlder = true
        defer { isLoadingOlder = false }
        let opened = epoch
        do {
            // What you cleared is not shown (ADR 0029): paging stops above it.
            let floor = try await client.oldestShown(in: conversation)
            guard oldest > floor else {
                hasOlder = false
                return 0
            }
            // The device's entries right below the rows shown, notices included, must have no hole; otherwise the
            // server has the truth (and the page it returns is stored here).
            var (page, lowest, complete) = try await client.store.page(
                in: conversation, before: oldest, limit: pageSize, me: me
            )
            if !complete {
                (page, lowest) = try await client.historyPage(in: conversation, before: oldest, limit: pageSize)
            }
            // The window was replaced or stopped meanwhile: this page is not its.
            guard epoch == opened else { return 0 }
            error = nil
            let shown = Set(items.map(\.id))
            let added = page.map(ChatItem.message).filter { !shown.contains($0.id) }
            if let lowest, lowest < oldest {
                first = lowest
                items = added + items
                follow(from: lowest)
            }
            // A page of notices only (after a purge, say) shows nothing but moves on: call again.
            hasOlder = (lowest ?? floor) > floor
            return added.count
        } catch {
            if let reported = CourierError.shown(error) { self.error = reported }
            throw error
        }
    }

    /// Puts up to `pageSize` newer messages after the rows shown, when the window stops short of the newest
    /// (``hasNewer``): from the local store when it holds them without a gap, from the server otherwise. Once the
    /// window reaches the newest message it follows what arrives, with your messages still in the outbox after it.
    ///
    /// - Returns: How many messages were added.
    @discardableResult
    public func loadNewer() async throws -> Int {
        guard hasNewer, !isLoadingNewer, let newest = last, let me else { return 0 }
        isLoadingNewer = true
        defer { isLoadingNewer = false }
        let opened = epoch
        do {
            var page = try await client.store.page(in: conversation, after: newest, limit: pageSize, me: me)
            if !page.complete {
                // The server pages backwards: the page that ends `pageSize` above the newest row shown.
                _ = try await client.historyPage(
                    in: conversation, before: Seq(newest.rawValue + Int64(pageSize) + 1), limit: pageSize
                )
                page = try await client.store.page(in: conversation, after: newest, limit: pageSize, me: me)
            }
            guard epoch == opened, let first = self.first else { return 0 }  // replaced or stopped meanwhile
            error = nil
            let highest = page.highest ?? newest
            last = page.complete && highest >= page.newest ? nil : highest
            hasNewer = last != nil
            follow(from: first)
            return page.messages.count
        } catch {
            if let reported = CourierError.shown(error) { self.error = reported }
            throw error
        }
    }

    /// Sends a text and returns at once: the row shows now (`sending`), and becomes `sent` in place.
    ///
    /// - Returns: The message's handle (``SendHandle``), or `nil` when it could not be queued (the reason is
    ///   ``error``).
    @discardableResult
    public func send(_ text: String, replyTo: MessageID? = nil) async -> SendHandle? {
        await send(.text(text), replyTo: replyTo)
    }

    /// Sends an attachment or your app's own message type and returns at once
    /// (``CourierClient/send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(MessageContent,_,_,_,_,_)``). A file
    /// attachment's upload shows on its row (``uploadProgress``) and can be cancelled (``cancel(_:)``).
    @discardableResult
    public func send(_ content: MessageContent, replyTo: MessageID? = nil, needsReadReceipt: Bool = false) async
        -> SendHandle?
    {
        // The row shows where the outbox does: after the newest message.
        if hasNewer { open(at: .newest) }
        return await act { try await $0.send(content, to: self.conversation, replyTo: replyTo, needsReadReceipt: needsReadReceipt) }
    }

    /// Call as the user types (on every change of the text field, `true`; `false` when it is cleared): the other
    /// members see that you are typing (``CourierClient/setTyping(_:in:)``, which sends a request only when needed).
    /// An indicator is best-effort: a refusal (offline, past the rate) is not an ``error`` of the screen.
    public func setTyping(_ typing: Bool) async {
        _ = try? await client.setTyping(typing, in: conversation)
    }

    /// Sends a failed row again (``CourierClient/retryFailedMessage(_:)``).
    public func retry(_ item: ChatItem) async {
        guard case .pending(let pending) = item, pending.status == .failed else { return }
        await act { try await $0.retryFailedMessage(pending.clientID) }
    }

    /// Takes back a row of yours that has not gone out yet — an attachment still uploading, a message queued offline
    /// (``SendHandle/cancel()``): it leaves the chat and is never sent. A row already on its way stays.
    ///
    /// - Returns: Whether it was taken back.
    @discardableResult
    public func cancel(_ item: ChatItem) async -> Bool {
        guard case .pending(let pending) = item else { return false }
        let taken = await act { try await $0.sendHandle(for: pending.clientID, in: self.conversation).cancel() }
        if taken == true { uploadProgress[pending.clientID] = nil }
        return taken ?? false
    }

    /// Removes a failed row for good: it is never sent (``CourierClient/discardFailedMessage(_:)``).
    public func discard(_ item: ChatItem) async {
        guard case .pending(let pending) = item, pending.status == .failed else { return }
        await act { try await $0.discardFailedMessage(pending.clientID) }
    }

    /// Call when a row becomes visible: reads the conversation up to it, on every device
    /// (``CourierClient/markRead(upTo:in:privately:)-(MessageID,_,_)``). Your own rows and rows already covered do
    /// nothing. Rows that appear together are one read: calls made before the first of them gets to send (the rows
    /// of one layout pass, each from its own `onAppear` task) read up to the newest of them, in one request, and all
    /// return when it is done. The notices right after the row (a recall notice that counts as unread, which has no
    /// row of its own) are read with it, so that the badge clears.
    public func markVisibleRead(_ item: ChatItem) async {
        guard let message = item.message, !message.isOwn, message.seq > readUpTo else { return }
        if message.seq > visibleRead?.seq ?? .zero { visibleRead = (message.seq, message.id) }
        if let flush = visibleReadFlush { return await flush.value }
        let flush = Task { @MainActor [weak self] in
            // The other rows of this pass, queued on the main actor behind this one, raise the target first.
            await Task.yield()
            guard let self, let target = self.visibleRead else { return }
            self.visibleRead = nil
            self.visibleReadFlush = nil
            guard target.seq > self.readUpTo else { return }
            let previous = self.readUpTo
            self.readUpTo = target.seq
            await self.act { try await $0.markRowRead(target.id, in: self.conversation) }
            // Not read: the next appearance tries again.
            if self.error != nil, self.readUpTo == target.seq { self.readUpTo = previous }
        }
        visibleReadFlush = flush
        await flush.value
    }

    /// Recalls a row you may recall (``CourierClient/recall(_:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``):
    /// it becomes a recalled row in place, here and on every device. A refusal (the window passed, offline) is
    /// ``error``. A row still in the outbox, or a tip, has nothing to recall.
    public func recall(_ item: ChatItem, mode: RecallMode = .twoWay) async {
        guard let message = item.message else { return }
        await act { try await $0.recall(message.id, in: self.conversation, mode: mode) }
    }

    /// Edits a row's text (``CourierClient/edit(_:in:body:ext:clientID:)``): every member's copy shows `text` with
    /// ``Message/editedAt`` set; its ``Message/ext`` stays. A refusal (not yours, past the window, recalled) lands in
    /// ``error``.
    public func edit(_ item: ChatItem, text: String) async {
        guard let message = item.message else { return }
        await act { try await $0.edit(message.id, in: self.conversation, body: text, ext: message.ext) }
    }

    /// Adds `reaction` to a row, or takes it back when it is already yours (``CourierClient/react(_:to:in:)``,
    /// ``CourierClient/removeReaction(_:from:in:)``): what tapping a reaction under a message does. The row shows the
    /// new counts once the server answers; a refusal lands in ``error``.
    public func toggleReaction(_ reaction: String, on item: ChatItem) async {
        guard let message = item.message else { return }
        if message.myReactions.contains(reaction) {
            await act { try await $0.removeReaction(reaction, from: message.id, in: self.conversation) }
        } else {
            await act { try await $0.react(reaction, to: message.id, in: self.conversation) }
        }
    }

    /// Deletes a row for this account only, on all its devices (``CourierClient/deleteForMe(_:in:)``); the others keep
    /// it. Offline it is gone here at once and the server learns it on the next connection.
    public func deleteForMe(_ item: ChatItem) async {
        guard let message = item.message else { return }
        await act { try await $0.deleteForMe([message.id], in: self.conversation) }
    }

    /// Keeps what the user was typing with the conversation, on this device (``CourierClient/setDraft(_:in:)``; `nil`
    /// or empty clears it): the conversation list shows it (``Conversation/draft``).
    public func setDraft(_ draft: String?) async {
        await act { try await $0.setDraft(draft, in: self.conversation) }
    }

    /// Until when you may recall this row, or `nil` when you may not (``CourierClient/recallDeadline(for:)``), on
    /// this device's clock: hide "Recall" after it. Synchronous, for a context menu built as it opens: from the
    /// windows the server published, your role in the group as the window last read it, and the difference between
    /// the server's clock and this device's.
    public func recallDeadline(for item: ChatItem) -> Date? {
        guard let message = item.message, let me else { return nil }
        return client.recallDeadline(for: message, me: me, role: role)
    }

    /// Until when you may edit this row, or `nil` when you may not (``CourierClient/editDeadline(for:)``): hide "Edit"
    /// after it. Synchronous, like ``recallDeadline(for:)``.
    public func editDeadline(for item: ChatItem) -> Date? {
        guard let message = item.message, let me else { return nil }
        return client.editDeadline(for: message, me: me)
    }

    /// Follows the window from seq `first` on (through ``last`` while it stops short of the newest): every change to
    /// it replaces ``items`` (SwiftUI keeps unchanged rows).
    private func follow(from first: Seq) {
        generation += 1
        let mine = generation
        window?.cancel()
        let stream = client.liveMessages(in: conversation, from: first, through: last)
        countsArrivals = false
        let (client, conversation) = (self.client, self.conversation)
        window = Task { [weak self] in
            do {
                for try await rows in stream {
                    // A membership entry may have changed the role the deadlines use.
                    let role = conversation.groupID != nil ? try await client.store.role(in: conversation) : nil
                    guard let self, self.generation == mine else { return }
                    self.role = role
                    if rows != self.items { self.show(rows) }
                }
            } catch {
                guard let self, self.generation == mine else { return }
                if let reported = CourierError.shown(error) { self.error = reported }
            }
        }
    }

    /// Replaces the rows; counts the messages of others that arrived below while the list is scrolled up, and finds
    /// the row opened at.
    private func show(_ rows: [ChatItem]) {
        // Only what arrives at the bottom of a window that follows the newest: not the rows a new window or a page
        // brought (the first emission after the bounds changed).
        if countsArrivals, !isAtBottom, last == nil, let shown = items.last(where: { $0.message != nil })?.message?.seq {
            newBelow += rows.count { row in
                guard let message = row.message else { return false }
                return message.seq > shown && !message.isOwn && message.kind == .message
            }
        }
        countsArrivals = true
        // The row opened at, or the first after it (a recall notice that counts as unread has no row).
        if let anchorSeq, let row = rows.first(where: { ($0.message?.seq ?? .zero) >= anchorSeq }) {
            anchorItemID = row.id
            self.anchorSeq = nil
        }
        // An upload that ended without reaching 1 (its row failed, or left) leaves nothing behind.
        let sending = { (rows: [ChatItem]) in
            Set(rows.compactMap { row -> ClientMessageID? in
                guard case .pending(let pending) = row, pending.status == .sending else { return nil }
                return pending.clientID
            })
        }
        let ended = sending(items).subtracting(sending(rows))
        if !ended.isEmpty, uploadProgress.keys.contains(where: ended.contains) {
            uploadProgress = uploadProgress.filter { !ended.contains($0.key) }
        }
        items = rows
    }

    @discardableResult
    private func act<Result: Sendable>(_ action: (CourierClient) async throws -> Result) async -> Result? {
        do {
            let result = try await action(client)
            error = nil
            return result
        } catch {
            if let reported = CourierError.shown(error) { self.error = reported }
            return nil
        }
    }
}
