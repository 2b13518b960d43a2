// swift-tools-version:6.2
// Courier — Apache-2.0
// The server package: storage, the server library, the `courier-server` executable, test support and the
// end-to-end tests. It depends on the SDK package at the repository root by path.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
    name: "courier-server",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "courier-server", targets: ["CourierServerMain"]),
        .executable(name: "courier-bench", targets: ["CourierBench"]),
        .executable(name: "courier", targets: ["CourierCLI"]),
        .executable(name: "courier-wire-codegen", targets: ["CourierWireCodegenMain"]),
        .library(name: "CourierServer", targets: ["CourierServer"]),
    ],
    dependencies: [
        .package(name: "courier", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The server reads which credentials each operation takes from the OpenAPI document it serves (ADR 0048).
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
    ],
    targets: [
        // The wire types' scanner and writer, written from one table (ADR 0036); its test keeps the output fresh.
        .target(name: "CourierWireCodegen", swiftSettings: swiftSettings),
        .executableTarget(
            name: "CourierWireCodegenMain",
            dependencies: ["CourierWireCodegen"],
            swiftSettings: swiftSettings
        ),
        // The pure domain: the change a commit makes and its derivations, the rules and plans the stores' transactions
        // apply, and the values they take and return. No SQL, no I/O (Crypto: a webhook event's id is a digest).
        .target(
            name: "CourierDomain",
            dependencies: [
                .product(name: "CourierWire", package: "courier"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The store protocols and their API types (no drivers).
        .target(
            name: "CourierStorage",
            dependencies: [
                "CourierDomain",
                .product(name: "CourierWire", package: "courier"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SQL both backends run, written once (ADR 0020): statements, procedures and the store protocols'
        // implementations over an `SQLRunner`.
        .target(
            name: "CourierSQL",
            dependencies: [
                "CourierDomain",
                "CourierStorage",
                .product(name: "CourierWire", package: "courier"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CourierStorageSQLite",
            dependencies: [
                "CourierDomain",
                "CourierSQL",
                "CourierStorage",
                .product(name: "CourierWire", package: "courier"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CourierStoragePostgres",
            dependencies: [
                "CourierDomain",
                "CourierSQL",
                "CourierStorage",
                .product(name: "CourierWire", package: "courier"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // ConnectionPoolError: the pool's own failures (a database that cannot be reached), told apart.
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The REST API's types and server stubs, generated at build time from `openapi.yaml` (the API's source of
        // truth, served at `GET /v1/openapi.yaml`). Its own target: generated code builds without the upcoming
        // features above, and only this target reruns the generator when the document changes.
        .target(
            name: "CourierAPI",
            dependencies: [
                .product(name: "CourierWire", package: "courier"),
                "CourierDomain",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            resources: [.copy("openapi.yaml")],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        // What every room of the server needs (ADR 0058): the configuration, access (credentials, tokens, throttles),
        // the services a wire request and a REST call share, the fan-out of events and observability.
        .target(
            name: "CourierServerCore",
            dependencies: [
                "CourierDomain", "CourierStorage", "CourierAPI",
                .product(name: "CourierWire", package: "courier"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        // The devices' WebSocket: sessions, the frame router, the request runner.
        room(
            "CourierGateway",
            products: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Webhooks: each endpoint's stream of events, its parked deliveries, signing and the address policy.
        room(
            "CourierWebhooks",
            products: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Media: uploads and downloads on local files or an S3 bucket (its own small client).
        room(
            "CourierMedia",
            products: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
            ]
        ),
        // Importing history: the vendors' exports read line by line and written in batches.
        room(
            "CourierImport",
            products: [
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The REST API for the app's backend: the generated `APIProtocol`'s handlers and the router.
        room(
            "CourierREST",
            uses: ["CourierWebhooks", "CourierMedia", "CourierImport", "CourierAPI"],
            products: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
        // The server: composes the rooms into an application from its settings, with the console's files; re-exports
        // the core's public API, which the executables and the tests use.
        .target(
            name: "CourierServer",
            dependencies: [
                "CourierServerCore", "CourierGateway", "CourierWebhooks", "CourierMedia", "CourierImport",
                "CourierREST", "CourierDomain", "CourierStorage",
                .product(name: "CourierWire", package: "courier"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Console")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CourierBackends",
            dependencies: [
                "CourierServer", "CourierDomain", "CourierStorage", "CourierStorageSQLite", "CourierStoragePostgres",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CourierServerMain",
            dependencies: [
                "CourierServer",
                "CourierImport",
                "CourierBackends",
                "CourierDomain", "CourierStorage",
                "CourierStorageSQLite",
                "CourierStoragePostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CourierCLI",
            dependencies: [
                "CourierServer",
                "CourierBackends",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CourierSDK", package: "courier"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "CourierHarness",
            dependencies: [
                .product(name: "CourierWire", package: "courier"),
                .product(name: "CourierSDK", package: "courier"),
                "CourierDomain", "CourierStorage",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CourierBench",
            dependencies: [
                "CourierServer",
                "CourierGateway",
                "CourierHarness",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "CourierWire", package: "courier"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CourierTestSupport",
            dependencies: [
                "CourierServer",
                "CourierDomain", "CourierStorage",
                "CourierStorageSQLite",
                "CourierStoragePostgres",
                "CourierBackends",
                .product(name: "CourierSDK", package: "courier"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "CourierWire", package: "courier"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CourierStorageTests",
            dependencies: [
                "CourierDomain", "CourierSQL", "CourierStorage", "CourierStorageSQLite", "CourierStoragePostgres", "CourierTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Each room's unit tests beside it (ADR 0058); the end-to-end tests run the composed server.
        roomTests("CourierServerCore"),
        roomTests("CourierGateway"),
        roomTests("CourierWebhooks"),
        roomTests("CourierMedia"),
        roomTests("CourierImport"),
        .testTarget(
            name: "CourierServerTests",
            dependencies: [
                "CourierServer", "CourierDomain", "CourierStorage", "CourierStorageSQLite", "CourierStoragePostgres", "CourierBackends",
                "CourierTestSupport", "CourierWireCodegen", .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CourierReliabilityTests",
            dependencies: [
                "CourierServer", "CourierHarness", "CourierTestSupport", "CourierDomain", "CourierStorage", "CourierStorageSQLite",
                .product(name: "CourierSDK", package: "courier"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "CourierWire", package: "courier"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CourierEndToEndTests",
            dependencies: [
                "CourierServer", "CourierTestSupport", "CourierDomain", "CourierStorage", "CourierStorageSQLite", "CourierHarness",
                "CourierStoragePostgres", "CourierSQL",
                .product(name: "CourierSDK", package: "courier"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "CourierWire", package: "courier"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

/// A room's unit tests: the room and the core, with what its tests use beside them.
func roomTests(_ room: String) -> Target {
    .testTarget(
        name: room + "Tests",
        dependencies: Set([room, "CourierServerCore"]).sorted().map { .target(name: $0) } + [
            "CourierDomain", "CourierStorage", "CourierTestSupport",
            .product(name: "CourierWire", package: "courier"),
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
        ],
        swiftSettings: swiftSettings
    )
}

/// A room of the server (ADR 0058): the core, the storage protocols and the wire types, the other modules it `uses`,
/// and the `products` of other packages it imports.
func room(_ name: String, uses: [String] = [], products: [Target.Dependency]) -> Target {
    .target(
        name: name,
        dependencies: (["CourierServerCore"] + uses + ["CourierDomain", "CourierStorage"]).map { .target(name: $0) }
            + [.product(name: "CourierWire", package: "courier")] + products,
        swiftSettings: swiftSettings
    )
}
