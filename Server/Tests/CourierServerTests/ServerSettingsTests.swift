// Courier — Apache-2.0
import CourierBackends
@testable import CourierServer
import CourierStorage
import CourierDomain
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Foundation
import Logging
import Testing

@Suite("Server settings")
struct ServerSettingsTests {
    @Test("with nothing given, the server listens on 127.0.0.1:8080 with ./courier-data and full durability")
    func defaults() throws {
        let settings = try ServerSettings(environment: [:])
        #expect(settings.host == "127.0.0.1" && settings.port == 8080)
        #expect(settings.dataDirectory == "./courier-data" && settings.durability == "full")
        #expect(settings.maxBodyBytes == 65536 && settings.maxFrameBytes == 262_144)
    }

    @Test("flags win over COURIER_* environment variables, which win over defaults")
    func precedence() throws {
        let environment = ["COURIER_PORT": "9000", "COURIER_HOST": "0.0.0.0", "COURIER_MAX_BODY_BYTES": "1024"]
        let settings = try ServerSettings(flags: ["port": "9001", "host": nil], environment: environment)
        #expect(settings.port == 9001 && settings.host == "0.0.0.0" && settings.maxBodyBytes == 1024)
    }

    @Test("the read-receipt policy defaults to each user's choice and reaches the server configuration")
    func readReceiptPolicy() throws {
        #expect(try ServerSettings(environment: [:]).readReceiptPolicy == .userChoice)
        let settings = try ServerSettings(environment: ["COURIER_READ_RECEIPT_POLICY": "alwaysOff"])
        let secret = try AppSecret(String(repeating: "s", count: 32))
        #expect(settings.configuration(secret: secret).readReceiptPolicy == .alwaysOff)
    }

