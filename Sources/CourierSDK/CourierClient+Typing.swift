// Courier — Apache-2.0
internal import Foundation
internal import Logging
public import CourierWire

/// Who is typing in a conversation now, as ``CourierEvent/typingChanged(_:)`` tells it.
public struct TypingUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    /// The members typing now (never you), in the order they started.
    public let accounts: [AccountID]
    public init(conversation: ConversationID, accounts: [AccountID]) {
        self.conversation = conversation
        self.accounts = accounts
    }
}

extension CourierClient {
    /// How often ``setTyping(_:in:)`` says again that you are still typing: half of how long the server's indicator
    /// lasts, so that it never runs out while you type.
    static let typingRenewal = Duration.milliseconds(TypingEvent.expiresInMs / 2)

    /// Tells the other members of `conversation` that you are typing (`true`) or stopped (`false`). Call it as
    /// often as you like — on every keystroke: a request goes out only when the state changes or every three
    /// seconds while you keep typing. Sending a message ends it on the other devices; call it with `false` when
    /// the user clears the field. Nothing is stored or queued: offline it does nothing.
    ///
    /// NIM's typing custom notification, Agora's typing CMD message (`TypingBegin`/`TypingEnd`), RongCloud
    /// `sendTypingStatus:targetId:contentType:`.
    ///
    /// - Returns: Whether the others are told: `false` offline, when you turned your indicators off
    ///   (``setSendsTypingIndicators(_:)``) or when the server shows none.
    /// - Throws: ``CourierError/notAMember(_:)`` and the server's other refusals (a rate past
    ///   `--device-typing-per-second` is `rate.limited`).
    @discardableResult
    public func setTyping(_ typing: Bool, in conversation: ConversationID) async throws -> Bool {
        _ = try boundAccount()
        // One at a time, in the order called (a task per keystroke may call it): a stop never overtakes its start.
        let (previous, done) = state.withLock { state in
            let previous = state.typingTail
            let (finished, done) = AsyncStream<Void>.makeStream()
            state.typingTail = Task { for await _ in finished {} }
            return (previous, done)
        }
        defer { done.finish() }
        await previous?.value
        return try await sendTyping(typing, in: conversation)
    }

    private func sendTyping(_ typing: Bool, in conversation: ConversationID) async throws -> Bool {
        guard let link = state.withLock({ $0.link }) else { return false }
        let now = ContinuousClock.now
        let due = state.withLock { state -> Bool in
            let last = state.typingSent[conversation]
            switch (typing, last) {
            case (true, let sent?): if now - sent < Self.typingRenewal { return false }
            case (false, nil): return false
            default: break
            }
            state.typingSent[conversation] = typing ? now : nil
            return true
        }
        guard due else { return state.withLock { $0.typingShown } }
        let request = TypingRequest(conversation: conversation, active: typing ? nil : false)
        do {
            guard case .typing(let ack) = try await link.request({ .typing($0, request) }).ack(about: conversation) else {
                throw CourierError.unexpectedReply
            }
            state.withLock { $0.typingShown = ack.shown }
            return ack.shown
        } catch {
            // Whether the others see it is unknown: the next start goes out, and so does the next stop.
            state.withLock { $0.typingSent[conversation] = ContinuousClock.now - Self.typingRenewal }
            throw error
        }
    }

    /// The members typing in `conversation` now, as the server last said (held in memory, never stored).
    public func typingAccounts(in conversation: ConversationID) -> [AccountID] {
        typingBook.accounts(in: conversation, at: ContinuousClock.now)
    }

    /// Whether your typing is shown to others, on the server.
    ///
    /// - Throws: ``CourierError/notConnected`` when not connected.
    public func typingSettings() async throws -> TypingSettings {
        try await requestTypingSettings(TypingSettingsRequest())
    }

    /// Turns showing your typing to others on or off, for your account on every device (Stream's
    /// `privacy_settings.typing_indicators`). Others' typing is still shown to you.
    ///
    /// - Throws: ``CourierError/notConnected`` when not connected.
    @discardableResult
    public func setSendsTypingIndicators(_ enabled: Bool) async throws -> TypingSettings {
        try await requestTypingSettings(TypingSettingsRequest(sendTypingIndicators: enabled))
    }

