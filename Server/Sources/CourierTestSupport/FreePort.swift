// Courier — Apache-2.0
internal import Foundation
#if canImport(Glibc)
internal import Glibc
#endif

/// A TCP port nothing listens on right now (bound, then released).
public func freePort() async throws -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
        }
    }
    guard bound else { throw FreePortError() }
    return Int(UInt16(bigEndian: address.sin_port))
}

struct FreePortError: Error {}
