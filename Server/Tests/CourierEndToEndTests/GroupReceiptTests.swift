// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Synchronization
import Testing

/// Groups and group read receipts with real SDK clients on a real server (SPEC §5, §7): asking, acking, the
/// sender's events, counts and paged lists, the audience rule across joins and leaves, policies and refusals.
@Suite("Group read receipts end to end", .timeLimit(.minutes(5)))
struct GroupReceiptTests {
    let group = ConversationID.group("team")

    /// alice creates the group with `members`, everyone connected; returns the clients by account.
    func makeGroup(
        _ server: TestServer,
        members: [AccountID] = ["bob", "carol", "dave"]
    ) async throws -> [AccountID: CourierClient] {
        try await server.register("alice")
        for member in members { try await server.register(member) }
        var clients: [AccountID: CourierClient] = [:]
        for account in ["alice"] + members { clients[account] = try await server.connectedClient(account) }
        let created = try await clients["alice"]!.createGroup("team", members: members)
        #expect(created.kind == .groupChange && created.groupChange?.accounts == members.sorted())
        return clients
    }

    /// Sends from `sender` and waits until each of `members` has it.
    func send(
        _ body: String,
        from sender: CourierClient,
        to members: [CourierClient],
        needsReadReceipt: Bool = true
    ) async throws -> Message {
        let streams = members.map { $0.events() }
        let message = try await sender.send(body, to: group, needsReadReceipt: needsReadReceipt).stored()
        for stream in streams {
            _ = try await stream.first { $0.receivedMessage.flatMap { $0.id == message.id ? $0 : nil } }
        }
        return message
    }

    @Test(
        "ask at send → member acks (one, a batch, a conversation read) → the sender's devices hear readers and counts",
        arguments: ServerBackend.available
    )
    func receiptFlow(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server)
            let (alice, bob, carol, dave) = (clients["alice"]!, clients["bob"]!, clients["carol"]!, clients["dave"]!)
            let aliceEvents = alice.events()
            let first = try await send("lunch?", from: alice, to: [bob, carol, dave])
            let second = try await send("at noon", from: alice, to: [bob, carol, dave])
            #expect(try await bob.message(first.id)?.needsReadReceipt == true)
            #expect(try await bob.message(first.id)?.isReadAcked == false)

            try await bob.markRead(first.id, in: group)
            let update = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(update.messageID == first.id && Array(update.readers.keys) == ["bob"])
            #expect(update.readCount == 1 && update.unreadCount == 2)
            #expect(try await bob.message(first.id)?.isReadAcked == true)
            #expect(try await bob.message(second.id)?.isReadAcked == false)

            // A batch ack of one group: both messages, one request.
            try await dave.markRead([first.id, second.id], in: group)
            var updates: [GroupReadReceiptUpdate] = []
            while updates.count < 2 { updates.append(try await aliceEvents.first { $0.groupReadReceiptUpdate }) }
            #expect(Set(updates.map(\.messageID)) == [first.id, second.id])
            #expect(updates.allSatisfy { Array($0.readers.keys) == ["dave"] })

            // A conversation read covers every earlier message that asked.
            try await carol.markConversationRead(group)
            updates = []
            while updates.count < 2 { updates.append(try await aliceEvents.first { $0.groupReadReceiptUpdate }) }
            let firstCount = updates.first { $0.messageID == first.id }
            #expect(firstCount?.readCount == 3 && firstCount?.unreadCount == 0)

            // A second ack keeps the first read time and changes nothing.
            let before = try await alice.readReceiptList(for: first.id, in: group, accounts: ["bob"])
            try await bob.markRead([first.id], in: group)
            let after = try await alice.readReceiptList(for: first.id, in: group, accounts: ["bob"])
            #expect(before.entries == after.entries && after.total == 1)

            let counts = try await alice.readReceiptCounts(for: [first.id, second.id], in: group)
            #expect(counts.map(\.readCount) == [3, 2] && counts.map(\.unreadCount) == [0, 1])
            #expect(try await alice.message(first.id)?.status == .read)
            #expect(try await alice.localReaders(of: first.id).keys.sorted() == ["bob", "carol", "dave"])

