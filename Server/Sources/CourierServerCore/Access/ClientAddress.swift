// Courier — Apache-2.0
internal import Foundation
internal import NIOCore

/// The proxies whose word on a client's address is taken (`--trusted-proxies`): CIDR ranges, IPv4 or IPv6.
///
/// Behind a proxy every connection comes from the proxy, so the TCP peer says nothing about the client. From a
/// trusted peer the client's address is read from `X-Forwarded-For`, the one header every proxy we document sets: its
/// addresses are walked from the right (the nearest hop) past every trusted one, and the first untrusted one is the
/// client — what a client writes into the header itself sits to the left of it and is never believed, as nginx's
/// `real_ip_recursive` does. Only that header: a proxy passes the others through, so a `Forwarded` the client wrote
/// would name whoever it likes. From an untrusted peer the header is ignored. An IPv4 address mapped into IPv6
/// (`::ffff:127.0.0.1`, a dual-stack listener's peer) is its IPv4 address. The client's address is what the failed
/// connect throttle counts and what the logs name.
public struct TrustedProxies: Sendable, Equatable {
    struct Range: Sendable, Equatable {
        let network: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == network.count else { return false }
            var bits = prefix
            for (a, b) in zip(address, network) {
                if bits <= 0 { return true }
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if a & mask != b & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    let ranges: [Range]
    /// The ranges as given (for the configuration report).
    let entries: [String]

    /// No proxy is trusted: the TCP peer is the client.
    public static let none = TrustedProxies(ranges: [], entries: [])

    init(ranges: [Range], entries: [String]) { (self.ranges, self.entries) = (ranges, entries) }

    /// The ranges as given, comma-separated; `none` when there are none.
    public var description: String { entries.isEmpty ? "none" : entries.joined(separator: ",") }

    /// An entry that is not an address or a range.
    public struct InvalidEntry: Error, Equatable {
        public let entry: String
    }

    /// Parses `10.0.0.0/8,127.0.0.1,::1/128`.
    public static func parse(_ text: String) throws(InvalidEntry) -> TrustedProxies {
        var ranges: [Range] = []
        var entries: [String] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
            guard let address = Self.bytes(of: parts[0]) else { throw InvalidEntry(entry: entry) }
            let width = address.count * 8
            let prefix = parts.count == 2 ? Int(parts[1]) : width
            guard let prefix, (0...width).contains(prefix) else { throw InvalidEntry(entry: entry) }
            ranges.append(Range(network: address, prefix: prefix))
            entries.append(entry)
        }
        return TrustedProxies(ranges: ranges, entries: entries)
    }

    public var isEmpty: Bool { ranges.isEmpty }

    func trusts(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// The client's address for a connection from `peer` whose request carried `headers` (name, value pairs).
    package func client(peer: String?, headers: [(name: String, value: String)]) -> String? {
        guard let peer, trusts(peer) else { return peer }
        let hops = headers.filter { $0.name.caseInsensitiveCompare("X-Forwarded-For") == .orderedSame }
            .flatMap { $0.value.split(separator: ",").map { Self.unquoted(String($0)) } }
        // From the nearest hop back: the first one no trusted proxy vouches for is the client. A hop that is not an
        // address ends the walk at the last trusted one (a proxy writes addresses; only a client writes anything else).
        var last = peer
        for hop in hops.reversed() {
            guard Self.bytes(of: hop) != nil else { return last }
            if !trusts(hop) { return hop }
            last = hop
        }
        return last
    }

    /// An address without quotes, IPv6 brackets or a port.
    static func unquoted(_ text: String) -> String {
        var value = text.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
        if value.hasPrefix("[") {
            return value.dropFirst().split(separator: "]", maxSplits: 1).first.map(String.init) ?? value
        }
        // `192.0.2.60:47011`: one colon is a port; an IPv6 address has more.
        if value.filter({ $0 == ":" }).count == 1 { return String(value.split(separator: ":")[0]) }
        return value
    }

    /// The address's bytes (4 or 16; an IPv4-mapped IPv6 address gives its 4), or `nil` when it is not an IP address.
    static func bytes(of address: String) -> [UInt8]? {
        guard let socket = try? SocketAddress(ipAddress: address, port: 0) else { return nil }
        switch socket {
        case .v4(let v4): return withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            let mapped = bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
            return mapped ? Array(bytes.suffix(4)) : bytes
        case .unixDomainSocket: return nil
        }
    }
}
