// Courier — Apache-2.0
@testable import CourierGateway
@testable import CourierServerCore
import CourierWire
import Testing

/// The session's ordering rules, without a connection (ADR 0034): which request starts when, and in what order the
/// answers leave. Each test feeds events and reads the actions, as the channel handler would.
@Suite("Session state machine")
struct SessionStateMachineTests {
    typealias Machine = SessionStateMachine<String>

    /// What the actions say, in a short form: `run 0`, `connect 0`, `answer a`, `refuse 1 auth.required`, `end …`.
    static func describe(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .run(let index, _, nil): "run \(index)"
            case .run(let index, _, let after?): "run \(index) after \(after)"
            case .connect(let index, _, _): "connect \(index)"
            case .answer(.answered(let answer)): "answer \(answer)"
            case .answer(.refused(let id, let error)): "refuse \(id?.rawValue ?? "-") \(error.code.rawValue)"
            case .end(let reason): "end \(reason.rawValue)"
            }
        }
    }

    static func send(_ id: String, to conversation: String) -> Machine.Inbound {
        .request(.send(RequestID(rawValue: id), SendRequest(conversation: ConversationID(rawValue: conversation), clientID: ClientMessageID(rawValue: id), body: id)))
    }

    static func read(_ id: String, in conversation: String) -> Machine.Inbound {
        .request(.read(RequestID(rawValue: id), ReadRequest(conversation: ConversationID(rawValue: conversation), all: true)))
    }

    static func ping(_ id: String) -> Machine.Inbound { .request(.ping(RequestID(rawValue: id))) }

    static let connect = Machine.Inbound.connect(RequestID(rawValue: "c"), ConnectRequest(token: "t", account: nil, device: "d"))

    /// A machine past a successful `connect` (request index 0).
    static func open(window: Int = 32) -> Machine {
        var machine = Machine(window: window, maxFailedConnects: 3)
        _ = machine.received(connect)
        _ = machine.connected(0, "connected")
        return machine
    }

    @Test("before connect a request is refused with auth.required in its place; connect authenticates what follows")
    func beforeConnect() {
        var machine = Machine(window: 32, maxFailedConnects: 3)
        #expect(Self.describe(machine.received(Self.send("1", to: "d:a:b"))) == ["refuse 1 auth.required"])
        // A frame that could not be decoded but names another type is refused for that too.
        let unknown = WireError(code: .invalidArgument, message: "bad")
        #expect(Self.describe(machine.received(.refused(RequestID(rawValue: "2"), unknown, type: .send))) == ["refuse 2 auth.required"])
        #expect(Self.describe(machine.received(.refused(RequestID(rawValue: "3"), unknown, type: .connect))) == ["refuse 3 request.invalidArgument"])
        #expect(Self.describe(machine.received(Self.connect)) == ["connect 3"])
        #expect(!machine.wantsToRead)
        // What arrives while connect runs waits for its answer, then runs as the device.
        #expect(machine.received(Self.send("4", to: "d:a:b")).isEmpty)
        #expect(Self.describe(machine.connected(3, "ack c")) == ["answer ack c", "run 4"])
        #expect(machine.isAuthenticated)
        // A second connect is refused in its place: after the answer of the send before it.
        #expect(machine.received(Self.connect).isEmpty)
        #expect(Self.describe(machine.finished(4, "sent")) == ["answer sent", "refuse c auth.alreadyConnected"])
    }

    @Test("failed connects count; at the limit the refusal goes out and the session ends; the rest is not answered")
    func failedConnects() {
        var machine = Machine(window: 32, maxFailedConnects: 2)
        let bad = WireError(code: .authInvalidToken, message: "bad")
        _ = machine.received(Self.connect)
        #expect(Self.describe(machine.connectRefused(0, bad, requestID: RequestID(rawValue: "c"), countsAsFailure: true)) == ["refuse c auth.invalidToken"])
        // A refusal that is not the token's (a bad device name) does not count.
        _ = machine.received(Self.connect)
        let device = WireError(code: .invalidArgument, message: "device")
        #expect(Self.describe(machine.connectRefused(1, device, requestID: RequestID(rawValue: "c"), countsAsFailure: false)) == ["refuse c request.invalidArgument"])
        _ = machine.received(Self.connect)
        #expect(machine.received(Self.ping("p")).isEmpty)  // waits for the connect
        #expect(
            Self.describe(machine.connectRefused(2, bad, requestID: RequestID(rawValue: "c"), countsAsFailure: true))
                == ["refuse c auth.invalidToken", "end auth.tooManyFailures"]
        )
        #expect(machine.isEnded)
        #expect(machine.received(Self.ping("q")).isEmpty)
    }

    @Test("requests about different conversations run at once; answers leave in request order")
    func answersInOrder() {
        var machine = Self.open()
        #expect(Self.describe(machine.received(Self.read("1", in: "d:a:b"))) == ["run 1"])
        #expect(Self.describe(machine.received(Self.read("2", in: "d:a:c"))) == ["run 2"])
        // The second finishes first: it waits for the first's answer.
        #expect(machine.finished(2, "two").isEmpty)
        #expect(Self.describe(machine.finished(1, "one")) == ["answer one", "answer two"])
    }

    @Test("a send after a running send into the same conversation starts told to follow it; anything else waits for it to run")
    func oneConversation() {
        var machine = Self.open()
        #expect(Self.describe(machine.received(Self.send("1", to: "d:a:b"))) == ["run 1"])
        // The second send may share the first's commit: it follows it into the store's commit order.
        #expect(Self.describe(machine.received(Self.send("2", to: "d:a:b"))) == ["run 2 after 1"])
        #expect(machine.received(Self.read("3", in: "d:a:b")).isEmpty)
        #expect(machine.received(Self.send("4", to: "d:a:b")).isEmpty, "a send after a waiting read waits")
        // The read waits until the send before it ran; the send after the read, until the read ran.
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1"])
        #expect(Self.describe(machine.finished(2, "s2")) == ["answer s2", "run 3"])
        #expect(Self.describe(machine.finished(3, "r3")) == ["answer r3", "run 4"])
        // A send after a send that ran already has nothing to follow.
        #expect(Self.describe(machine.received(Self.send("5", to: "d:a:b"))) == ["run 5 after 4"])
        _ = machine.finished(4, "s4")
        _ = machine.finished(5, "s5")
        #expect(Self.describe(machine.received(Self.send("6", to: "d:a:b"))) == ["run 6"])
    }

    @Test("a read after a running read of the same conversation starts told to follow it, so a device's reads share a write; a send after a read waits")
    func readsFollowReads() {
        var machine = Self.open()
        #expect(Self.describe(machine.received(Self.read("1", in: "d:a:b"))) == ["run 1"])
        #expect(Self.describe(machine.received(Self.read("2", in: "d:a:b"))) == ["run 2 after 1"])
        #expect(Self.describe(machine.received(Self.read("3", in: "d:a:b"))) == ["run 3 after 2"])
        #expect(machine.received(Self.send("4", to: "d:a:b")).isEmpty, "a send after a running read waits for it")
        #expect(machine.received(Self.read("5", in: "d:a:b")).isEmpty, "a read after a waiting send waits")
        // Answers still leave in request order, whichever commits first.
        #expect(machine.finished(2, "r2").isEmpty)
        #expect(Self.describe(machine.finished(1, "r1")) == ["answer r1", "answer r2"])
        #expect(Self.describe(machine.finished(3, "r3")) == ["answer r3", "run 4"])
        #expect(Self.describe(machine.finished(4, "s4")) == ["answer s4", "run 5"])
    }

    @Test("a request about no single conversation runs after everything before it is answered, and before what follows")
    func barriers() {
        var machine = Self.open()
        #expect(Self.describe(machine.received(Self.send("1", to: "d:a:b"))) == ["run 1"])
        #expect(machine.received(Self.ping("2")).isEmpty)
        #expect(machine.received(Self.send("3", to: "d:a:c")).isEmpty)
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1", "run 2"])
        #expect(Self.describe(machine.finished(2, "pong")) == ["answer pong", "run 3"])
    }

    @Test("refusals take their place in the order without running")
    func refusalsInOrder() {
        var machine = Self.open()
        _ = machine.received(Self.send("1", to: "d:a:b"))
        let tooLarge = WireError(code: .frameTooLarge, message: "large")
        #expect(machine.received(.refused(RequestID(rawValue: "2"), tooLarge, type: nil)).isEmpty)
        #expect(Self.describe(machine.received(Self.read("3", in: "d:a:c"))) == ["run 3"])
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1", "refuse 2 frame.tooLarge"])
        #expect(Self.describe(machine.finished(3, "r3")) == ["answer r3"])
    }

    @Test("at the window the connection is not read and what arrives waits; an answer lets it in")
    func window() {
        var machine = Self.open(window: 2)
        _ = machine.received(Self.read("1", in: "d:a:b"))
        _ = machine.received(Self.read("2", in: "d:a:c"))
        #expect(!machine.wantsToRead)
        #expect(machine.received(Self.read("3", in: "d:a:d")).isEmpty)
        #expect(machine.unanswered == 2)
        #expect(Self.describe(machine.finished(1, "one")) == ["answer one", "run 3"])
        #expect(!machine.wantsToRead)
        _ = machine.finished(2, "two")
        #expect(machine.wantsToRead)
    }

    @Test("a device that closed still has what it sent run, in order; nothing new is taken")
    func draining() {
        var machine = Self.open()
        _ = machine.received(Self.send("1", to: "d:a:b"))
        _ = machine.received(Self.read("2", in: "d:a:b"))  // waits for 1 to run
        #expect(machine.end(dropping: false).isEmpty)
        #expect(machine.isEnded)
        #expect(machine.received(Self.ping("3")).isEmpty)
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1", "run 2"])
        _ = machine.finished(2, "r2")
        #expect(machine.unanswered == 0)
    }

    @Test("frames held for a full window still run after the device closed; the server's end drops what has not started")
    func drainingWithHeldFrames() {
        var machine = Self.open(window: 1)
        _ = machine.received(Self.send("1", to: "d:a:b"))
        #expect(machine.received(Self.read("2", in: "d:a:c")).isEmpty, "held: the window is full")
        _ = machine.received(Self.read("3", in: "d:a:d"))
        _ = machine.end(dropping: false)
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1", "run 2"])
        // The node stops meanwhile: 3 was not started, so it never runs.
        _ = machine.end(dropping: true)
        #expect(Self.describe(machine.finished(2, "r2")) == ["answer r2"])
        #expect(machine.unanswered == 0)
    }

    @Test("an ended session runs nothing more; what runs still answers, so its events are published")
    func ending() {
        var machine = Self.open()
        _ = machine.received(Self.send("1", to: "d:a:b"))
        _ = machine.received(Self.read("2", in: "d:a:b"))  // waits for 1 to run
        #expect(machine.end().isEmpty)
        #expect(Self.describe(machine.finished(1, "s1")) == ["answer s1"])  // 2 never runs
        #expect(machine.unanswered == 0)
        #expect(machine.received(Self.ping("3")).isEmpty)
    }
}
