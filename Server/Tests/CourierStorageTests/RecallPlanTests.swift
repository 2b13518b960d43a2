// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierWire
import Testing

extension RecallPlan.Rules {
    /// A member recalls, with no window.
    static let members = RecallPlan.Rules(byApp: false, window: nil, managerWindow: nil)
    /// The app's backend recalls, with no window.
    static let app = RecallPlan.Rules(byApp: true, window: nil, managerWindow: nil)
}

/// Whether a recall may happen and what it removes, decided once from the facts its transaction read (issues 17, 34);
/// `RecallStoreContractTests`, `RecallRaceTests` and the differential test check that each backend reads them there.
@Suite("Recall plan")
struct RecallPlanTests {
    static let direct = ConversationID.direct("alice", "bob")
    static let group = ConversationID.group("team")
    static let target = RecallPlan.Target(recalled: false, seq: Seq(4), time: Timestamp(milliseconds: 1_000))

    static func entry(
        _ mode: RecallMode = .twoWay,
        by requester: AccountID = "alice",
        in conversation: ConversationID = direct,
        at time: Int64 = 1_500
    ) -> MessageDraft {
        MessageDraft(
            id: "n1", conversation: conversation, clientID: "recall:m1", sender: requester,
            time: Timestamp(milliseconds: time), body: "",
            recall: WireRecallNotice(messageID: "m1", sender: "alice", recalledBy: requester, mode: mode)
        )
    }

    @Test("two-way: the body, its edits, replies' quotes and receipts go; one-way keeps the sender's copy first")
    func writes() throws {
        let twoWay = try RecallPlan(Self.entry(.twoWay), target: Self.target, roles: nil, rules: .members)
        #expect(twoWay.writes == [.erase("m1"), .eraseEdits("m1"), .unquoteReplies("m1"), .dropReceipts(Seq(4)), .dropReactions("m1")])
        let oneWay = try RecallPlan(Self.entry(.oneWay), target: Self.target, roles: nil, rules: .members)
        #expect(
            oneWay.writes == [
                .keepSenderCopy("m1"), .erase("m1"), .eraseEdits("m1"), .unquoteReplies("m1"), .dropReceipts(Seq(4)),
                .dropReactions("m1"),
            ]
        )
    }

    @Test("no such message, or one recalled already by someone else, is refused")
    func refusals() {
        #expect(throws: StorageError.conversationNotFound(Self.direct)) {
            try RecallPlan(Self.entry(), target: nil, roles: nil, rules: .members)
        }
        let recalled = RecallPlan.Target(recalled: true, seq: Seq(4), time: Timestamp(milliseconds: 1_000))
        #expect(throws: StorageError.alreadyRecalled) {
            try RecallPlan(Self.entry(), target: recalled, roles: nil, rules: .members)
        }
    }

    /// (requester's role, sender's role, allowed): the owner recalls anyone's message, admins ordinary members' (and
    /// those of a sender who left), members only their own; a requester who is not a member, nothing.
    static let roleCases: [(MemberRole?, MemberRole?, StorageError?)] = [
        (.owner, .admin, nil), (.owner, .member, nil), (.owner, nil, nil),
        (.admin, .member, nil), (.admin, nil, nil), (.admin, .admin, .recallRefused(.notManager)),
        (.admin, .owner, .recallRefused(.notManager)), (.member, .member, .recallRefused(.notManager)),
        (nil, .member, .groupRefused(.actorNotAMember)),
    ]

    @Test("in a group, someone else's message: by the roles read in the transaction", arguments: roleCases)
    func roles(requester: MemberRole?, sender: MemberRole?, refusal: StorageError?) {
        let entry = Self.entry(by: "carol", in: Self.group)
        let outcome = Result { () throws(StorageError) in
            try RecallPlan(entry, target: Self.target, roles: (requester, sender), rules: .members)
        }
        if let refusal {
            #expect(throws: refusal) { try outcome.get() }
        } else {
            #expect(throws: Never.self) { try outcome.get() }
        }
    }

    @Test("in a direct conversation only the sender recalls; the app recalls anything as the sender")
    func directRequesters() throws {
        #expect(throws: StorageError.recallRefused(.notSender)) {
            try RecallPlan(Self.entry(by: "bob"), target: Self.target, roles: nil, rules: .members)
        }
        _ = try RecallPlan(Self.entry(in: Self.group), target: Self.target, roles: nil, rules: .app)
    }

    @Test("the sender's window and the manager's window are each their own; the app has none unless it gives one")
    func windows() throws {
        let rules = RecallPlan.Rules(byApp: false, window: 120_000, managerWindow: 60_000)
        let late = 1_000 + 90_000
        _ = try RecallPlan(Self.entry(at: Int64(late)), target: Self.target, roles: nil, rules: rules)
        #expect(throws: StorageError.recallRefused(.windowExpired(milliseconds: 60_000))) {
            try RecallPlan(
                Self.entry(by: "carol", in: Self.group, at: Int64(late)),
                target: Self.target,
                roles: (.owner, .member),
                rules: rules
            )
        }
        #expect(throws: StorageError.recallRefused(.windowExpired(milliseconds: 120_000))) {
            try RecallPlan(Self.entry(at: 1_000 + 120_001), target: Self.target, roles: nil, rules: rules)
        }
        _ = try RecallPlan(Self.entry(at: 10_000_000), target: Self.target, roles: nil, rules: .app)
    }
}