    private func requestTypingSettings(_ request: TypingSettingsRequest) async throws -> TypingSettings {
        guard case .typingSettings(let settings) = try await requestAck({ .typingSettings($0, request) }) else {
            throw CourierError.unexpectedReply
        }
        state.withLock { $0.typingShown = settings.sendTypingIndicators && settings.serverShowsTyping }
        return settings
    }

    /// A `typing` event from the server.
    func receive(_ event: TypingEvent) {
        let expiry = event.active ? ContinuousClock.now + .milliseconds(event.expiresInMs) : nil
        typingBook.set(event.account, in: event.conversation, until: expiry) { broadcaster.emit(.typingChanged($0)) }
        scheduleTypingExpiry()
    }

    /// A message from `account` ends its typing in the conversation.
    func typingEnded(by messages: [WireMessage]) {
        for message in messages {
            typingBook.set(message.sender, in: message.conversation, until: nil) { broadcaster.emit(.typingChanged($0)) }
        }
    }

    /// Wakes whenever the first indicator runs out, and tells who stopped.
    private func scheduleTypingExpiry() {
        let (book, broadcaster) = (typingBook, self.broadcaster)
        book.replaceTimer(
            Task {
                while let next = book.nextExpiry {
                    do { try await Task.sleep(until: next, clock: ContinuousClock()) } catch { return }
                    book.expire(at: ContinuousClock.now) { broadcaster.emit(.typingChanged($0)) }
                }
            }
        )
    }
}

/// Who is typing where, until when (in memory only). Each change is told (`emit`) under the book's lock, so that
/// the updates go out in the order the book changed (the connection and the expiry timer both change it).
final class TypingBook: Sendable {
    private struct State {
        /// Per conversation, the typists in the order they started, with when each indicator runs out.
        var typists: [ConversationID: [(account: AccountID, until: ContinuousClock.Instant)]] = [:]
        var timer: Task<Void, Never>?
    }
    private let state = Locked(State())

    /// Sets (or with `nil` ends) `account`'s indicator, and tells `emit` when who is typing changed.
    func set(
        _ account: AccountID,
        in conversation: ConversationID,
        until: ContinuousClock.Instant?,
        emit: (TypingUpdate) -> Void
    ) {
        state.withLock { state in
            var list = state.typists[conversation] ?? []
            let index = list.firstIndex { $0.account == account }
            switch (index, until) {
            case (let index?, let until?):
                list[index].until = until
                state.typists[conversation] = list
                return
            case (nil, let until?):
                list.append((account, until))
            case (let index?, nil):
                list.remove(at: index)
            case (nil, nil):
                return
            }
            state.typists[conversation] = list.isEmpty ? nil : list
            emit(TypingUpdate(conversation: conversation, accounts: list.map(\.account)))
        }
    }

    func accounts(in conversation: ConversationID, at now: ContinuousClock.Instant) -> [AccountID] {
        state.withLock { state in (state.typists[conversation] ?? []).filter { $0.until > now }.map(\.account) }
    }

    var nextExpiry: ContinuousClock.Instant? {
        state.withLock { state in state.typists.values.flatMap { $0.map(\.until) }.min() }
    }

    /// Ends the indicators run out by `now`, and tells `emit` of each conversation whose typists changed.
    func expire(at now: ContinuousClock.Instant, emit: (TypingUpdate) -> Void) {
        state.withLock { state in
            for (conversation, list) in state.typists {
                let kept = list.filter { $0.until > now }
                guard kept.count != list.count else { continue }
                state.typists[conversation] = kept.isEmpty ? nil : kept
                emit(TypingUpdate(conversation: conversation, accounts: kept.map(\.account)))
            }
        }
    }

    /// Ends everyone's indicators (the connection is gone: nobody would tell us they stopped).
    func clear(emit: (TypingUpdate) -> Void) {
        state.withLock { state in
            for conversation in state.typists.keys { emit(TypingUpdate(conversation: conversation, accounts: [])) }
            state.typists = [:]
            state.timer?.cancel()
            state.timer = nil
        }
    }

    func replaceTimer(_ timer: Task<Void, Never>) {
        let old = state.withLock { state in
            let old = state.timer
            state.timer = timer
            return old
        }
        old?.cancel()
    }
}
