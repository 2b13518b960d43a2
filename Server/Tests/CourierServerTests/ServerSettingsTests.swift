// Courier — Apache-2.0
import CourierBackends
import CourierServer
import CourierStorage
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
        ]
    )
    func invalidValues(name: String, value: String) {
        #expect(throws: SettingsError.invalid(name, value)) {
            try ServerSettings(flags: [name: value], environment: [:])
        }
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
            "postgres://user:secret@db/courier?sslmode=verify",
        ]
    )
    func invalidPostgresURL(url: String) {
        #expect {
            try Backend.postgres(url: url, logger: Logger(label: "test"))
        } throws: { error in
            error is PostgresURLError && !String(describing: error).contains("secret")
        }
    }
}