            // A device of alice that heard none of it (it connects now) has the counts and the readers from its first
            // connect (the counts it lacked moved, and their read lists came with them), and the list from the server.
            let tablet = try await server.connectedClient("alice", device: "tablet")
            #expect(try await tablet.localReaders(of: first.id).keys.sorted() == ["bob", "carol", "dave"])
            #expect(try await tablet.localReadReceiptCounts(for: [first.id]).first?.readCount == 3)
            let list = try await tablet.readReceiptList(for: first.id, in: group, list: .read)
            #expect(list.entries.map(\.account).sorted() == ["bob", "carol", "dave"])
            #expect(try await tablet.localReaders(of: first.id).keys.sorted() == ["bob", "carol", "dave"])
        }
    }

    @Test(
        "a recalled message's receipts go: later reads neither count nor announce it, and its counts are dropped",
        arguments: ServerBackend.available
    )
    func recallDropsReceipts(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server)
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            let aliceEvents = alice.events()
            let recalled = try await send("lunch?", from: alice, to: [bob, carol, clients["dave"]!])
            let kept = try await send("at noon", from: alice, to: [bob, carol, clients["dave"]!])
            try await bob.markRead([recalled.id], in: group, content: "on my way")
            #expect(try await aliceEvents.first { $0.groupReadReceiptUpdate }.messageID == recalled.id)
            try await alice.recall(recalled.id, in: group)

            // carol's conversation read covers both messages: only the one still there is counted and announced.
            try await carol.markConversationRead(group)
            let update = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(update.messageID == kept.id && Array(update.readers.keys) == ["carol"])
            let counts = try await alice.readReceiptCounts(for: [recalled.id, kept.id], in: group)
            #expect(counts.map { $0.recalled == true } == [true, false] && counts.map(\.readCount) == [0, 1])
            // What the store keeps of the recalled message's receipts: nothing.
            #expect(try await server.store.receiptCounts(in: group, seqs: [recalled.seq]).isEmpty)
            let list = try await alice.readReceiptList(for: recalled.id, in: group)
            #expect(list.isRecalled && list.entries.isEmpty && list.total == 0)
        }
    }

    @Test(
        "the app's backend reads for several members at once: all or none, one event to the sender, privacy kept",
        arguments: ServerBackend.available
    )
    func appReads(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server)
            let (alice, bob, carol, dave) = (clients["alice"]!, clients["bob"]!, clients["carol"]!, clients["dave"]!)
            try await server.register("erin")
            try await carol.setSendsReadReceipts(false)
            let first = try await send("lunch?", from: alice, to: [bob, carol, dave])
            let second = try await send("at noon", from: alice, to: [bob, carol, dave])
            let aliceEvents = alice.events()
            let bobEvents = bob.events()
            let carolEvents = carol.events()

            // Refused, and nothing written: no secret; a non-member (after a member); no accounts; past the end.
            #expect(try await postReads(server, ["bob"], second.seq, secret: false).status == 401)
            let outsider = try await postReads(server, ["bob", "erin"], second.seq)
            #expect(outsider.status == 403 && outsider.code == "conversation.notAMember")
            #expect(try await postReads(server, [], second.seq).code == "request.invalidArgument")
            #expect(try await postReads(server, ["bob", "bob"], second.seq).code == "request.invalidArgument")
            #expect(try await postReads(server, ["bob"], Seq(-1)).code == "request.invalidArgument")
            let tooMany = (0...1_000).map { AccountID(rawValue: "x\($0)") }
            #expect(try await postReads(server, tooMany, second.seq).code == "request.invalidArgument")
            #expect(try await postReads(server, ["bob"], second.seq, conversation: "g:nobody").code == "group.notFound")
            let beyond = try await postReads(server, ["bob"], Seq(second.seq.rawValue + 1))
            #expect(beyond.code == "receipt.beyondLastMessage")
            #expect(try await alice.readReceiptCounts(for: [first.id], in: group).map(\.readCount) == [0])

            // bob and carol read through the app's backend: one transaction, one event to alice.
            #expect(try await postReads(server, ["bob", "carol"], second.seq).status == 204)
            let update = try await bobEvents.first { $0.conversationReadUpdate }
            #expect(update.conversation == group && update.unreadCount == 0)
            #expect(try await bob.unreadCount(in: group) == 0)
            var updates: [GroupReadReceiptUpdate] = []
            while updates.count < 2 { updates.append(try await aliceEvents.first { $0.groupReadReceiptUpdate }) }
            // carol does not share her reads: alice learns of bob's only.
            #expect(Set(updates.map(\.messageID)) == [first.id, second.id])
            #expect(
                updates.allSatisfy { Array($0.readers.keys) == ["bob"] && $0.readCount == 1 && $0.unreadCount == 2 }
            )
            let counts = try await alice.readReceiptCounts(for: [first.id, second.id], in: group)
            #expect(counts.map(\.readCount) == [1, 1])

            // carol's read is private, and still clears her own unread count on her devices.
            #expect(try await carolEvents.first { $0.conversationReadUpdate }.unreadCount == 0)
            #expect(try await carol.unreadCount(in: group) == 0)
            #expect(try await dave.unreadCount(in: group) == 2)
        }
    }

    /// `POST /v1/conversations/{group}/reads`; the status and the error code, if any.
    func postReads(
        _ server: TestServer,
        _ accounts: [AccountID],
        _ seq: Seq,
        secret: Bool = true,
        conversation: ConversationID? = nil
    ) async throws -> (status: Int, code: String?) {
        let list = accounts.map { "\"\($0)\"" }.joined(separator: ",")
        return try await server.rest(
            "POST",
            "v1/conversations/\(conversation ?? group)/reads",
            body: #"{"accounts": [\#(list)], "seq": \#(seq.rawValue)}"#,
            secret: secret
        )
    }

    @Test(
        "read and unread lists page with a cursor and a total, and filter by accounts",
        arguments: ServerBackend.available
    )
    func pagedLists(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let members: [AccountID] = (1...7).map { AccountID(rawValue: "m\($0)") }
            let clients = try await makeGroup(server, members: members)
            let alice = clients["alice"]!
            let message = try await send("survey", from: alice, to: members.map { clients[$0]! })
            // m1 and m2 ack this message one by one above a later watermark; m3–m5 read the whole conversation.
            let later = try await send("later", from: alice, to: members.map { clients[$0]! }, needsReadReceipt: false)
            for reader in members[0..<2] { try await clients[reader]!.markRead(message.id, in: group) }
            for reader in members[2..<5] { try await clients[reader]!.markConversationRead(group) }
            _ = later

            var readers: [AccountID] = []
            var cursor: String?
            var pages = 0
            repeat {
                let page = try await alice.readReceiptList(for: message.id, in: group, cursor: cursor, limit: 2)
                #expect(page.total == 5 && page.entries.count <= 2)
                #expect(page.entries.allSatisfy { $0.time != nil })
                readers += page.entries.map(\.account)
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil && pages < 10
            #expect(readers.sorted() == Array(members[0..<5]) && pages == 3)

            let unread = try await alice.readReceiptList(for: message.id, in: group, list: .unread)
            #expect(unread.total == 2 && unread.entries.map(\.account).sorted() == ["m6", "m7"])

            let filtered = try await alice.readReceiptList(
                for: message.id,
                in: group,
                accounts: ["m1", "m4", "m6", "nobody"],
                limit: 1
            )
            #expect(filtered.total == 2 && filtered.entries.map(\.account) == ["m1"])
            let next = try await alice.readReceiptList(
                for: message.id,
                in: group,
                accounts: ["m1", "m4", "m6", "nobody"],
                cursor: filtered.nextCursor,
                limit: 1
            )
            #expect(next.entries.map(\.account) == ["m4"] && next.nextCursor == nil)
            let filteredUnread = try await alice.readReceiptList(
                for: message.id,
                in: group,
                list: .unread,
                accounts: ["m1", "m6"]
            )
            #expect(filteredUnread.entries.map(\.account) == ["m6"] && filteredUnread.total == 1)

            // Every member's device stored the message, so each is on the delivered list.
            let delivered = try await alice.readReceiptList(for: message.id, in: group, list: .delivered)
            #expect(delivered.total == 7)

            // A cursor pages the list it came from, and nothing else: no silent restart, no empty page.
            let another = try await send("another survey", from: alice, to: members.map { clients[$0]! })
            let first = try await alice.readReceiptList(for: message.id, in: group, limit: 2)
            let readCursor = try #require(first.nextCursor)
            let unreadCursor = try #require(
                try await alice.readReceiptList(for: message.id, in: group, list: .unread, limit: 1).nextCursor
            )
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: another.id, in: group, cursor: readCursor)
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, list: .unread, cursor: readCursor)
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, cursor: unreadCursor)
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, accounts: ["m1"], cursor: readCursor)
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, cursor: "w.999.zz")
            }
            let second = try await alice.readReceiptList(for: message.id, in: group, cursor: readCursor, limit: 2)
            #expect(second.entries.count == 2 && Set(second.entries.map(\.account)).isDisjoint(with: first.entries.map(\.account)))
        }
    }

    @Test(
        "the audience is the membership at send time: joiners are not in it, leavers drop out, readers stay",
        arguments: ServerBackend.available
    )
    func audienceRule(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            try await server.register("erin")
            let message = try await send("before erin", from: alice, to: [bob, carol])

            try await alice.addMembers(["erin"], to: group)
            let erin = try await server.connectedClient("erin")
            var counts = try await alice.readReceiptCounts(for: [message.id], in: group)
            #expect(counts[0].readCount == 0 && counts[0].unreadCount == 2)
            // erin's history starts at the entry that added her.
            #expect(try await erin.history(in: group).allSatisfy { $0.seq > message.seq })

            try await bob.markRead(message.id, in: group)
            try await carol.leaveGroup(group)
            counts = try await alice.readReceiptCounts(for: [message.id], in: group)
            #expect(counts[0].readCount == 1 && counts[0].unreadCount == 0)
            let unread = try await alice.readReceiptList(for: message.id, in: group, list: .unread)
            #expect(unread.entries.isEmpty && unread.total == 0)

            try await bob.leaveGroup(group)
            let read = try await alice.readReceiptList(for: message.id, in: group)
            #expect(read.entries.map(\.account) == ["bob"] && read.total == 1)
            counts = try await alice.readReceiptCounts(for: [message.id], in: group)
            #expect(counts[0].readCount == 1)

            // A message after the changes has erin (and no leaver) in its audience.
            let after = try await send("after", from: alice, to: [erin])
            let afterCounts = try await alice.readReceiptCounts(for: [after.id], in: group)
            #expect(afterCounts[0].unreadCount == 1)
        }
    }

    @Test(
        "a leaver stays a reader of what it read one by one above a message it had not read",
        arguments: ServerBackend.available
    )
    func leaverKeepsOneByOneReads(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            let first = try await send("first", from: alice, to: [bob, carol])
            let second = try await send("second", from: alice, to: [bob, carol])
            _ = try await send("third", from: alice, to: [bob, carol])
            // bob reads the second alone: the first stays unread below it, so the read is kept one by one.
            try await bob.markRead(second.id, in: group)
            try await bob.leaveGroup(group)
            let counts = try await alice.readReceiptCounts(for: [first.id, second.id], in: group)
            #expect(counts.map { [$0.readCount, $0.unreadCount] } == [[0, 1], [1, 1]])
            let read = try await alice.readReceiptList(for: second.id, in: group)
            #expect(read.entries.map(\.account) == ["bob"] && read.total == 1)
            let unread = try await alice.readReceiptList(for: second.id, in: group, list: .unread)
            #expect(unread.entries.map(\.account) == ["carol"] && unread.total == 1)
        }
    }

    @Test(
        "asking afterwards: only the sender, members are told, and the counts start from who read it already",
        arguments: ServerBackend.available
    )
    func askAfterwards(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            let message = try await send("plain", from: alice, to: [bob, carol], needsReadReceipt: false)
            try await carol.markConversationRead(group)
            await expectCode(.receiptNotRequested) {
                _ = try await alice.readReceiptCounts(for: [message.id], in: group)
            }

            await expectCode(.receiptNotPermitted) { try await bob.requestReadReceipts(for: message.id, in: group) }

            let bobEvents = bob.events()
            try await alice.requestReadReceipts(for: message.id, in: group)
            let request = try await bobEvents.first { $0.readReceiptRequest }
            #expect(request.messageID == message.id && request.requester == "alice")
            #expect(try await bob.message(message.id)?.needsReadReceipt == true)
            let counts = try await alice.readReceiptCounts(for: [message.id], in: group)
            #expect(counts[0].readCount == 1 && counts[0].unreadCount == 1)
            await expectCode(.receiptAlreadyRequested) {
                try await alice.requestReadReceipts(for: message.id, in: group)
            }
        }
    }

    @Test("policies: only owner and admins may ask; a largest group size", arguments: ServerBackend.available)
    func policies(backend: ServerBackend) async throws {
        let configure: (inout CourierServerConfiguration) -> Void = {
            $0.groupReceipts = .init(requesters: .ownerAndAdmins, maxGroupSize: 3)
        }
        try await withTestServer(on: backend, configure: configure) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob) = (clients["alice"]!, clients["bob"]!)
            await expectCode(.receiptNotPermitted) {
                _ = try await bob.send("may I?", to: group, needsReadReceipt: true).stored()
            }
            try await alice.setRole(.admin, for: ["bob"], in: group)
            _ = try await bob.send("now I may", to: group, needsReadReceipt: true).stored()
            try await server.register("dave")
            try await alice.addMembers(["dave"], to: group)
            await expectCode(.receiptGroupTooLarge) {
                _ = try await alice.send("four is too many", to: group, needsReadReceipt: true).stored()
            }
        }
    }

    @Test(
        "non-members and former members are refused every receipt, list and history operation",
        arguments: ServerBackend.available
    )
    func nonMembers(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, carol) = (clients["alice"]!, clients["carol"]!)
            let message = try await send("members only", from: alice, to: [clients["bob"]!, carol])
            try await server.register("mallory")
            let mallory = try await server.connectedClient("mallory")
            try await carol.leaveGroup(group)
            for outsider in [mallory, carol] {
                await expectCode(.conversationNotAMember) { _ = try await outsider.history(in: group) }
                await expectCode(.conversationNotAMember) {
                    _ = try await outsider.readReceiptCounts(for: [message.id], in: group)
                }
                await expectCode(.conversationNotAMember) {
                    _ = try await outsider.readReceiptList(for: message.id, in: group)
                }
                await expectCode(.conversationNotAMember) { _ = try await outsider.send("hi", to: group).stored() }
            }
            await expectCode(.groupNotFound) { _ = try await mallory.history(in: .group("nope")) }
        }
    }

    @Test(
        "roles: who adds, removes, leaves, appoints, hands over — and who recalls whose message",
        arguments: ServerBackend.available
    )
    func roles(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol", "dave"])
            let (alice, bob, carol, dave) = (clients["alice"]!, clients["bob"]!, clients["carol"]!, clients["dave"]!)
            try await server.register("erin")
            await expectCode(.groupNotPermitted) { _ = try await carol.addMembers(["erin"], to: group) }
            try await alice.setRole(.admin, for: ["bob"], in: group)
            try await bob.addMembers(["erin"], to: group)
            await expectCode(.groupNotPermitted) { _ = try await bob.removeMembers(["alice"], from: group) }
            await expectCode(.groupOwnerCannotLeave) { _ = try await alice.leaveGroup(group) }
            await expectCode(.groupNotAMember) { _ = try await alice.removeMembers(["mallory"], from: group) }

            // Recall: admins recall ordinary members' messages, the owner anyone's, members only their own.
            let carols = try await send("oops", from: carol, to: [alice, bob, dave], needsReadReceipt: false)
            let bobs = try await send("admin says", from: bob, to: [alice, carol, dave], needsReadReceipt: false)
            let alices = try await send("owner says", from: alice, to: [bob, carol, dave], needsReadReceipt: false)
            await expectCode(.recallNotPermitted) { _ = try await dave.recall(carols.id, in: group) }
            await expectCode(.recallNotPermitted) { _ = try await bob.recall(alices.id, in: group) }
            let notice = try await bob.recall(carols.id, in: group)
            #expect(notice.recalledBy == "bob" && notice.sender == "carol")
            _ = try await alice.recall(bobs.id, in: group)
            let counts = try await alice.readReceiptList(for: carols.id, in: group)
            #expect(counts.isRecalled)

            try await alice.transferOwnership(of: group, to: "bob")
            try await alice.leaveGroup(group)
            let page = try await bob.members(of: group)
            #expect(page.total == 4 && page.members.first { $0.account == "bob" }?.role == .owner)
            #expect(!page.members.contains { $0.account == "alice" })
        }
    }

    @Test(
        "dismiss: the owner only; every member's devices get the last entry; then the group is gone, its id kept",
        arguments: ServerBackend.available
    )
    func dismiss(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol", "dave"])
            let (alice, bob, carol, dave) = (clients["alice"]!, clients["bob"]!, clients["carol"]!, clients["dave"]!)
            try await alice.setRole(.admin, for: ["bob"], in: group)
            let kept = try await send("before the end", from: carol, to: [alice, bob, dave])
            await expectCode(.groupNotPermitted) { _ = try await bob.dismissGroup(group) }
            await expectCode(.groupNotPermitted) { _ = try await carol.dismissGroup(group) }

            let streams = [bob, carol, dave].map { $0.events() }
            let last = try await alice.dismissGroup(group)
            #expect(last.kind == .groupChange && last.groupChange?.action == .dismissed && last.groupChange?.accounts == [])
            #expect(last.sender == "alice")
            for stream in streams {
                let entry = try await stream.first { $0.receivedMessage.flatMap { $0.id == last.id ? $0 : nil } }
                #expect(entry.groupChange?.action == .dismissed)
            }

            // Gone for every request, by anyone; what the devices hold stays.
            for client in [alice, bob, carol, dave] {
                await expectCode(.groupNotFound) { _ = try await client.send("anyone?", to: group).stored() }
                await expectCode(.groupNotFound) { _ = try await client.members(of: group) }
                await expectCode(.groupNotFound) { _ = try await client.history(in: group) }
                #expect(try await client.message(kept.id)?.body == "before the end")
            }
            await expectCode(.groupNotFound) { _ = try await alice.addMembers(["bob"], to: group) }
            await expectCode(.groupNotFound) { _ = try await alice.dismissGroup(group) }
            // The id is not given out again: a device holding the old messages never mixes them with a new group's.
            await expectCode(.groupAlreadyExists) { _ = try await bob.createGroup("team", members: []) }
        }
    }

    @Test(
        "group recall: two-way and one-way reach every member; sender and admin windows hold at their edges",
        arguments: ServerBackend.available
    )
    func groupRecall(backend: ServerBackend) async throws {
        let clock = Atomic<Int64>(1_700_000_000_000)
        let configure: (inout CourierServerConfiguration) -> Void = {
            $0.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
            $0.recallWindow = .seconds(120)
            $0.adminRecallWindow = .seconds(300)
        }
        try await withTestServer(on: backend, configure: configure) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol", "dave"])
            let (alice, bob, carol, dave) = (clients["alice"]!, clients["bob"]!, clients["carol"]!, clients["dave"]!)
            try await alice.setRole(.admin, for: ["bob"], in: group)
            let asked = try await send("asked", from: carol, to: [alice, bob, dave])
            let second = try await send("second", from: carol, to: [alice, bob, dave], needsReadReceipt: false)
            let third = try await send("third", from: carol, to: [alice, bob, dave], needsReadReceipt: false)
            let unreadBefore = try await dave.unreadCount(in: group)

            // Two-way by the sender at the edge of its window: every member's copy goes, unread counts drop, and
            // receipt queries answer `recalled`.
            clock.add(120_000, ordering: .relaxed)
            var streams = [alice, bob, dave].map { $0.events() }
            try await carol.recall(asked.id, in: group)
            for stream in streams {
                let notice = try await stream.first { $0.recallNotice }
                #expect(notice.messageID == asked.id && notice.mode == .twoWay && notice.recalledBy == "carol")
            }
            for client in [alice, bob, carol, dave] {
                #expect(try await client.message(asked.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])
            }
            #expect(try await dave.unreadCount(in: group) == unreadBefore - 1)
            #expect(try await alice.readReceiptCounts(for: [asked.id], in: group).first?.recalled == true)

            // Past its own window the sender is refused; an admin's longer window still covers a member's message.
            clock.add(1, ordering: .relaxed)
            await expectCode(.recallWindowExpired) { _ = try await carol.recall(second.id, in: group) }
            clock.add(300_000 - 120_001, ordering: .relaxed)
            try await bob.recall(second.id, in: group)
            clock.add(1, ordering: .relaxed)
            await expectCode(.recallWindowExpired) { _ = try await bob.recall(third.id, in: group) }
            await expectCode(.recallWindowExpired) { _ = try await alice.recall(third.id, in: group) }
            #expect(try await dave.message(third.id)?.body == "third")

            // One-way: the members' copies go, the sender keeps its own.
            let mine = try await send("for my eyes", from: carol, to: [alice, bob, dave], needsReadReceipt: false)
            streams = [alice, bob, dave].map { $0.events() }
            try await carol.recall(mine.id, in: group, mode: .oneWay)
            for stream in streams { #expect(try await stream.first { $0.recallNotice }.mode == .oneWay) }
            for client in [alice, bob, dave] {
                #expect(try await client.message(mine.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])
            }
            #expect(try await carol.message(mine.id)?.body == "for my eyes")
        }
    }

    @Test(
        "a sender offline while members read: local counts stay as last heard, the server's are fresh",
        arguments: ServerBackend.available
    )
    func offlineSender(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            let message = try await send("while you were out", from: alice, to: [bob, carol])
            let aliceEvents = alice.events()
            try await bob.markRead(message.id, in: group)
            _ = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(try await alice.localReadReceiptCounts(for: [message.id]).first?.readCount == 1)

            await alice.disconnect()
            try await carol.markRead(message.id, in: group)
            // Offline: the local store answers with what it last heard.
            #expect(try await alice.localReadReceiptCounts(for: [message.id]).first?.readCount == 1)

            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let fresh = try await alice.readReceiptCounts(for: [message.id], in: group)
            #expect(fresh.first?.readCount == 2 && fresh.first?.unreadCount == 0)
            #expect(try await alice.localReadReceiptCounts(for: [message.id]).first?.readCount == 2)
        }
    }
}