    @Test(
        "an unusable value is refused with the setting's name",
        arguments: [
            ("port", "http"), ("port", "70000"), ("durability", "off"), ("max-body-bytes", "0"),
            ("read-receipt-policy", "sometimes"), ("log-level", "verbose"), ("log-format", "xml"),
            ("media-max-bytes", "0"), ("media-types", "image"), ("media-grace-hours", "0"),
            ("media-s3-endpoint", "s3.example.com"), ("event-loops", "0"),
        ]
    )
    func invalidValues(name: String, value: String) {
        #expect(throws: SettingsError.invalid(name, value)) {
            try ServerSettings(flags: [name: value], environment: [:])
        }
    }

    @Test("the event loops: one per core, less the writer's on SQLite, never none; as given when given")
    func eventLoops() throws {
        let sqlite = try ServerSettings(environment: [:])
        #expect([1, 2, 8].map { sqlite.eventLoops(cores: $0) } == [1, 1, 7])
        let postgres = try ServerSettings(flags: ["postgres-url": "postgres://courier@127.0.0.1/courier"], environment: [:])
        #expect([1, 2, 8].map { postgres.eventLoops(cores: $0) } == [1, 2, 8])
        let given = try ServerSettings(flags: [:], environment: ["COURIER_EVENT_LOOPS": "3"])
        #expect(given.eventLoops(cores: 8) == 3)
    }

    /// A configuration file with `json` in a fresh folder; returns its path.
    static func configFile(_ json: String, in folder: TemporaryFolder) throws -> String {
        let path = folder.path + "/courier.json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("the configuration file sits under the environment, which sits under the flags")
    func configurationFile() throws {
        let folder = try TemporaryFolder()
        let path = try Self.configFile(
            """
            {"port": 7000, "host": "0.0.0.0", "max-body-bytes": 100, "recall-window-seconds": "300",
             "admin-recall-window-seconds": 600, "group-receipt-requesters": "ownerAndAdmins",
             "group-receipt-max-size": 500, "log-level": null, "webhook-retention-hours": 24}
            """,
            in: folder
        )
        let environment = ["COURIER_CONFIG": path, "COURIER_HOST": "10.0.0.1", "COURIER_PORT": "7001"]
        let settings = try ServerSettings(flags: ["port": "7002"], environment: environment)
        #expect(settings.configFile == path)
        #expect(settings.port == 7002, "a flag wins over the environment and the file")
        #expect(settings.host == "10.0.0.1", "the environment wins over the file")
        #expect(settings.maxBodyBytes == 100 && settings.recallWindowSeconds == 300, "the file wins over defaults")
        #expect(settings.logLevel == "info", "null leaves the default")
        let configuration = settings.configuration(secret: try AppSecret(String(repeating: "s", count: 32)))
        #expect(configuration.adminRecallWindow == .seconds(600))
        #expect(configuration.groupReceipts.requesters == .ownerAndAdmins && configuration.groupReceipts.maxGroupSize == 500)
        #expect(configuration.webhooks.retention == .seconds(86_400))
        // --config names another file than COURIER_CONFIG: the flag's is read.
        let other = try TemporaryFolder()
        let flagged = try Self.configFile(#"{"max-body-bytes": 200}"#, in: other)
        #expect(try ServerSettings(flags: ["config": flagged], environment: environment).maxBodyBytes == 200)
        // Without a file, the new settings keep their defaults.
        let defaults = try ServerSettings(environment: [:]).configuration(secret: try AppSecret(String(repeating: "s", count: 32)))
        #expect(defaults.adminRecallWindow == nil && defaults.groupReceipts.requesters == .anyMember)
    }

    @Test(
        "a bad configuration file is refused at start with the key named",
        arguments: [
            (#"{"prot": 8080}"#, SettingsError.unknownKey("prot", file: "")),
            (#"{"prot": null}"#, .unknownKey("prot", file: "")),
            (#"{"typo": true, "port": 8080}"#, .unknownKey("typo", file: "")),
            (#"{"app-secret": "0123456789abcdef0123456789abcdef"}"#, .unknownKey("app-secret", file: "")),
            (#"{"port": "http"}"#, .invalid("port", "http")),
            (#"{"port": 1.5}"#, .invalid("port", "1.5")),
            (#"{"durability": true}"#, .invalid("durability", "true")),
            (#"{"group-receipt-requesters": "everyone"}"#, .invalid("group-receipt-requesters", "everyone")),
            (#"{"recall-window-seconds": [120]}"#, .invalid("recall-window-seconds", "a list or an object")),
        ]
    )
    func badConfigurationFile(json: String, expected: SettingsError) throws {
        let folder = try TemporaryFolder()
        let path = try Self.configFile(json, in: folder)
        let error = #expect(throws: SettingsError.self) {
            try ServerSettings(flags: ["config": path], environment: [:])
        }
        switch expected {
        case .unknownKey(let key, _): #expect(error == .unknownKey(key, file: path))
        default: #expect(error == expected)
        }
    }

    @Test("a configuration file that is missing or not a JSON object is refused, naming the file")
    func unreadableConfigurationFile() throws {
        let folder = try TemporaryFolder()
        for json in ["port = 8080", "[1, 2]", ""] {
            let path = try Self.configFile(json, in: folder)
            #expect(throws: SettingsError.self) { try ServerSettings(flags: ["config": path], environment: [:]) }
            do {
                _ = try ServerSettings(flags: ["config": path], environment: [:])
            } catch {
                guard case .unreadableFile(let named, _) = error else {
                    Issue.record("\(json): \(error)")
                    continue
                }
                #expect(named == path)
            }
        }
        let missing = folder.path + "/none.json"
        #expect(throws: SettingsError.self) { try ServerSettings(flags: ["config": missing], environment: [:]) }
    }

    @Test("the app secret is created once in the data folder and must be at least 32 bytes")
    func appSecret() throws {
        let folder = try TemporaryFolder()
        let settings = try ServerSettings(flags: ["data-dir": folder.path], environment: [:])
        let first = try settings.resolveAppSecret()
        let second = try settings.resolveAppSecret()
        #expect(first.created && !second.created && first.secret == second.secret)
        let attributes = try FileManager.default.attributesOfItem(atPath: folder.path + "/app-secret")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(throws: AppSecretError.tooShort(5)) { try AppSecret("short") }
        let fromEnvironment = try ServerSettings(environment: ["COURIER_APP_SECRET": String(repeating: "s", count: 32)])
        #expect(try fromEnvironment.resolveAppSecret().secret.value == String(repeating: "s", count: 32))
    }

    // MARK: Webhooks

    @Test("--webhook-allow-private takes true or false (flag, environment or file), is off by default and reaches the node")
    func webhookAllowPrivate() throws {
        let secret = try AppSecret(String(repeating: "s", count: 32))
        let defaults = try ServerSettings(environment: [:])
        #expect(!defaults.webhookAllowPrivate && !defaults.configuration(secret: secret).webhooks.allowPrivateAddresses)
        #expect(try ServerSettings(flags: ["webhook-allow-private": "true"], environment: [:]).webhookAllowPrivate)
        let environment = ["COURIER_WEBHOOK_ALLOW_PRIVATE": "true"]
        #expect(try ServerSettings(environment: environment).configuration(secret: secret).webhooks.allowPrivateAddresses)
        #expect(try !ServerSettings(flags: ["webhook-allow-private": "false"], environment: environment).webhookAllowPrivate)
        for value in ["yes", "1", "TRUE", "on"] {
            #expect(throws: SettingsError.invalid("webhook-allow-private", value)) {
                try ServerSettings(flags: ["webhook-allow-private": value], environment: [:])
            }
        }
        let folder = try TemporaryFolder()
        let file = try Self.configFile(#"{"webhook-allow-private": true}"#, in: folder)
        let configured = try ServerSettings(flags: ["config": file], environment: [:])
        #expect(configured.webhookAllowPrivate)
        // A boolean where a setting takes none is still refused, naming the setting.
        let other = try TemporaryFolder()
        let wrong = try Self.configFile(#"{"port": true}"#, in: other)
        #expect(throws: SettingsError.invalid("port", "true")) {
            try ServerSettings(flags: ["config": wrong], environment: [:])
        }
        let report = configured.configuration(secret: secret).report(port: 8080, maxConnections: 100)
        #expect(report.contains { $0.name == "webhook-allow-private" && $0.value == "true" })
    }
}

@Suite("Opening the embedded store")
struct BackendTests {
    @Test("a data folder that does not exist yet is created, even when the app secret comes from the environment")
    func createsDataFolder() async throws {
        let parent = try TemporaryFolder()
        let path = parent.path + "/nested/data/courier.sqlite"
        let backend = try Backend.sqlite(.file(path))
        try await backend.store.registerAccount("alice", at: 0)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test(
        "a PostgreSQL URL the server cannot use is refused at start, without echoing the password",
        arguments: [
            "mysql://user:secret@db/courier", "postgres://db/courier",
            "postgres://user:secret@db/courier?sslmode=verify", "postgres://user:secret@db1,/courier",
            "postgres://user:secret@db1:99999/courier", "postgres://user:secret@[::1/courier",
            "postgres://user:secret@db1,db2/courier?target_session_attrs=read-only",
        ]
    )
    func invalidPostgresURL(url: String) {
        #expect {
            try Backend.postgres(url: url, logger: Logger(label: "test"))
        } throws: { error in
            error is PostgresURLError && !String(describing: error).contains("secret")
        }
    }

    @Test(
        "a PostgreSQL URL may name a primary and its standbys, as libpq takes them",
        arguments: [
            "postgres://user:secret@db1:5432,db2:5433/courier?target_session_attrs=read-write",
            "postgres://user@[::1]:5432,127.0.0.1/courier?sslmode=disable&target_session_attrs=primary",
            "postgresql://user@db/courier?target_session_attrs=any",
        ]
    )
    func severalHosts(url: String) throws {
        _ = try Backend.postgres(url: url, logger: Logger(label: "test"))
    }

    @Test("files go to the data folder's media unless a bucket is named, which needs its bucket and both keys")
    func media() throws {
        let secret = try AppSecret("test-secret-0123456789abcdef0123456789abcdef")
        let folder = try ServerSettings(flags: ["data-dir": "/var/lib/courier"], environment: [:])
        guard case .folder(let path) = try #require(folder.configuration(secret: secret).media).place else {
            Issue.record("not a folder")
            return
        }
        #expect(path == "/var/lib/courier/media")
        #expect(folder.configuration(secret: secret).media?.allows("image/png; charset=x") == true)
        #expect(folder.configuration(secret: secret).media?.allows("text/html") == false)

        #expect(throws: SettingsError.invalid("media-s3-bucket", "none (needed with media-s3-endpoint)")) {
            try ServerSettings(flags: ["media-s3-endpoint": "http://127.0.0.1:9000"], environment: [:])
        }
        let bucket = try ServerSettings(
            flags: ["media-s3-endpoint": "http://127.0.0.1:9000", "media-s3-bucket": "files", "media-types": "image/*"],
            environment: ["COURIER_MEDIA_S3_ACCESS_KEY_ID": "key", "COURIER_MEDIA_S3_SECRET_ACCESS_KEY": "secret"]
        )
        let media = try #require(bucket.configuration(secret: secret).media)
        guard case .s3(let settings, _) = media.place else {
            Issue.record("not a bucket")
            return
        }
        #expect(settings == S3Settings(endpoint: "http://127.0.0.1:9000", bucket: "files", region: "us-east-1", accessKeyID: "key", secretAccessKey: "secret"))
        #expect(media.types == ["image/*"] && !media.allows("application/pdf"))
        // The secret key is never shown.
        #expect(!bucket.configuration(secret: secret).startup.values.contains { $0.contains("secret") })
    }
}
