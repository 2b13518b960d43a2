// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Testing

@testable import CourierSQL

/// Account profiles' versions (ADR 0053) on the connection that writes them.
@Suite("Storage contract: account profiles", .timeLimit(.minutes(5)))
struct ProfileStoreContractTests {
    @Test(
        "PostgreSQL: a change whose transaction took its id before another change committed still gets the higher version",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func versionNeverGoesBack() async throws {
        try await StorageBackend.withPostgresStore { store, url in
            try await store.registerAccount("alice", at: 0)
            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // A transaction that took its id first (a bulk call, say) and writes alice's row last.
                try await session.execute("BEGIN")
                let early = try #require(try await session.integer("SELECT pg_current_xact_id()::text::bigint"))
                let committed = try await store.setAccountProfiles(
                    [AccountProfileChange(account: "alice", fields: SetAccountProfileRequest(displayName: "First"))],
                    at: 1
                )[0]
                #expect(committed.version > early)
                // Its write, with the statement's version rule, on its own connection.
                let version = try await session.integer(
                    """
                    UPDATE account SET display_name = 'Second', profile_stamp = \(SetProfilesProcedure.nextVersion)
                    WHERE id = 'alice' RETURNING profile_stamp
                    """
                )
                try await session.execute("COMMIT")
                #expect((version ?? 0) > committed.version, "the later change would be kept under the lower version")
                let now = try #require(try await store.accountProfiles(of: ["alice"]).first)
                #expect(now.displayName == "Second" && now.version == version)
            }
        }
    }
}
