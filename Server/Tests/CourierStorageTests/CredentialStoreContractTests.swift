// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Testing

/// API keys, signing keys and the audit trail on every backend (ADR 0048).
@Suite("Storage contract: credentials and the audit trail", .timeLimit(.minutes(5)))
struct CredentialStoreContractTests {
    static let backends = StorageBackend.available

    func entry(_ id: String, action: String = "deactivateAccount", at time: Int64 = 1_000) -> AuditEntry {
        AuditEntry(
            id: id, at: Timestamp(milliseconds: time), credential: "root", action: action, target: "account=alice",
            requestID: "r-\(id)", clientAddress: "192.0.2.1"
        )
    }

    @Test("an action's row is written by the transaction of its first write, and only if it commits", arguments: backends)
    func auditInTheActionsTransaction(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            let committed = entry("a")
            let status = try await AuditTrail.$entry.withValue(committed) {
                try await store.setDeactivated("alice", at: Timestamp(milliseconds: 5))
            }
            #expect(status?.deactivatedAt != nil && committed.isRecorded)
            // A second write of the same action writes no second row, nor does a write after the action is over.
            _ = try await AuditTrail.$entry.withValue(committed) { try await store.setDeactivated("alice", at: nil) }
            let closed = entry("c")
            closed.close()
            _ = try await AuditTrail.$entry.withValue(closed) { try await store.setDeactivated("alice", at: nil) }

            // A write that fails (a key id taken) leaves no row of its action.
            let key = APIKey(id: "k1", name: "n", scopes: ["read"], secretDigest: "d", createdAt: 1, createdBy: "root")
            try await store.createAPIKey(key)
            let failed = entry("b", action: "createAPIKey")
            await #expect(throws: StorageError.self) {
                try await AuditTrail.$entry.withValue(failed) { try await store.createAPIKey(key) }
            }
            #expect(!failed.isRecorded)

            let rows = try await store.auditEntries(AuditQuery())
            #expect(rows.map(\.id) == ["a"])
            let row = try #require(rows.first)
            // Written by the action's transaction: committed, its answer not known yet.
            #expect(row.status == nil && row.code == nil && row.requestID == "r-a" && row.clientAddress == "192.0.2.1")
            #expect(row.target == "account=alice" && row.credential == "root" && row.action == "deactivateAccount")

            // The outcome written after the answer replaces the transaction's, in the same row.
            try await store.recordAudit(committed, status: 204, code: nil)
            try await store.recordAudit(failed, status: 409, code: "request.conflict")
            let after = try await store.auditEntries(AuditQuery())
            #expect(after.map(\.id) == ["b", "a"] && after.map(\.status) == [409, 204])
        }
    }

    @Test("the audit trail pages newest first, filters, and prunes by time", arguments: backends)
    func auditPagesAndPrunes(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for index in 0..<7 {
                try await store.recordAudit(
                    entry("e\(index)", action: index % 2 == 0 ? "createGroup" : "dismissGroup", at: Int64(index) * 100),
                    status: 200,
                    code: nil
                )
            }
            let first = try await store.auditEntries(AuditQuery(limit: 3))
            #expect(first.map(\.id) == ["e6", "e5", "e4"])
            let second = try await store.auditEntries(AuditQuery(before: first.last?.seq, limit: 3))
            #expect(second.map(\.id) == ["e3", "e2", "e1"])
            #expect(try await store.auditEntries(AuditQuery(action: "dismissGroup")).map(\.id) == ["e5", "e3", "e1"])
            #expect(try await store.auditEntries(AuditQuery(credential: "someone")).isEmpty)
            let window = try await store.auditEntries(AuditQuery(since: Timestamp(milliseconds: 200), until: Timestamp(milliseconds: 400)))
            #expect(window.map(\.id) == ["e3", "e2"])
            #expect(try await store.pruneAudit(before: Timestamp(milliseconds: 300)) == 3)
            #expect(try await store.auditEntries(AuditQuery()).map(\.id) == ["e6", "e5", "e4", "e3"])
        }
    }

    @Test("signing keys: the first is made once, a rotation retires the others, the only signing key stays", arguments: backends)
    func signingKeys(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let first = SigningKey(kid: "k1", secret: "s1", createdAt: 10)
            #expect(try await store.ensureSigningKey(first) == [first])
            // Another node's first start finds it and makes none.
            #expect(try await store.ensureSigningKey(SigningKey(kid: "k2", secret: "s2", createdAt: 11)) == [first])
            await #expect(throws: StorageError.conflict) { _ = try await store.retireSigningKey("k1", at: 20) }

            let second = SigningKey(kid: "k3", secret: "s3", createdAt: 30)
            try await store.rotateSigningKey(to: second, retiringOthersAt: 1_000)
            #expect(try await store.signingKeys().map(\.kid) == ["k3", "k1"])
            #expect(try await store.signingKeys().last?.retiresAt == 1_000)
            // Retiring sooner takes; later does not.
            #expect(try await store.retireSigningKey("k1", at: 500)?.retiresAt == 500)
            #expect(try await store.retireSigningKey("k1", at: 900)?.retiresAt == 500)
            #expect(try await store.retireSigningKey("nothing", at: 500) == nil)
            await #expect(throws: StorageError.conflict) { _ = try await store.retireSigningKey("k3", at: 600) }
        }
    }

    @Test("API keys: stored with their digest and scopes, listed newest first, revoked once", arguments: backends)
    func apiKeys(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let old = APIKey(id: "a", name: "monitoring", scopes: ["metrics"], secretDigest: "d1", createdAt: 1, createdBy: "root")
            let new = APIKey(
                id: "b", name: "backend", scopes: ["accounts", "messages"], secretDigest: "d2", createdAt: 2, createdBy: "cli",
                expiresAt: 99
            )
            try await store.createAPIKey(old)
            try await store.createAPIKey(new)
            #expect(try await store.apiKeys() == [new, old])
            #expect(try await store.apiKey("b") == new)
            #expect(try await store.apiKey("c") == nil)
            #expect(try await store.revokeAPIKey("a", at: 50)?.revokedAt == 50)
            #expect(try await store.revokeAPIKey("a", at: 60)?.revokedAt == 50)
            #expect(try await store.revokeAPIKey("c", at: 60) == nil)
        }
    }
}
