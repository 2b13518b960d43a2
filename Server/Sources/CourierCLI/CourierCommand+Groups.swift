// Courier — Apache-2.0
import ArgumentParser
import CourierSDK
import CourierWire
import CourierServer
import Foundation

struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "Create a group, change its members and roles, list its members.",
        subcommands: [Create.self, Add.self, Remove.self, Leave.self, Role.self, Dismiss.self, Members.self]
    )

    /// Prints a membership change entry.
    static func emit(_ entry: Message, _ options: ClientOptions) {
        var object = entry.jsonObject
        if let change = entry.groupChange {
            object["action"] = change.action.rawValue
            object["accounts"] = change.accounts.map(\.rawValue)
            if let role = change.role { object["role"] = role.rawValue }
        }
        let change = entry.groupChange
        options.emit(
            object,
            text: "\(entry.conversation) #\(entry.seq): \(change?.action.rawValue ?? "changed") "
                + (change?.accounts.map(\.rawValue).joined(separator: ", ") ?? "")
        )
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create GROUP with you as owner and MEMBERS in it.")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group id (1–128 of [A-Za-z0-9._@-]); its conversation is g:GROUP.") var group: String
        @Argument(help: "The first members.") var members: [String] = []
        func run() async throws {
            try await options.withClient { client in
                let entry = try await client.createGroup(
                    GroupID(rawValue: group),
                    members: members.map(AccountID.init(rawValue:))
                )
                GroupCommand.emit(entry, options)
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add accounts (owner and admins).")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        @Argument(help: "The accounts.") var accounts: [String]
        func run() async throws {
            try await options.withClient { client in
                let entry = try await client.addMembers(accounts.map(AccountID.init(rawValue:)), to: groupID(group))
                GroupCommand.emit(entry, options)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove members (owner: anyone; admins: members).")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        @Argument(help: "The accounts.") var accounts: [String]
        func run() async throws {
            try await options.withClient { client in
                let entry = try await client.removeMembers(
                    accounts.map(AccountID.init(rawValue:)),
                    from: groupID(group)
                )
                GroupCommand.emit(entry, options)
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Leave a group (the owner hands it over first).")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        func run() async throws {
            try await options.withClient { client in
                GroupCommand.emit(try await client.leaveGroup(groupID(group)), options)
            }
        }
    }

    struct Role: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set members' role (admin or member; owner only), or hand the group over (owner)."
        )
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        @Argument(help: "admin, member, or owner (hands the group over to the one account named).") var role: String
        @Argument(help: "The accounts.") var accounts: [String]
        func validate() throws {
            guard ["admin", "member", "owner"].contains(role) else {
                throw ValidationError("The role is admin, member or owner.")
            }
            guard role != "owner" || accounts.count == 1 else {
                throw ValidationError("Hand a group over to exactly one member.")
            }
        }
        func run() async throws {
            try await options.withClient { client in
                let ids = accounts.map(AccountID.init(rawValue:))
                let entry =
                    role == "owner"
                    ? try await client.transferOwnership(of: groupID(group), to: ids[0])
                    : try await client.setRole(role == "admin" ? .admin : .member, for: ids, in: groupID(group))
                GroupCommand.emit(entry, options)
            }
        }
    }

    struct Dismiss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Dismiss a group (owner only): every member leaves and the group is gone."
        )
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        func run() async throws {
            try await options.withClient { client in
                GroupCommand.emit(try await client.dismissGroup(groupID(group)), options)
            }
        }
    }

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List members, a page at a time.")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group (GROUP or g:GROUP).") var group: String
        @Option(help: "The previous page's next cursor.") var cursor: String?
        @Option(help: "1–100.") var limit = 100
        func run() async throws {
            try await options.withClient { client in
                let page = try await client.members(of: groupID(group), cursor: cursor, limit: limit)
                for member in page.members {
                    options.emit(
                        ["account": member.account.rawValue, "role": member.role.rawValue],
                        text: "\(member.account) (\(member.role))"
                    )
                }
                options.emit(
                    ["total": page.total, "nextCursor": page.nextCursor ?? NSNull()],
                    text: "\(page.total) members" + (page.nextCursor.map { ", next page: --cursor \($0)" } ?? "")
                )
            }
        }
    }
}

/// `GROUP` or `g:GROUP`.
func groupID(_ text: String) -> ConversationID {
    text.hasPrefix("g:") ? ConversationID(rawValue: text) : .group(GroupID(rawValue: text))
}

struct Receipts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Group read receipts: counts of messages, or a read/unread/delivered list of one, page by page."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "The group (GROUP or g:GROUP).") var group: String
    @Argument(help: "Message ids (one for a list).") var messages: [String]
    @Option(help: "Print a list instead of counts: read, unread or delivered.") var list: String?
    @Option(help: "Only these accounts (repeat).") var account: [String] = []
    @Option(help: "The previous page's next cursor.") var cursor: String?
    @Option(help: "1–100.") var limit = 100
    @Flag(help: "Ask the members for read receipts of the message (you sent it without).") var ask = false

    func validate() throws {
        guard !messages.isEmpty else { throw ValidationError("Name a message.") }
        guard list == nil || (messages.count == 1 && ["read", "unread", "delivered"].contains(list!)) else {
            throw ValidationError("--list is read, unread or delivered, for one message.")
        }
        guard !ask || (messages.count == 1 && list == nil) else { throw ValidationError("--ask names one message.") }
    }

    func run() async throws {
        try await options.withClient { client in
            let conversation = groupID(group)
            let ids = messages.map(MessageID.init(rawValue:))
            if ask {
                try await client.requestReadReceipts(for: ids[0], in: conversation)
                options.emit(["messageId": ids[0].rawValue, "asked": true], text: "asked for read receipts")
                return
            }
            guard let list else {
                for count in try await client.readReceiptCounts(for: ids, in: conversation) {
                    var object: [String: Any] = [
                        "messageId": count.messageID.rawValue, "readCount": count.readCount,
                        "unreadCount": count.unreadCount,
                    ]
                    if count.recalled == true { object["recalled"] = true }
                    options.emit(
                        object,
                        text: count.recalled == true
                            ? "\(count.messageID): recalled"
                            : "\(count.messageID): read by \(count.readCount)/\(count.readCount + count.unreadCount)"
                    )
                }
                return
            }
            let page = try await client.readReceiptList(
                for: ids[0],
                in: conversation,
                list: ReceiptListKind(rawValue: list),
                accounts: account.isEmpty ? nil : account.map(AccountID.init(rawValue:)),
                cursor: cursor,
                limit: limit
            )
            for entry in page.entries {
                var object: [String: Any] = ["account": entry.account.rawValue]
                if let time = entry.time { object["time"] = time.rawValue }
                if let content = entry.content { object["content"] = content }
                options.emit(
                    object,
                    text: "\(entry.account)" + (entry.time.map { " at \($0.rawValue)" } ?? "")
                        + (entry.content.map { " — \($0)" } ?? "")
                )
            }
            options.emit(
                ["list": list, "total": page.total, "nextCursor": page.nextCursor ?? NSNull()],
                text: "\(page.total) \(list)" + (page.nextCursor.map { ", next page: --cursor \($0)" } ?? "")
            )
        }
    }
}
