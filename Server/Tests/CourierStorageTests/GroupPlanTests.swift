// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierWire
import Testing

/// The group decisions every backend runs: what a change appends and writes, what a leave keeps and whom it
/// drops, which receipt list an account falls in. Pure: the contract suites and the differential test check that the
/// backends run them.
@Suite("Group plans")
struct GroupPlanTests {
    let group = ConversationID.group("g")

    func draft(_ change: WireGroupChange, by sender: AccountID = "alice") -> MessageDraft {
        MessageDraft(
            id: "e1",
            conversation: group,
            clientID: "c1",
            sender: sender,
            time: Timestamp(milliseconds: 1000),
            body: "",
            group: change
        )
    }

    @Test("an add appends only the new accounts, checks they exist, and joins them as members")
    func add() throws {
        let plan = try GroupChangePlan(
            draft(WireGroupChange(action: .added, accounts: ["bob", "carol"])),
            actorRole: .admin,
            roles: ["bob": .member]
        )
        #expect(plan.entry.group?.accounts == ["carol"])
        #expect(plan.accountsToCheck == ["carol"])
        #expect(plan.writes == [.join(["carol"], role: .member)])
    }

    @Test("a transfer makes the heir the owner and the former owner a member, in that order")
    func transfer() throws {
        let plan = try GroupChangePlan(
            draft(WireGroupChange(action: .ownerTransferred, accounts: ["bob"])),
            actorRole: .owner,
            roles: ["bob": .admin]
        )
        #expect(plan.writes == [.setRole(["bob"], .owner), .setRole(["alice"], .member)])
        #expect(plan.accountsToCheck.isEmpty)
    }

    @Test("removals and a leave end each membership named; a dismissal ends them all")
    func endings() throws {
        let removal = try GroupChangePlan(
            draft(WireGroupChange(action: .removed, accounts: ["bob", "carol"])),
            actorRole: .owner,
            roles: ["bob": .member, "carol": .admin]
        )
        #expect(removal.writes == [.leave("bob"), .leave("carol")])
        let leave = try GroupChangePlan(
            draft(WireGroupChange(action: .left, accounts: []), by: "bob"),
            actorRole: .member,
            roles: [:]
        )
        #expect(leave.writes == [.leave("bob")] && leave.entry.group?.accounts == ["bob"])
        let dismissal = try GroupChangePlan(
            draft(WireGroupChange(action: .dismissed, accounts: [])),
            actorRole: .owner,
            roles: [:]
        )
        #expect(dismissal.writes == [.dismiss])
    }

    @Test("a change the rules refuse plans nothing and names the rule")
    func refused() {
        #expect(throws: StorageError.groupRefused(.notPermitted)) {
            try GroupChangePlan(
                draft(WireGroupChange(action: .removed, accounts: ["carol"]), by: "bob"),
                actorRole: .admin,
                roles: ["carol": .admin]
            )
        }
        #expect(throws: StorageError.groupRefused(.actorNotAMember)) {
            try GroupChangePlan(draft(WireGroupChange(action: .left, accounts: []), by: "erin"), actorRole: nil, roles: [:])
        }
    }

    @Test("a creation checks every account, makes the creator the owner and the others members")
    func creation() {
        let plan = GroupChangePlan(
            creating: draft(WireGroupChange(action: .created, accounts: ["bob", "carol"])),
            members: ["bob", "alice", "carol"]
        )
        #expect(plan.accountsToCheck == ["alice", "bob", "carol"])
        #expect(plan.writes == [.join(["alice"], role: .owner), .join(["bob", "carol"], role: .member)])
        let alone = GroupChangePlan(creating: draft(WireGroupChange(action: .created, accounts: [])), members: [])
        #expect(alone.writes == [.join(["alice"], role: .owner)])
    }

    @Test("a leaver keeps what it read; messages above its position it had not acked drop it")
    func leave() {
        let member = GroupMember(account: "bob", role: .member, joinedSeq: Seq(3))
        let acks = [FormerMember.Ack(seq: Seq(9), time: Timestamp(milliseconds: 90))]
        let reader = LeavePlan(
            member: member,
            shared: (Seq(6), Timestamp(milliseconds: 60)),
            acks: acks,
            at: Seq(12)
        )
        #expect(reader.unreadAbove == Seq(6) && reader.readAt == Timestamp(milliseconds: 60))
        #expect((reader.joinedSeq, reader.leftSeq) == (Seq(3), Seq(12)))
        #expect(reader.encodedAcks == "[[9,90]]")
        // No receipt row: nothing read since it joined; its position is the entry that added it.
        let silent = LeavePlan(member: member, shared: nil, acks: [], at: Seq(12))
        #expect(silent.readSeq == Seq(3) && silent.unreadAbove == Seq(3) && silent.readAt == .zero)
    }

    @Test("a member falls in the read list by watermark or by a shared ack, else in the unread list")
    func placement() {
        func query(_ list: ReceiptListKind) -> ReceiptListQuery {
            ReceiptListQuery(group: group, seq: Seq(5), sender: "alice", list: list, accounts: ["bob"], cursor: nil, limit: 10)
        }
        let byWatermark = ListPosition(
            readSeq: Seq(5),
            readAt: Timestamp(milliseconds: 50),
            deliveredSeq: Seq(5),
            deliveredAt: Timestamp(milliseconds: 40),
            ackTime: nil
        )
        let byAck = ListPosition(
            readSeq: Seq(4),
            readAt: Timestamp(milliseconds: 45),
            deliveredSeq: Seq(4),
            deliveredAt: Timestamp(milliseconds: 44),
            ackTime: Timestamp(milliseconds: 70)
        )
        let notRead = ListPosition(
            readSeq: Seq(4),
            readAt: Timestamp(milliseconds: 45),
            deliveredSeq: Seq(6),
            deliveredAt: Timestamp(milliseconds: 66),
            ackTime: nil
        )
        #expect(query(.read).placement(of: byWatermark, former: nil) == .read(Timestamp(milliseconds: 50)))
        #expect(query(.read).placement(of: byAck, former: nil) == .read(Timestamp(milliseconds: 70)))
        #expect(query(.read).placement(of: notRead, former: nil) == nil)
        #expect(query(.unread).placement(of: notRead, former: nil) == .unread)
        #expect(query(.unread).placement(of: byAck, former: nil) == nil)
        #expect(query(.delivered).placement(of: notRead, former: nil) == .delivered(Timestamp(milliseconds: 66)))
        #expect(query(.delivered).placement(of: byAck, former: nil) == nil)
        // A member who left after reading stays in the read list, and in no other.
        let former = FormerMember(account: "bob", readSeq: Seq(5), readAt: Timestamp(milliseconds: 55), acks: [])
        #expect(query(.read).placement(of: nil, former: former) == .read(Timestamp(milliseconds: 55)))
        #expect(query(.unread).placement(of: nil, former: former) == nil)
        #expect(ListPlacement.read(.zero).carriesContent && !ListPlacement.delivered(.zero).carriesContent)
    }
}
