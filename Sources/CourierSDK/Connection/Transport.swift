// Courier — Apache-2.0
public import Foundation

/// Carries text frames over one connection. The SDK ships ``WebSocketTransport`` (SwiftNIO: Network.framework with
/// the system's TLS on Apple platforms, POSIX sockets with NIOSSL elsewhere); the protocol keeps the door open for
/// others (e.g. `URLSessionWebSocketTask`, or a test double) without changing the client's API.
public protocol Transport: Sendable {
    /// Opens a connection to `url` and runs until it closes.
    ///
    /// Every received text frame is passed to `receive`, in order. `session` runs concurrently with reading and is
    /// handed a way to send; when `session` returns or throws, the connection is closed. When the peer closes the
    /// connection, `session` is cancelled.
    func run(
        url: URL,
        receive: @escaping @Sendable (String) async -> Void,
        session: @escaping @Sendable (any TransportSender) async throws -> Void
    ) async throws
}

/// Sends text frames on an open connection.
public protocol TransportSender: Sendable {
    func send(_ text: String) async throws
}

/// The connection closed before `session` finished.
struct TransportClosed: Error {}
