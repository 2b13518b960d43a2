// Courier — Apache-2.0
public import Observation

/// The conversation list, to bind a list to: most recently active first, with last messages and unread counts, and
/// the total for a tab badge, live (NIM `allRecentSessions` with its delegate, Agora `getAllConversations` with
/// `conversationListDidUpdate:`).
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
@MainActor
@Observable
public final class ConversationListModel {
    public private(set) var conversations: [Conversation] = []
    /// Unread messages across conversations (but the muted ones, when the model was made with
    /// `badgeIncludesMuted: false`).
    public private(set) var totalUnreadCount = 0
    /// The last error of the live list.
    public private(set) var error: CourierError?

    @ObservationIgnored private let client: CourierClient
    @ObservationIgnored private let badgeIncludesMuted: Bool
    @ObservationIgnored private var following: Task<Void, Never>?

    /// - Parameters:
    ///   - client: The client whose local store the list follows.
    ///   - badgeIncludesMuted: `false`: ``totalUnreadCount`` leaves out the conversations you muted.
    public init(client: CourierClient, badgeIncludesMuted: Bool = true) {
        self.client = client
        self.badgeIncludesMuted = badgeIncludesMuted
    }

    isolated deinit {
        following?.cancel()
    }

    /// Starts following the list (works offline). Calling it again does nothing. Started before the client knows its
    /// account (a launch before the first connect), it follows the list as soon as the client connects.
    public func start() {
        guard following == nil else { return }
        let client = self.client
        following = Task { [weak self] in
            do {
                // Started before the client knows its account (at launch, before connect): it waits for it.
                guard await client.knownAccount() != nil else { return }
                for try await list in client.liveConversations() {
                    guard let self else { return }
                    if list != self.conversations { self.conversations = list }
                    let total = list.reduce(0) { $0 + ((self.badgeIncludesMuted || !$1.isMuted) ? $1.unreadCount : 0) }
                    if total != self.totalUnreadCount { self.totalUnreadCount = total }
                }
            } catch {
                if let reported = CourierError.shown(error) { self?.error = reported }
            }
        }
    }

    /// Stops following (the list stays).
    public func stop() {
        following?.cancel()
        following = nil
    }
}
