// Courier — Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
internal import Foundation

/// A bare TCP connection to 127.0.0.1 for tests that speak HTTP or WebSocket the way no library would: trickling
/// bytes, malformed requests, unmasked or fragmented frames, never reading. Blocking calls run on a thread of their
/// own, so they never hold one of the concurrency runtime's few threads.
public final class RawSocket: Sendable {
    let descriptor: Int32

    /// Connects to `127.0.0.1:port`, from `source` when given (another loopback address, `127.0.0.2`: a second
    /// client as a proxy in front would see it).
    public init(port: Int, from source: String? = nil) throws {
        // The descriptor is this object's only once connected: a failed connect closes it here, and `deinit` (which
        // runs for a fully initialised object whose init throws) must not close it again — by then the number may be
        // another socket's (an accepted connection of a server in this process: NIO found it closed, EBADF).
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError.refused("socket: \(errno)") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                let failure = errno
                close(descriptor)
                throw HarnessError.refused("bind \(source): \(failure)")
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let failure = errno
            close(descriptor)
            throw HarnessError.refused("connect: \(failure)")
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Writes all of `bytes`; `false` when the peer has closed the connection.
    @discardableResult
    public func send(_ bytes: [UInt8]) async -> Bool {
        await offThread { [descriptor] in
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }

    @discardableResult
    public func send(_ text: String) async -> Bool { await send(Array(text.utf8)) }

    /// Shuts the sending side (a FIN, no close frame): what a device does when its app is killed. It still reads.
    public func shutdownWrite() { shutdown(descriptor, Int32(SHUT_WR)) }

    /// Reads what arrives until the peer closes or `timeout` passes without any byte: the bytes, and whether the
    /// peer closed.
    public func receive(timeout: Duration) async -> (bytes: [UInt8], closed: Bool) {
        await offThread { [descriptor] in
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            while true {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { return (received, false) }
                let count = recv(descriptor, &chunk, chunk.count, 0)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return (received, true) }
                received += chunk[0..<count]
            }
        }
    }

    /// Reads until `marker` has arrived (or the peer closes, or `timeout` passes without a byte).
    public func receive(until marker: String, timeout: Duration) async -> (text: String, closed: Bool) {
        var text = ""
        while !text.contains(marker) {
            let (bytes, closed) = await receiveSome(timeout: timeout)
            text += String(decoding: bytes, as: UTF8.self)
            if closed || bytes.isEmpty { return (text, closed) }
        }
        return (text, false)
    }

    /// One read: what is there within `timeout` (empty when nothing came), and whether the peer closed.
    public func receiveSome(timeout: Duration) async -> (bytes: [UInt8], closed: Bool) {
        await offThread { [descriptor] in
            var chunk = [UInt8](repeating: 0, count: 65536)
            let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            while true {
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { return ([], false) }
                let count = recv(descriptor, &chunk, chunk.count, 0)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return ([], true) }
                return (Array(chunk[0..<count]), false)
            }
        }
    }

    /// Answers the server's pings with pongs from this socket's own thread, the moment each arrives, until `count`
    /// were answered, the peer closes, or `timeout` passes without a byte: a client whose answers do not wait for the
    /// test's task (on a loaded machine the runtime's threads can be busy for seconds). Returns the pings answered,
    /// the frames of another kind that arrived, and whether the peer closed.
    public func answerPings(
        _ count: Int,
        timeout: Duration
    ) async -> (answered: Int, others: [(opcode: UInt8, payload: [UInt8])], closed: Bool) {
        await offThread { [descriptor] in
            var pending: [UInt8] = []
            var answered = 0
            var others: [(opcode: UInt8, payload: [UInt8])] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            while answered < count {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { return (answered, others, false) }
                let received = recv(descriptor, &chunk, chunk.count, 0)
                if received < 0 && errno == EINTR { continue }
                guard received > 0 else { return (answered, others, true) }
                pending += chunk[0..<received]
                let frames = Self.frames(in: pending)
                pending.removeFirst(frames.reduce(0) { $0 + Self.frameSize(payload: $1.payload.count) })
                for frame in frames {
                    guard frame.opcode == 0x9 else {
                        others.append(frame)
                        continue
                    }
                    let pong = Self.frame(opcode: 0xA, payload: frame.payload)
                    let sent = pong.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent == pong.count else { return (answered, others, true) }
                    answered += 1
                }
            }
            return (answered, others, false)
        }
    }

    /// The size of an unmasked server frame carrying `payload` bytes.
    public static func frameSize(payload: Int) -> Int {
        switch payload {
        case 0..<126: 2 + payload
        case 126..<65536: 4 + payload
        default: 10 + payload
        }
    }

    /// Upgrades to a WebSocket at `path`; `true` on `101 Switching Protocols`.
    public func upgrade(path: String = "/v1/ws") async -> Bool {
        let request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        guard await send(request) else { return false }
        let (text, _) = await receive(until: "\r\n\r\n", timeout: .seconds(10))
        return text.hasPrefix("HTTP/1.1 101")
    }

    /// A WebSocket frame from a client: masked unless told otherwise.
    public static func frame(opcode: UInt8, payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        switch payload.count {
        case 0..<126: bytes.append(maskBit | UInt8(payload.count))
        case 126..<65536: bytes += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        default: bytes += [maskBit | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xff) }
        }
        guard masked else { return bytes + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return bytes + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    /// The complete server frames (unmasked) at the start of `bytes`: opcode and payload each.
    public static func frames(in bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        var frames: [(opcode: UInt8, payload: [UInt8])] = []
        var index = 0
        while index + 2 <= bytes.count {
            var length = Int(bytes[index + 1] & 0x7f)
            var header = 2
            if length == 126 {
                guard index + 4 <= bytes.count else { break }
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127 {
                guard index + 10 <= bytes.count else { break }
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[index + 2 + $1]) }
                header = 10
            }
            guard index + header + length <= bytes.count else { break }
            frames.append((bytes[index] & 0x0f, Array(bytes[(index + header)..<(index + header + length)])))
            index += header + length
        }
        return frames
    }

    /// The close code of the first close frame among server frames in `bytes` (server frames are unmasked).
    public static func closeCode(in bytes: [UInt8]) -> UInt16? {
        var index = 0
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0f
            var length = Int(bytes[index + 1] & 0x7f)
            var header = 2
            if length == 126, index + 4 <= bytes.count {
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127, index + 10 <= bytes.count {
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[index + 2 + $1]) }
                header = 10
            }
            let start = index + header
            if opcode == 0x8 {
                guard start + 2 <= bytes.count else { return nil }
                return UInt16(bytes[start]) << 8 | UInt16(bytes[start + 1])
            }
            index = start + length
        }
        return nil
    }

    private func offThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }
}
