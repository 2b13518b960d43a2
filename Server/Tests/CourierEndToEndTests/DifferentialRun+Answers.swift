// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

extension DifferentialRun {
    /// The group's messages that asked for read receipts.
    func asking() -> [Known] {
        (known.withLock { $0[Self.group] } ?? []).filter(\.asked)
    }

    func message(in conversation: ConversationID, pick: Int) -> Known? {
        let messages = known.withLock { $0[conversation] } ?? []
        return messages.isEmpty ? nil : messages[pick % messages.count]
    }

    /// A request's answer in canonical form.
    func ask(_ device: DifferentialDevice, _ make: (RequestID) -> ClientFrame) async -> String {
        await raw(device, make).text
    }

    func raw(_ device: DifferentialDevice, _ make: (RequestID) -> ClientFrame) async -> (frame: ServerFrame?, text: String) {
        do {
            let frame = try await clients[device]!.request(make)
            switch frame {
            case .error(_, let error): return (frame, "error \(error.code)")
            default: return (frame, canonical(FrameCoder().encode(frame)))
            }
        } catch {
            return (nil, "failed: \(error)")
        }
    }

    func appRecall(_ id: MessageID, in conversation: ConversationID, mode: String) async throws -> (text: String, facts: String) {
        let server = servers[appRequests.wrappingAdd(1, ordering: .relaxed).oldValue % servers.count]
        let (status, data) = try await server.restResponse(
            "POST",
            "v1/conversations/\(conversation)/recall",
            body: #"{"messageId":"\#(id)","mode":"\#(mode)"}"#
        )
        let facts: String
        if status == 200, let ack = try? JSONDecoder().decode(SendAck.self, from: data) {
            facts = "recall \(ack.message.seq.rawValue) dup \(ack.duplicate)"
        } else if let problem = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let code = problem["code"] as? String {
            facts = "error \(code)"
        } else {
            facts = "REST \(status)"
        }
        return ("REST \(status) " + canonical(String(decoding: data, as: UTF8.self)), facts)
    }

    // MARK: Facts (what the model predicts, read from the answers)

    /// An error's code, or what `describe` reads from the ack.
    func facts(_ frame: ServerFrame?, _ describe: (Ack) -> String?) -> String {
        switch frame {
        case nil: "failed"
        case .error(_, let error)?: "error \(error.code.rawValue)"
        case .ack(_, let ack)?: describe(ack) ?? "unexpected ack"
        case .event?: "unexpected event"
        }
    }

    func readAnswer(_ label: String, _ reply: (frame: ServerFrame?, text: String)) -> (answer: String, facts: String) {
        (label + reply.text, facts(reply.frame) { ack in
            guard case .read(let state) = ack else { return nil }
            return "read \(state.watermark.seq.rawValue) \(state.readSeqs.map(\.rawValue)) unread \(state.unreadCount)"
        })
    }

    func unreadFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .unread(let unread) = ack else { return nil }
            let counts = unread.conversations.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key)=\($0.value)" }
            return "unread \(counts) total \(unread.total)"
        }
    }

    func countFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .receiptCounts(let ack) = ack else { return nil }
            return "counts \(ack.counts.map { count in name(count.messageID) + (count.recalled == true ? " recalled" : " \(count.readCount)/\(count.unreadCount)") })"
        }
    }

    func historyFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .history(let history) = ack else { return nil }
            let lines = history.messages.map { message -> String in
                if let change = message.group {
                    let accounts = change.accounts.map(\.rawValue).joined(separator: ", ")
                    return "\(message.seq.rawValue) \(change.action.rawValue) [\(accounts)]" + (change.role.map { " \($0.rawValue)" } ?? "")
                }
                if let notice = message.recall {
                    return "\(message.seq.rawValue) recall \(name(notice.messageID)) \(notice.mode) by \(notice.recalledBy)"
                }
                return "\(message.seq.rawValue) \(message.clientID) \(message.isRecalled ? "recalled" : message.body) q=\(message.quote ?? "-")"
                    + " t=\(message.type ?? "-")\(message.needsReadReceipt == true ? " asks" : "")"
            }
            return "history \(lines) more \(history.hasMore)"
        }
    }

    /// A sync from scratch: per conversation, its newest seq, unread count and group membership, and the seqs of the
    /// entries it carried.
    func syncFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .sync(let sync) = ack else { return nil }
            let seqs = Dictionary(grouping: sync.messages, by: \.conversation).mapValues { $0.map(\.seq.rawValue) }
            let states = sync.conversations.sorted { $0.id.rawValue < $1.id.rawValue }.map { state in
                let group = state.group.map { " \($0.role.rawValue) joined \($0.joinedSeq.rawValue) of \($0.memberCount)" } ?? ""
                return "\(state.id) last \(state.lastSeq.rawValue) unread \(state.unreadCount.map(String.init) ?? "-")\(group)"
                    + " entries \(seqs[state.id] ?? [])"
            }
            return "sync \(states) more \(sync.hasMore)"
        }
    }

    /// A message by the client id it was sent with (the model's name for it).
    func name(_ id: MessageID) -> String { names.withLock { $0[id] } ?? id.rawValue }

    /// JSON with sorted keys, and every server-assigned id (a UUID) replaced by its order of first appearance.
    func canonical(_ json: String) -> String {
        var text = json
        if let object = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed),
            let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        {
            text = String(decoding: sorted, as: UTF8.self)
        }
        // A cursor names its database and its stamps: what it brings is compared, not its text.
        text = text.replacing(/"since":"[^"]*"/) { _ in #""since":"…""# }
        let pattern = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/
        return text.replacing(pattern) { match in
            let id = String(match.output)
            let index = idOrder.withLock { table in
                if let index = table[id] { return index }
                table[id] = table.count + 1
                return table.count
            }
            return "#\(index)"
        }
    }
}
