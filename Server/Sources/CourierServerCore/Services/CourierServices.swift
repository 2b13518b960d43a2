// Courier — Apache-2.0
package import CourierStorage
internal import CourierWire

/// Every service a wire request or a REST call runs through, built once from the configuration and the store: the
/// gateway and the REST API take this value, so both sides act through the same services with the same checks.
package struct CourierServices: Sendable {
    package let access: ConversationAccess
    package let messages: MessageService
    package let deliveries: DeliveryService
    package let reads: ReadService
    /// `var`: media, built after the services, sweeps after an erasing recall (``RecallService/afterErase``).
    package var recalls: RecallService
    package let edits: EditService
    package let reactions: ReactionService
    package let groups: GroupService
    package let pushTokens: PushTokenService
    package let views: ViewService
    package let typing: TypingService
    package let profiles: ProfileService

    package init(configuration: CourierServerConfiguration, store: any CourierStore) {
        let now = configuration.now
        let hooks = configuration.hooks
        let access = ConversationAccess(store: store, groups: GroupDirectory())
        self.access = access
        messages = MessageService(
            store: store,
            access: access,
            limits: configuration.limits,
            groupReceipts: configuration.groupReceipts,
            hooks: hooks,
            now: now
        )
        deliveries = DeliveryService(store: store, access: access, now: now)
        reads = ReadService(store: store, access: access, policy: configuration.readReceiptPolicy, now: now)
        recalls = RecallService(
            store: store,
            access: access,
            window: configuration.recallWindow,
            adminWindow: configuration.adminRecallWindow ?? configuration.recallWindow,
            maxExtraBytes: configuration.limits.maxBodyBytes,
            hooks: hooks,
            now: now
        )
        edits = EditService(
            store: store,
            access: access,
            window: configuration.editWindow,
            adminsEdit: configuration.adminsEditMessages,
            limits: configuration.limits,
            hooks: hooks,
            now: now
        )
        reactions = ReactionService(store: store, access: access, hooks: hooks, now: now)
        groups = GroupService(
            store: store,
            access: access,
            limits: configuration.limits,
            receipts: configuration.groupReceipts,
            now: now
        )
        pushTokens = PushTokenService(store: store, now: now)
        views = ViewService(store: store, access: access, hooks: hooks, now: now)
        typing = TypingService(store: store, access: access, showsTyping: configuration.typingIndicators)
        profiles = ProfileService(store: store, access: access, now: now)
    }
}
