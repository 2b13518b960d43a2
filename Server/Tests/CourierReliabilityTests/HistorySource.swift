// Courier — Apache-2.0
import CourierTestSupport
import Foundation

/// A vendor's history as Courier history lines, generated with a fixed seed: 60 accounts, 150 direct conversations
/// and 50 groups of 100 messages each (20,000), interleaved in time; members added and removed halfway; replies,
/// images, ext and read-receipt requests; reads in the middle and at the end; one recall per conversation.
struct HistorySource {
    struct Message {
        let id: String
        let from: String
        let time: Int64
        let type: String?
        let body: String
        let ext: [String: String]?
    }
    struct Conversation {
        let id: String
        /// A member from start to end (a direct conversation's first account, a group's owner).
        let viewer: String
        var messages: [Message] = []
        var recalled: Set<String> = []
    }

    var lines: [String] = []
    var accounts: [String] = []
    var conversations: [Conversation] = []
    /// Each direct reader's position: the index of the last message it read, by conversation and account.
    var reads: [String: [String: Int]] = [:]
    var messageCount: Int { conversations.reduce(0) { $0 + $1.messages.count } }

    /// The unread count of `account` in each of its direct conversations: its peer's messages after its read
    /// position, recalled ones left out.
    func directUnread(of account: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for conversation in conversations where conversation.id.hasPrefix("d:") {
            let members = conversation.id.split(separator: ":").dropFirst().map(String.init)
            guard members.contains(account) else { continue }
            let position = reads[conversation.id]?[account] ?? -1
            counts[conversation.id] = conversation.messages.enumerated().filter { index, message in
                index > position && message.from != account && !conversation.recalled.contains(message.id)
            }.count
        }
        return counts
    }

    static func generate() -> HistorySource {
        var source = HistorySource()
        var random = SplitMix64(seed: 38)
        source.accounts = (0..<60).map { String(format: "u%02d", $0) }
        let accounts = source.accounts
        for (index, account) in accounts.enumerated() {
            source.line(["kind": "account", "id": account, "createdAt": 1_500_000_000_000 + Int64(index)])
        }
        var pairs: Set<[String]> = []
        var step = 0
        while pairs.count < 150 {
            let one = accounts[step % 60], other = accounts[(step * 7 + 1 + step / 60) % 60]
            step += 1
            if one != other { pairs.insert([one, other].sorted()) }
        }
        var members: [[String]] = []
        for pair in pairs.sorted(by: { $0.joined() < $1.joined() }) {
            source.conversations.append(Conversation(id: "d:\(pair[0]):\(pair[1])", viewer: pair[0]))
            members.append(pair)
        }
        let start: Int64 = 1_577_836_800_000
        for group in 0..<50 {
            let owner = accounts[group % 60]
            let others = (1...4).map { accounts[(group * 3 + $0 * 11) % 60] }.filter { $0 != owner }
            let id = String(format: "team%02d", group)
            source.line([
                "kind": "group", "id": "\(id)-created", "group": id, "action": "created", "by": owner,
                "accounts": others, "time": start - 1000,
            ])
            source.conversations.append(Conversation(id: "g:\(id)", viewer: owner))
            members.append([owner] + others)
        }
        for round in 0..<100 {
            for index in source.conversations.indices {
                let conversation = source.conversations[index]
                let time = start + Int64(round * 200 + index) * 1000
                let isGroup = conversation.id.hasPrefix("g:")
                if isGroup, round == 40 {
                    let joiner = accounts[(index * 5 + 7) % 60]
                    if !members[index].contains(joiner) {
                        source.line([
                            "kind": "group", "id": "\(conversation.id.dropFirst(2))-add", "group": String(conversation.id.dropFirst(2)),
                            "action": "added", "by": conversation.viewer, "accounts": [joiner], "time": time - 500,
                        ])
                        members[index].append(joiner)
                    }
                }
                if isGroup, round == 70, members[index].count > 2 {
                    let leaver = members[index].removeLast()
                    source.line([
                        "kind": "group", "id": "\(conversation.id.dropFirst(2))-remove", "group": String(conversation.id.dropFirst(2)),
                        "action": "removed", "by": conversation.viewer, "accounts": [leaver], "time": time - 500,
                    ])
                }
                let from = members[index][random.next(below: members[index].count)]
                let number = round * 200 + index
                var line: [String: Any] = ["kind": "message", "id": "msg-\(number)", "from": from, "time": time]
                if isGroup {
                    line["group"] = String(conversation.id.dropFirst(2))
                } else {
                    line["to"] = members[index].first { $0 != from }!
                }
                var type: String?
                var body = "消息 \(number) 🙂 from \(from)"
                if number % 13 == 0 {
                    type = "image"
                    body = #"{"url":"https://cdn.example.com/\#(number).jpg","w":640,"h":480}"#
                    line["type"] = type
                }
                line["body"] = body
                var ext: [String: String]?
                if number % 17 == 0 {
                    ext = ["source": "vendor", "n": String(number)]
                    line["ext"] = ext
                }
                if round > 0, number % 19 == 0, let previous = source.conversations[index].messages.last {
                    line["replyTo"] = previous.id
                }
                if isGroup, number % 11 == 0 { line["needsReadReceipt"] = true }
                source.line(line)
                source.conversations[index].messages.append(Message(id: "msg-\(number)", from: from, time: time, type: type, body: body, ext: ext))
            }
            if round == 30 {
                // Reads in the middle of the history: the second account of each direct conversation, to round 25.
                for index in source.conversations.indices where !source.conversations[index].id.hasPrefix("g:") {
                    source.read(index, account: members[index][1], upTo: 25, with: members[index][0], time: start + 31 * 200_000)
                }
            }
        }
        let end = start + 100 * 200_000
        for index in source.conversations.indices {
            let conversation = source.conversations[index]
            let target = conversation.messages[50]
            let by = conversation.id.hasPrefix("g:") ? conversation.viewer : target.from
            source.line(["kind": "recall", "id": "recall-\(target.id)", "message": target.id, "by": by, "time": end])
            source.conversations[index].recalled.insert(target.id)
        }
        for index in source.conversations.indices {
            let conversation = source.conversations[index]
            if conversation.id.hasPrefix("g:") {
                for (offset, member) in members[index].enumerated() {
                    let upTo = conversation.messages[80 + offset].id
                    source.line([
                        "kind": "read", "account": member, "group": String(conversation.id.dropFirst(2)), "upTo": upTo,
                        "time": end + 1000,
                    ])
                }
            } else {
                source.read(index, account: members[index][0], upTo: 60 + index % 30, with: members[index][1], time: end + 1000)
                source.read(index, account: members[index][1], upTo: 90 + index % 10, with: members[index][0], time: end + 2000)
            }
        }
        return source
    }

    mutating func read(_ index: Int, account: String, upTo position: Int, with peer: String, time: Int64) {
        let conversation = conversations[index]
        line([
            "kind": "read", "account": account, "with": peer, "upTo": conversation.messages[position].id, "time": time,
        ])
        reads[conversation.id, default: [:]][account] = max(reads[conversation.id]?[account] ?? -1, position)
    }

    mutating func line(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        lines.append(String(decoding: data, as: UTF8.self))
    }
}

extension SplitMix64 {
    /// A number in `0..<bound`.
    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
