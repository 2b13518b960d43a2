// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Limits on what one device (and one account) may write. A device past its rate is refused
/// `rate.limited` with `retryAfterMs`, nothing written, the connection up, and so is every write of it until then; the
/// SDK waits and sends again by itself, in order.
@Suite("Rate limits")
struct RateLimitTests {
    /// Sends `count` sends at once on `wire` (pipelined, not waiting for answers) and returns their answers in order.
    func pipelinedSends(_ wire: RawConnection, _ count: Int, tag: String, to conversation: ConversationID) async throws
        -> [ServerFrame]
    {
        for index in 0..<count {
            let id = RequestID(rawValue: "\(tag)-\(index)")
            let request = SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "\(tag)-\(index)"), body: "\(tag) \(index)")
            try await wire.send(.send(id, request))
        }
        var answers: [ServerFrame] = []
        for index in 0..<count {
            guard let answer = try await wire.answer(to: RequestID(rawValue: "\(tag)-\(index)")) else { break }
            answers.append(answer)
        }
        return answers
    }

    /// The ids of the server's history of `conversation`, oldest first.
    func history(_ server: TestServer, _ conversation: ConversationID) async throws -> [String] {
        let (status, body) = try await server.restResponse("GET", "/v1/conversations/\(conversation)/messages?account=bob&limit=100")
        #expect(status == 200)
        struct Page: Decodable {
            struct Entry: Decodable { let id: String }
            let messages: [Entry]
        }
        return try JSONDecoder().decode(Page.self, from: body).messages.map(\.id)
    }

    @Test("a device past its sends: the rest refused rate.limited with retryAfterMs, nothing written, the connection up; after the wait it sends again")
    func deviceSends() async throws {
        try await withTestServer(configure: { $0.limits.deviceSendsPerSecond = 1 }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            try await server.withRawConnection { wire in
                _ = try await wire.connect(as: "alice", server: server)
                // One a second, five at once: the first five of twelve pipelined sends are written, the rest refused.
                let answers = try await pipelinedSends(wire, 12, tag: "burst", to: direct)
                #expect(answers.count == 12)
                let acked = answers.prefix { if case .ack = $0 { true } else { false } }
                #expect(acked.count == 5)
                var waits: [Int] = []
                for answer in answers.dropFirst(5) {
                    guard case .error(_, let error) = answer else {
                        Issue.record("a send past the limit was answered \(answer)")
                        continue
                    }
                    #expect(error.code == .rateLimited)
                    waits.append(error.retryAfterMs ?? 0)
                }
                #expect(waits.allSatisfy { (1...1000).contains($0) }, "\(waits)")
                // Nothing of the refused ones was written; requests that read still work.
                #expect(try await history(server, direct).count == 5)
                guard case .ack? = try await wire.request(.ping("ping")) else {
                    Issue.record("the connection did not answer a ping after the refusals")
                    return
                }
                // Once the time it was told has passed, a send goes through.
                try await Task.sleep(for: .milliseconds(waits.max() ?? 1000))
                let again = try await wire.request(
                    .send("after", SendRequest(conversation: direct, clientID: "after", body: "after the wait"))
                )
                guard case .ack? = again else {
                    Issue.record("the send after the wait was answered \(String(describing: again))")
                    return
                }
            }
        }
    }

    @Test("an account's sends are counted across its devices; reads count apart from sends")
    func accountAndWrites() async throws {
        let configure: (inout CourierServerConfiguration) -> Void = {
            $0.limits.accountSendsPerSecond = 1
            $0.limits.deviceWritesPerSecond = 1
        }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            try await server.withRawConnection { phone in
                _ = try await phone.connect(as: "alice", server: server, device: "phone")
                try await server.withRawConnection { tablet in
                    _ = try await tablet.connect(as: "alice", server: server, device: "tablet")
                    // One a second, five at once, for the account: three from the phone, two from the tablet, then
                    // the tablet's next is refused.
                    let phoneSends = try await pipelinedSends(phone, 3, tag: "phone", to: direct)
                    let tabletSends = try await pipelinedSends(tablet, 3, tag: "tablet", to: direct)
                    let codes = (phoneSends + tabletSends).map { frame -> String in
                        if case .error(_, let error) = frame { return error.code.rawValue }
                        return "ack"
                    }
                    #expect(codes == ["ack", "ack", "ack", "ack", "ack", "rate.limited"], "\(codes)")
                    // Reads have their own bucket: five at once, then refused. Sent together, as the sends are: one
                    // after the other, a loaded machine could take the second the bucket needs to refill one.
                    for index in 0..<6 {
                        try await phone.send(.read(RequestID(rawValue: "read-\(index)"), ReadRequest(conversation: direct, seq: Seq(1))))
                    }
                    var readCodes: [String] = []
                    for index in 0..<6 {
                        let answer = try await phone.answer(to: RequestID(rawValue: "read-\(index)"))
                        if case .error(_, let error)? = answer { readCodes.append(error.code.rawValue) } else { readCodes.append("ack") }
                    }
                    #expect(readCodes == ["ack", "ack", "ack", "ack", "ack", "rate.limited"], "\(readCodes)")
                }
            }
        }
    }

    @Test("an app on the SDK that sends faster than its limit: every message sent once, in order, without an error")
    func sdkWaitsAndRetries() async throws {
        try await withTestServer(configure: { $0.limits.deviceSendsPerSecond = 5 }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            // 25 at once, then five a second: the last ten each wait for the server's word.
            let started = ContinuousClock.now
            var sent: [String] = []
            for index in 0..<35 { sent.append(try await alice.send("m\(index)", to: direct).stored().id.rawValue) }
            let took = ContinuousClock.now - started
            #expect(took >= .seconds(1.5), "35 sends at 5 a second after 25 took only \(took)")
            #expect(try await history(server, direct) == sent)
            await alice.disconnect()
        }
    }
}
