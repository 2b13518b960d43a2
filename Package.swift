// swift-tools-version:6.2
// Courier — Apache-2.0
// The SDK package: the wire module and the client SDK. An app adds this repository by URL; nothing here
// depends on a server package (the server lives in `Server/`, see docs/decisions/0001-two-packages.md).
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let apple: [Platform] = [.macOS, .iOS, .tvOS, .watchOS, .visionOS, .macCatalyst]
let nonApple: [Platform] = [.linux, .android, .windows, .openbsd, .wasi]

let package = Package(
    name: "courier",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16)],
    products: [
        .library(name: "CourierWire", targets: ["CourierWire"]),
        .library(name: "CourierSDK", targets: ["CourierSDK"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-transport-services.git", from: "1.28.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // `swift package generate-documentation --target CourierSDK` (the DocC catalog; CI builds it, warnings fail).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Frames/wire-types.table is the source of Frames/WireCoding+Generated.swift (ADR 0036).
        .target(name: "CourierWire", exclude: ["Frames/wire-types.table"], swiftSettings: swiftSettings),
        .target(
            name: "CourierSDK",
            dependencies: [
                "CourierWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // TLS: Network.framework on Apple platforms (through NIO Transport Services: the system's trust store,
                // proxies, VPN and path handover, no BoringSSL in the app), NIOSSL elsewhere.
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: nonApple)),
                .product(
                    name: "NIOTransportServices",
                    package: "swift-nio-transport-services",
                    condition: .when(platforms: apple)
                ),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "CourierWireTests", dependencies: ["CourierWire"], swiftSettings: swiftSettings),
        // The README's and the DocC articles' Swift samples, compiled (scripts/snippets.py writes them): a sample that no
        // longer compiles fails the build. No tests run.
        .testTarget(name: "CourierSDKSnippets", dependencies: ["CourierSDK"], swiftSettings: swiftSettings),
        .testTarget(
            name: "CourierSDKTests",
            dependencies: [
                "CourierSDK",
                "CourierWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
