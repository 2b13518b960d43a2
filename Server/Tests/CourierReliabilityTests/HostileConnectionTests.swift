// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// SPEC §8 and §9.9 against a client that does not play by the rules, on bare TCP sockets: every connection is
/// answered or closed within a documented time, and the WebSocket closes with the documented code.
@Suite("Hostile connections", .timeLimit(.minutes(5)))
struct HostileConnectionTests {
    /// A server whose request-head deadline is 1 s (10 s by default).
    /// A server with a 1 s request-head deadline. Its authentication deadline is 90 s, not 10: none of these tests is
    /// about it, and on two busy cores a 10 MiB message in fragments once took longer, so the socket was closed with
    /// 1008 `auth.timeout` before the message's size was judged.
    static func withServer(_ body: (TestServer) async throws -> Void) async throws {
        try await withTestServer(configure: {
            $0.limits.requestHeadTimeout = .seconds(1)
            $0.limits.authTimeout = .seconds(90)
        }) { server in
            try await body(server)
        }
    }

    @Test("a connection that sends nothing is answered 408 and closed at the request-head deadline")
    func silentConnection() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            let start = ContinuousClock.now
            // The deadline is 1 s. Under a full parallel run on two cores the close has been seen after 4.0–4.5 s (as
            // the slowloris test below records): the bound is the one that tells a deadline from none, well inside
            // the 10 s this waits.
            let (bytes, closed) = await socket.receive(timeout: .seconds(10))
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
            #expect(closed)
            #expect(ContinuousClock.now - start < .seconds(9))
        }
    }

    @Test("a request head that trickles in (slowloris) is closed at the deadline although bytes keep coming")
    func slowloris() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            let start = ContinuousClock.now
            let opened = await socket.send("GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            var closed = !opened
            var answer: [UInt8] = []
            // The attack's pace: one byte every 100 ms, for at most 20 s. The deadline is 1 s; under a full parallel
            // run on two cores the close has taken 4.1 s to be seen, 7.3 s on a host whose CPU was contended (pressure
            // above 50 %) and 9.2 s in CI (this loop waits for the runtime's threads with every other test): still
            // well before the bytes stop, which is what tells a deadline from none.
            while !closed && ContinuousClock.now - start < .seconds(20) {
                let (bytes, ended) = await socket.receiveSome(timeout: .milliseconds(100))
                answer += bytes
                let sent = ended ? false : await socket.send("a")
                closed = ended || !sent
            }
            #expect(closed)
            #expect(ContinuousClock.now - start < .seconds(18))
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
        }
    }

    @Test(
        "a malformed HTTP request is answered with an error status and the connection is closed",
        arguments: [
            ("bad version", "GET /health HTTP/9.9\r\nHost: x\r\n\r\n"),
            ("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            ("negative Content-Length", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
            ("huge Content-Length", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            ("two Content-Lengths", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            ("header without a colon", "GET /health HTTP/1.1\r\nHost x\r\n\r\n"),
            ("control character in the target", "GET /he\u{1}alth HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("5,000 headers", "GET /health HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 5000) + "\r\n"),
            ("a 1 MiB header", "GET /health HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 1 << 20) + "\r\n\r\n"),
            ("not HTTP at all", "\u{16}\u{3}\u{1}\u{0}\u{a5}\u{1}\u{0}\u{0}\u{a1}\u{3}\u{3}garbage\r\n\r\n"),
        ]
    )
    func malformedRequest(name: String, request: String) async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            await socket.send(request)
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            let status = String(decoding: bytes.prefix(12), as: UTF8.self)
            #expect(["HTTP/1.1 400", "HTTP/1.1 431", "HTTP/1.1 413"].contains(status), "\(name): \(status)")
            #expect(closed, "\(name)")
        }
    }

    @Test("bytes streamed into one header without end are cut off near the head limit, not read for ever")
    func endlessHeader() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            var sent = 0
            var open = await socket.send("GET /health HTTP/1.1\r\nX-Endless: ")
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 16 * 1024)
            while open && sent < 64 << 20 {
                open = await socket.send(chunk)
                sent += chunk.count
            }
            #expect(!open, "still open after \(sent) bytes")
            #expect(sent < 4 << 20, "the server read \(sent) bytes of one header")
        }
    }

    @Test("an unmasked client frame closes the WebSocket with 1002 (RFC 6455 §5.1)")
    func unmaskedFrame() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(#"{"type":"ping","id":"1"}"#.utf8), masked: false))
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            #expect(RawSocket.closeCode(in: bytes) == 1002)
            #expect(closed)
        }
    }

    /// The events `connection` receives (`message <body>`, or the event's name) until `enough` says so or `limit`
    /// passes.
    static func events(
        to connection: RawConnection,
        within limit: Duration,
        until enough: @escaping @Sendable ([String]) -> Bool
    ) async throws -> [String] {
        try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask {
                var seen: [String] = []
                while let frame = try await connection.next() {
                    guard case .event(let event) = frame else { continue }
                    if case .message(let message) = event { seen.append("message \(message.message.body)") } else { seen.append(event.name) }
                    if enough(seen) { return seen }
                }
                return seen
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next().flatMap { $0 } ?? []
        }
    }

    /// The body of the first message event `connection` receives within `limit`; `nil` if none comes.
    static func firstMessage(to connection: RawConnection, within limit: Duration) async throws -> String? {
        let seen = try await events(to: connection, within: limit) { $0.contains { $0.hasPrefix("message ") } }
        return seen.first { $0.hasPrefix("message ") }.map { String($0.dropFirst("message ".count)) }
    }

    /// A bare socket upgraded and connected as `account` (device `raw`), its ack read.
    static func connectedSocket(_ server: TestServer, _ account: AccountID) async throws -> RawSocket {
        let socket = try RawSocket(port: server.port)
        #expect(await socket.upgrade())
        let connect = ClientFrame.connect("c", ConnectRequest(token: try await server.token(for: account), account: account, device: "raw"))
        await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(try JSONEncoder().encode(connect))))
        #expect(await socket.receive(until: "\"ack\"", timeout: .seconds(10)).text.contains("\"ack\""))
        return socket
    }

    /// A server where bob is connected (a protocol client) and alice is on a bare socket (``connectedSocket``).
    static func withBobAndAlice(_ body: @escaping @Sendable (TestServer, RawConnection, RawSocket) async throws -> Void) async throws {
        try await withServer { server in
            try await server.register("alice", "bob")
            try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                try await body(server, bob, try await connectedSocket(server, "alice"))
            }
        }
    }

    @Test("a device that shuts its connection without a close frame: the send it wrote just before still runs, and its session ends at once")
    func finWithoutClose() async throws {
        try await Self.withBobAndAlice { server, bob, alice in
            // The send and the FIN leave together: the server reads both before it runs the send.
            let send = ClientFrame.send("s", SendRequest(conversation: .direct("alice", "bob"), clientID: "last", body: "bye"))
            await alice.send(RawSocket.frame(opcode: 0x1, payload: Array(try JSONEncoder().encode(send))))
            alice.shutdownWrite()
            // The session ends at once (not at the next ping, 30 s later): the server closes its side.
            #expect(await alice.receive(timeout: .seconds(10)).closed)
            // What alice sent before she went still ran: bob gets it.
            #expect(try await Self.firstMessage(to: bob, within: .seconds(20)) == "bye")
            struct Devices: Decodable { struct Device: Decodable { let device: String }; let devices: [Device] }
            let (_, body) = try await server.restResponse("GET", "/v1/accounts/alice/devices")
            #expect(try JSONDecoder().decode(Devices.self, from: body).devices.isEmpty, "alice's closed device is not listed")
        }
    }

    @Test("a send and a read that waits for it, followed in the same write by a close frame, both run; the close is answered with the same code")
    func sendThenClose() async throws {
        try await Self.withBobAndAlice { _, bob, alice in
            let conversation = ConversationID.direct("alice", "bob")
            _ = try await bob.request(.send("h", SendRequest(conversation: conversation, clientID: "hi", body: "hi")))
            // The read is about the same conversation: it runs once the send has, after the close frame was read.
            let send = ClientFrame.send("s", SendRequest(conversation: conversation, clientID: "last", body: "bye"))
            let read = ClientFrame.read("r", ReadRequest(conversation: conversation, seq: 1))
            let close = RawSocket.frame(opcode: 0x8, payload: [0x03, 0xE8])  // 1000
            let encoder = JSONEncoder()
            let frames = [try encoder.encode(send), try encoder.encode(read)].map { RawSocket.frame(opcode: 0x1, payload: Array($0)) }
            await alice.send(frames.joined() + close)
            let (bytes, closed) = await alice.receive(timeout: .seconds(10))
            #expect(RawSocket.closeCode(in: bytes) == 1000)
            #expect(closed)
            // Bob gets both: alice's message, then her read of his.
            let seen = try await Self.events(to: bob, within: .seconds(20)) { seen in
                seen.contains("message bye") && seen.contains("read")
            }
            #expect(seen.contains("message bye") && seen.contains("read"), "\(seen)")
        }
    }

    @Test(
        "a close frame is answered with its own code, or 1002 when that code may not be sent; a reserved bit set closes with 1002",
        arguments: [
            ([0x0B, 0xB9], UInt16(3001)),  // an application's code: the same back
            ([0x03, 0xED], UInt16(1002)),  // 1005 may not be sent in a close frame (RFC 6455 §7.4.1)
            ([0x03], UInt16(1002)),  // one byte: no code
        ] as [([UInt8], UInt16)]
    )
    func closeCodes(payload: [UInt8], answer: UInt16) async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            await socket.send(RawSocket.frame(opcode: 0x8, payload: payload))
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            #expect(RawSocket.closeCode(in: bytes) == answer)
            #expect(closed)
        }
    }

    @Test("a frame with a reserved bit set closes with 1002 (no extension is negotiated)")
    func reservedBit() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            await socket.send(RawSocket.frame(opcode: 0x40 | 0x1, payload: Array(#"{"type":"ping","id":"1"}"#.utf8)))
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            #expect(RawSocket.closeCode(in: bytes) == 1002)
            #expect(closed)
        }
    }

    @Test("invalid UTF-8 in a text message closes with 1007")
    func invalidUTF8() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            await socket.send(RawSocket.frame(opcode: 0x1, payload: [0x7b, 0xff, 0xfe, 0x7d]))
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            #expect(RawSocket.closeCode(in: bytes) == 1007)
            #expect(closed)
        }
    }

    @Test("a 10 MiB message in 160 fragments closes with 1009, as an unfragmented one does")
    func fragmentedTooLarge() async throws {
        try await Self.withServer { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            let piece = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
            var open = true
            for index in 0..<160 where open {
                let opcode: UInt8 = index == 0 ? 0x1 : 0x0
                open = await socket.send(RawSocket.frame(opcode: opcode, payload: piece, fin: index == 159))
            }
            let (bytes, closed) = await socket.receive(timeout: .seconds(5))
            #expect(RawSocket.closeCode(in: bytes) == 1009)
            #expect(closed || !open)
        }
    }

    @Test("before connect, a request of another type is refused with auth.required even when malformed, keeping its id")
    func authPrecedence() async throws {
        // The authentication deadline (10 s by default) is not under test here: in a full run on two cores the seven
        // refusals and the token took longer than that, and the deadline closed the socket before the connect.
        try await withTestServer(configure: { $0.limits.authTimeout = .seconds(90) }) { server in
            try await server.withRawConnection { connection in
                let cases = [
                    (#"{"type":"send","id":"s1","data":{}}"#, "s1", ErrorCode.authRequired),
                    (#"{"type":"sync","id":"s2"}"#, "s2", .authRequired),
                    (#"{"type":"recall","id":"s3","data":{"conversation":5}}"#, "s3", .authRequired),
                    (#"{"type":"createGroup","id":"s4","data":null}"#, "s4", .authRequired),
                    (#"{"type":"warp","id":"s5"}"#, "s5", .authRequired),
                    (#"{"type":true,"id":"t1"}"#, "t1", .frameInvalid),
                    (#"{"type":"connect","id":"c1","data":{}}"#, "c1", .frameInvalid),
                ]
                for (text, id, code) in cases {
                    try await connection.send(text: text)
                    guard case .error(let answered, let error) = try await connection.answer(to: RequestID(rawValue: id))
                    else {
                        Issue.record("no error for \(text)")
                        continue
                    }
                    #expect(answered == RequestID(rawValue: id) && error.code == code, "\(text)")
                }
                let connected = try await connection.connect(as: "alice", server: server)
                guard case .ack = connected else {
                    Issue.record("connect refused: \(String(describing: connected))")
                    return
                }
            }
        }
    }

    @Test("a REST body over the published limit is refused with 413 request.tooLarge")
    func restBodyTooLarge() async throws {
        try await withTestServer(configure: { $0.limits.maxRESTBodyBytes = 64 * 1024 }) { server in
            let accounts = (0..<10_000).map { "\"account-\($0)\"" }.joined(separator: ",")
            let (status, code) = try await server.rest("POST", "/v1/accounts", body: #"{"accounts":[\#(accounts)]}"#)
            #expect(status == 413 && code == "request.tooLarge")
            let registered = try await server.store.accountExists("account-1")
            #expect(!registered)
        }
    }
}

/// RFC 8725 in a session: a token is good for its lifetime only, also once connected.
@Suite("Authentication deadlines of a session", .timeLimit(.minutes(5)))
struct SessionDeadlineTests {
    @Test("a session whose token expires is told auth.tokenExpired, then closed with 1008")
    func expiredSession() async throws {
        try await withTestServer(configure: { $0.tokens = .init(leeway: .zero) }) { server in
            try await server.register("alice")
            // Long enough for the connect to be answered on a loaded machine: the test's own client waits for the
            // runtime's two threads with every other test of a full parallel run (2, 4 and 8 s have each been too short
            // there, once with the connect unanswered 10 s after it was sent).
            let token = try await server.token(for: "alice", lifetime: .seconds(20))
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            let connect = ClientFrame.connect("c", ConnectRequest(token: token, account: "alice", device: "d"))
            await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(connect).utf8)))
            // Read until the server closes (at the token's expiry); 60 s is only a cap.
            let (bytes, closed) = await socket.receive(timeout: .seconds(60))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.contains(#""request":"connect""#) && text.contains(#""code":"auth.tokenExpired""#))
            #expect(RawSocket.closeCode(in: bytes) == 1008 && closed)
        }
    }

    @Test("a WebSocket that never authenticates is closed with 1008 auth.timeout; one that does is not")
    func authenticationTimeout() async throws {
        // 15 s: long enough for a connect to be answered on a loaded machine, where the test's own client waits for the
        // runtime's two threads with every other test of a full parallel run (3 s and 6 s have each been refused with
        // auth.timeout there).
        try await withTestServer(configure: { $0.limits.authTimeout = .seconds(15) }) { server in
            try await server.register("alice")
            let silent = try RawSocket(port: server.port)
            #expect(await silent.upgrade())
            let (bytes, closed) = await silent.receive(timeout: .seconds(40))
            #expect(RawSocket.closeCode(in: bytes) == 1008 && closed)
            #expect(String(decoding: bytes, as: UTF8.self).contains("auth.timeout"))
            // An authenticated session outlives the authentication time.
            try await server.withRawConnection { connection in
                let opened = ContinuousClock.now
                guard case .ack = try await connection.connect(as: "alice", server: server) else {
                    Issue.record("connect refused")
                    return
                }
                // The property is about time: the connection's authentication time passes (no event marks it).
                try await Task.sleep(until: opened + .seconds(16))
                guard case .ack = try await connection.request(.ping("after")) else {
                    Issue.record("an authenticated session was closed")
                    return
                }
            }
        }
    }

    @Test("five refused connects on one connection close it with 1008 auth.tooManyFailures, each refusal answered first")
    func tooManyFailedConnects() async throws {
        // 90 s to authenticate (as in `withServer`): the deadline is not what this tests.
        try await withTestServer(configure: { $0.limits.authTimeout = .seconds(90) }) { server in
            let socket = try RawSocket(port: server.port)
            #expect(await socket.upgrade())
            for attempt in 1...5 {
                let connect = ClientFrame.connect(
                    RequestID(rawValue: "c\(attempt)"),
                    ConnectRequest(token: "not.a.token", account: "alice", device: "d")
                )
                await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(connect).utf8)))
            }
            // Read until the close (30 s at most).
            let (bytes, closed) = await socket.receive(timeout: .seconds(30))
            let text = String(decoding: bytes, as: UTF8.self)
            for attempt in 1...5 { #expect(text.contains(#""id":"c\#(attempt)""#), "refusal \(attempt)") }
            #expect(RawSocket.closeCode(in: bytes) == 1008 && closed)
            #expect(text.contains("auth.tooManyFailures"))
        }
    }

    @Test("the server pings every interval: a peer that answers stays connected, one that does not is closed with 1001")
    func keepAlive() async throws {
        // Four seconds apart: a loaded machine (CI runs suites side by side) must not miss the answering peer's pongs
        // (at two seconds, a full local run once closed the answering peer: its pong came after the next ping).
        try await withTestServer(configure: { $0.limits.pingInterval = .seconds(4) }) { server in
            try await server.register("alice")
            func connected() async throws -> RawSocket {
                let socket = try RawSocket(port: server.port)
                #expect(await socket.upgrade())
                let connect = ClientFrame.connect(
                    "c", ConnectRequest(token: try await server.token(for: "alice"), account: "alice", device: "d")
                )
                await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(connect).utf8)))
                return socket
            }
            // Answers every ping with its payload, for three of them, then still gets its requests answered. The pongs
            // go out from the socket's own thread as each ping arrives: the promise is the server's, and a full
            // parallel run can keep the test's own task waiting for a thread longer than an interval.
            let answering = try await connected()
            let (answered, others, cut) = await answering.answerPings(3, timeout: .seconds(10))
            let seen = others.map { "\($0.opcode): \(String(decoding: $0.payload, as: UTF8.self).prefix(200))" }
            #expect(answered == 3 && !cut, "closed (\(cut)) or silent after \(answered) pings; other frames \(seen)")
            await answering.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(ClientFrame.ping("p")).utf8)))
            // 20 s, as the silent peer's wait below: a CI run side by side once kept this ack past 5 s (2026-12-05).
            let (reply, _) = await answering.receive(until: #""id":"p""#, timeout: .seconds(20))
            #expect(reply.contains(#""id":"p""#) && reply.contains(#""type":"ack""#))

            // Never answers: pinged, then closed with 1001 "Ping timeout" at the next interval.
            let silent = try await connected()
            let (bytes, closed) = await silent.receive(timeout: .seconds(20))
            #expect(RawSocket.frames(in: bytes).contains { $0.opcode == 0x9 })
            #expect(RawSocket.closeCode(in: bytes) == 1001 && closed)
            #expect(String(decoding: bytes, as: UTF8.self).contains("Ping timeout"))
        }
    }

    /// The size of a server frame with a payload of `count` bytes.
}