extension GroupReceiptTests {
    @Test(
        "after a reconnect, the update of a count that moved names the readers who read while the sender was away",
        arguments: ServerBackend.available
    )
    func readersAfterReconnect(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol", "dave"])
            let (alice, bob, carol) = (clients["alice"]!, clients["bob"]!, clients["carol"]!)
            let message = try await send("while you were out", from: alice, to: [bob, carol, clients["dave"]!])
            var aliceEvents = alice.events()
            try await bob.markRead(message.id, in: group)
            let live = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(live.readers.keys.sorted() == ["bob"])

            await alice.disconnect()
            try await carol.markRead(message.id, in: group)
            aliceEvents = alice.events()
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            // Merged as RongCloud's guide advises (each update's readers added to what is shown): bob, then carol.
            let after = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(after.readCount == 2 && after.unreadCount == 1)
            #expect(after.readers.keys.sorted() == ["carol"], "\(after.readers)")
            #expect(try await alice.localReaders(of: message.id).keys.sorted() == ["bob", "carol"])
        }
    }

    @Test(
        "an ack's short content reaches the sender with the acked message only, and stays in the read list",
        arguments: ServerBackend.available
    )
    func ackContent(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, carol) = (clients["alice"]!, clients["carol"]!)
            let first = try await send("vote?", from: alice, to: [clients["bob"]!, carol])
            let second = try await send("and this?", from: alice, to: [clients["bob"]!, carol])
            let aliceEvents = alice.events()
            try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                let tooLong = String(repeating: "x", count: 257)
                for (id, request) in [
                    ("c1", ReadRequest(conversation: group, messageIDs: [first.id], content: tooLong)),
                    ("c2", ReadRequest(conversation: group, all: true, content: "yes")),
                ] {
                    guard case .error(_, let error) = try await bob.request(.read(RequestID(rawValue: id), request))
                    else { throw Unexpected() }
                    #expect(error.code == .invalidArgument)
                }
                // Acking the newest message with a note reads that message alone (ADR 0038); the note is its.
                let ack = ReadRequest(conversation: group, messageIDs: [second.id], content: "yes")
                guard case .ack(_, .read) = try await bob.request(.read("c3", ack)) else { throw Unexpected() }
            }
            let update = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(update.messageID == second.id && update.contents == ["bob": "yes"])
            let list = try await alice.readReceiptList(for: second.id, in: group)
            #expect(list.entries.map(\.content) == ["yes"])
            #expect(try await alice.readReceiptList(for: first.id, in: group).entries.isEmpty, "bob left it unread")

            // Through the SDK: an over-long note is refused before anything is applied or queued; a short one
            // reaches the sender and the read list.
            await expectCode(.invalidArgument) {
                try await carol.markRead([first.id], in: group, content: String(repeating: "é", count: 129))
            }
            #expect(try await carol.message(first.id)?.isReadAcked == false)
            try await carol.markRead([first.id], in: group, content: "from the SDK")
            let fromSDK = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(fromSDK.messageID == first.id && fromSDK.contents == ["carol": "from the SDK"])
            let carolsEntry = try await alice.readReceiptList(for: first.id, in: group, accounts: ["carol"])
            #expect(carolsEntry.entries.map(\.content) == ["from the SDK"])
        }
    }

    @Test("bad group input gets a stable code and writes nothing", arguments: ServerBackend.available)
    func badInput(backend: ServerBackend) async throws {
        let configure: (inout CourierServerConfiguration) -> Void = { $0.limits.maxGroupChangeAccounts = 2 }
        try await withTestServer(on: backend, configure: configure) { server in
            let clients = try await makeGroup(server, members: ["bob", "carol"])
            let (alice, bob) = (clients["alice"]!, clients["bob"]!)
            try await server.register("dave", "erin", "frank")
            await expectCode(.groupAlreadyExists) { _ = try await bob.createGroup("team", members: ["dave"]) }
            await expectCode(.groupTooManyAccounts) {
                _ = try await alice.addMembers(["dave", "erin", "frank"], to: group)
            }
            await expectCode(.groupTooManyAccounts) {
                _ = try await alice.createGroup("big", members: ["dave", "erin", "frank"])
            }
            await expectCode(.groupNotFound) { _ = try await alice.history(in: .group("big")) }
            await expectCode(.accountNotFound) { _ = try await alice.addMembers(["dave", "nobody"], to: group) }
            await expectCode(.invalidArgument) { _ = try await alice.createGroup("no spaces", members: []) }
            await expectCode(.invalidArgument) { _ = try await alice.setRole(.owner, for: ["bob"], in: group) }
            // Nothing above was half-written: the group still has its three members.
            #expect(try await alice.members(of: group).total == 3)

            let message = try await send("asks", from: alice, to: [bob, clients["carol"]!])
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, cursor: "garbage")
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, limit: 0)
            }
            await expectCode(.invalidArgument) {
                _ = try await alice.readReceiptList(for: message.id, in: group, list: ReceiptListKind(rawValue: "x"))
            }
            await expectCode(.invalidArgument) { _ = try await alice.readReceiptCounts(for: [], in: group) }
        }
    }
}

/// Expects `body` to fail with a Courier error of `code`.
func expectCode(
    _ code: ErrorCode,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
    } catch let error as CourierError {
        #expect(error.code == code, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
