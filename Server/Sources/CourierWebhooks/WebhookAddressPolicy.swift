// Courier — Apache-2.0
#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif
internal import Foundation
internal import NIOCore
internal import NIOPosix

/// Which addresses a webhook may reach: a webhook URL names the app's backend, never the server's own
/// surroundings. Link-local addresses (169.254.0.0/16, fe80::/10), where clouds hand out their instances'
/// credentials, and the metadata addresses themselves (169.254.169.254, AWS's fd00:ec2::254, Alibaba Cloud's
/// 100.100.100.200) are never reached. Loopback (127.0.0.0/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7,
/// the deprecated fec0::/10, and the shared 100.64/10 of carrier-grade NAT), unspecified (0.0.0.0/8, ::), multicast
/// and reserved (240/4, broadcast, 198.18/15) addresses are reached only with `--webhook-allow-private true` (a
/// receiver on the same host or network). An IPv6 address that carries an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64's `64:ff9b::a.b.c.d`) is judged as that
/// IPv4 address.
///
/// Checked twice: when an endpoint's URL is set through the REST API, on every address its host resolves to
/// (``refusal(ofHost:)``); and on the address each connection of ``WebhookHTTP`` actually reached, before anything is
/// written on it (``refusal(ofConnectionTo:host:)``), since a name may resolve elsewhere later (DNS rebinding).
package struct WebhookAddressPolicy: Sendable, Hashable {
    /// Whether loopback, private, unspecified, multicast and reserved addresses may be reached.
    var allowPrivate: Bool

    package init(allowPrivate: Bool) {
        self.allowPrivate = allowPrivate
    }

    /// What an address is, as far as webhooks are concerned.
    enum Kind: Sendable, Hashable {
        case global
        case metadata
        case linkLocal
        case loopback
        case privateNetwork
        case unspecified
        case multicast
        case reserved

        /// Refused whatever the settings.
        var isAlwaysRefused: Bool { self == .metadata || self == .linkLocal }

        var phrase: String {
            switch self {
            case .global: "a public address"
            case .metadata: "a cloud metadata address"
            case .linkLocal: "a link-local address"
            case .loopback: "a loopback address"
            case .privateNetwork: "a private address"
            case .unspecified: "an unspecified address"
            case .multicast: "a multicast address"
            case .reserved: "a reserved address"
            }
        }
    }

    /// Whether an address of `kind` is refused.
    func refuses(_ kind: Kind) -> Bool {
        switch kind {
        case .global: false
        case .metadata, .linkLocal: true
        case .loopback, .privateNetwork, .unspecified, .multicast, .reserved: !allowPrivate
        }
    }

    // MARK: Checks

    /// Why a connection to `host` that reached `address` must not carry a request (a sentence for the delivery log),
    /// or `nil` when it may. A connection whose address is unknown is refused.
    func refusal(ofConnectionTo address: SocketAddress?, host: String) -> String? {
        guard let address, let bytes = Self.bytes(of: address), let kind = Self.kind(of: bytes) else {
            return "Not sent: the address of the connection to \(host) could not be checked."
        }
        guard refuses(kind) else { return nil }
        let text = address.ipAddress ?? "?"
        let subject = Self.same(host, text) ? "\(text) is" : "\(host) resolved to \(text),"
        return "Not sent: \(subject) \(Self.reason(kind))."
    }

    /// Why an endpoint URL whose host is `host` is refused (a sentence for the problem's `detail`), or `nil` when
    /// every address `host` resolves to may be reached. A name that resolves to nothing (yet) is not refused here:
    /// each connection is checked anyway.
    package func refusal(ofHost host: String) async -> String? {
        let addresses = (try? await NIOThreadPool.singleton.runIfActive { WebhookAddressPolicy.resolve(host) }) ?? []
        return refusal(ofHost: host, resolvedTo: addresses)
    }

    /// ``refusal(ofHost:)`` with the addresses `host` resolved to.
    func refusal(ofHost host: String, resolvedTo addresses: [SocketAddress]) -> String? {
        for address in addresses {
            guard let bytes = Self.bytes(of: address), let kind = Self.kind(of: bytes), refuses(kind) else { continue }
            let text = address.ipAddress ?? "?"
            let subject = Self.same(host, text) ? "\(text) is" : "\(host) resolves to \(text),"
            return "The url's host \(subject) \(Self.reason(kind))."
        }
        return nil
    }

    /// "a loopback address, which webhooks reach only when …"
    static func reason(_ kind: Kind) -> String {
        kind.isAlwaysRefused
            ? "\(kind.phrase), which webhooks never reach"
            : "\(kind.phrase), which webhooks reach only when the server runs with --webhook-allow-private true"
    }

    /// Whether a URL's host is the address text itself (an IP address written in its usual form).
    private static func same(_ host: String, _ address: String) -> Bool {
        host.lowercased() == address.lowercased()
    }

    // MARK: Addresses

    /// The kind of an IPv4 (4 bytes) or IPv6 (16 bytes) address in network order; `nil` for any other length.
    static func kind(of bytes: [UInt8]) -> Kind? {
        switch bytes.count {
        case 4: ipv4Kind(bytes)
        case 16: ipv6Kind(bytes)
        default: nil
        }
    }

    private static func ipv4Kind(_ address: [UInt8]) -> Kind {
        let (a, b) = (address[0], address[1])
        if address == [169, 254, 169, 254] || address == [100, 100, 100, 200] { return .metadata }
        if a == 169 && b == 254 { return .linkLocal }
        // 0.0.0.0/8, "this network": a connection to 0.0.0.0 reaches the host itself.
        if a == 0 { return .unspecified }
        if a == 127 { return .loopback }
        if a == 10 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168) { return .privateNetwork }
        // The shared address space of carrier-grade NAT (RFC 6598), also used by overlay networks.
        if a == 100 && (64...127).contains(b) { return .privateNetwork }
        // Benchmarking networks (RFC 2544).
        if a == 198 && (b == 18 || b == 19) { return .reserved }
        if (224...239).contains(a) { return .multicast }
        // 240.0.0.0/4 and the limited broadcast address.
        if a >= 240 { return .reserved }
        return .global
    }

    /// fd00:ec2::254, the instance metadata service of AWS over IPv6.
    private static let awsMetadataV6: [UInt8] = [0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54]

    private static func ipv6Kind(_ address: [UInt8]) -> Kind {
        func zero(_ range: Range<Int>) -> Bool { address[range].allSatisfy { $0 == 0 } }
        let embedded = Array(address[12..<16])
        // ::ffff:a.b.c.d (IPv4-mapped): the connection goes to the IPv4 address.
        if zero(0..<10) && address[10] == 0xff && address[11] == 0xff { return ipv4Kind(embedded) }
        // ::ffff:0:a.b.c.d (IPv4-translated, SIIT).
        if zero(0..<8) && address[8] == 0xff && address[9] == 0xff && zero(10..<12) { return ipv4Kind(embedded) }
        // 64:ff9b::a.b.c.d (NAT64's well-known prefix): a NAT64 gateway forwards it to the IPv4 address.
        if address.starts(with: [0x00, 0x64, 0xff, 0x9b]) && zero(4..<12) { return ipv4Kind(embedded) }
        if zero(0..<16) { return .unspecified }
        if zero(0..<15) && address[15] == 1 { return .loopback }
        // ::a.b.c.d (IPv4-compatible, deprecated).
        if zero(0..<12) { return ipv4Kind(embedded) }
        if address == awsMetadataV6 { return .metadata }
        // fe80::/10
        if address[0] == 0xfe && (address[1] & 0xc0) == 0x80 { return .linkLocal }
        // fec0::/10, site-local (deprecated, private in effect).
        if address[0] == 0xfe && (address[1] & 0xc0) == 0xc0 { return .privateNetwork }
        // fc00::/7, unique local addresses.
        if (address[0] & 0xfe) == 0xfc { return .privateNetwork }
        if address[0] == 0xff { return .multicast }
        return .global
    }

    /// The bytes of an IP address in network order (4 or 16); `nil` for a Unix socket.
    static func bytes(of address: SocketAddress) -> [UInt8]? {
        switch address {
        case .v4(let v4): return withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6): return withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        case .unixDomainSocket: return nil
        }
    }

    /// Every address `host` resolves to with getaddrinfo, as a connection would resolve it (an IP address in any form
    /// getaddrinfo reads, such as `2130706433` for 127.0.0.1, included), each once; empty when it does not resolve.
    /// Blocks: run it on a thread pool, never on an event loop or the cooperative pool.
    static func resolve(_ host: String) -> [SocketAddress] {
        // Explicit hints with no flags: the default flags (AI_ADDRCONFIG) would hide the IPv6 addresses of a host
        // without an IPv6 address of its own.
        var hints = addrinfo()
        var info: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &info) == 0, let first = info else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            if let pointer = entry.pointee.ai_addr {
                let raw = UnsafeRawPointer(pointer)
                let address: SocketAddress? =
                    switch NIOBSDSocket.AddressFamily(rawValue: entry.pointee.ai_family) {
                    case .inet: SocketAddress(raw.load(as: sockaddr_in.self))
                    case .inet6: SocketAddress(raw.load(as: sockaddr_in6.self))
                    default: nil
                    }
                // One entry per socket type (stream, datagram, raw) for each address.
                if let address, !addresses.contains(address) { addresses.append(address) }
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }
}
