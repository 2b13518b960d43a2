// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Backup and restore as an operator runs them (ADR 0026): `courier-server backup` while a device sends,
/// `courier-server restore` with the server stopped, the server started again on the same port. The messages sent
/// after the backup are gone from the server; the devices that held them must end with exactly what the server holds
/// (none it lacks, none missing), the new messages that took the lost seqs included.
@Suite("Backup and restore of a real server", .timeLimit(.minutes(5)))
struct BackupRestoreTests {
    func courierServer(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.courierServer)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test("a backup taken while sending, restored: two devices end with exactly the server's history")
    func restore() async throws {
        let folder = NSTemporaryDirectory() + "courier-restore-" + UUID().uuidString
        let backup = folder + ".backup.sqlite"
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: backup)
        }
        let launch = ServerProcess.Launch(binary: Binaries.courierServer, folder: folder)
        let first = try ServerProcess(launch, secret: Binaries.secret)
        try await first.register(["alice", "bob"])
        let alice = try await first.app("alice")
        let bob = try await first.app("bob")
        let direct = ConversationID.direct("alice", "bob")
        for index in 0..<5 { try await alice.send("before-\(index)", to: direct).stored() }

        // The backup runs while alice keeps sending: it holds a consistent prefix of what was sent.
        let backedUp = Task { try courierServer(["backup", backup, "--data-dir", folder]) }
        for index in 0..<10 { try await alice.send("during-\(index)", to: direct).stored() }
        let backupRun = try await backedUp.value
        #expect(backupRun.status == 0, "\(backupRun.output)")
        for index in 0..<5 { try await alice.send("after-backup-\(index)", to: direct).stored() }
        let before = try await first.history(direct)
        #expect(before.count == 20)
        // A second server on the same data folder, or a restore while this one runs, is refused.
        let refused = try courierServer(["restore", backup, "--data-dir", folder])
        #expect(refused.status != 0 && refused.output.contains("Another courier-server process uses the data folder"))
        #expect(first.stop() == 0)

        // A file that is not a Courier database is refused before anything moves.
        let bogus = folder + ".not-a-backup"
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: bogus))
        defer { try? FileManager.default.removeItem(atPath: bogus) }
        let refusedFile = try courierServer(["restore", bogus, "--data-dir", folder])
        #expect(refusedFile.status != 0, "\(refusedFile.output)")
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: folder)).contains { $0.hasPrefix("before-restore-") })

        let restoreRun = try courierServer(["restore", backup, "--data-dir", folder])
        #expect(restoreRun.status == 0, "\(restoreRun.output)")
        // This folder's server took its secret from the environment; the restore has none: it says so.
        #expect(restoreRun.output.contains("has no app secret"), "\(restoreRun.output)")
        var again = launch
        again.port = first.port
        let second = try ServerProcess(again, secret: Binaries.secret)
        defer { _ = second.stop() }
        let restored = try await second.history(direct)
        #expect(restored.count >= 5 && restored.count < 20, "the backup holds \(restored.count) of 20")
        #expect(Array(before.prefix(restored.count)) == restored, "the backup is a prefix of what was sent")

        // New messages take the seqs of the lost ones; both devices follow the restored history exactly.
        let last = try await alice.send("after-restore", to: direct).stored().id.rawValue
        let converged = try await second.converges([alice, bob], in: direct) { $0.last == last }
        let server = try await second.history(direct)
        let held = try await alice.messages(in: direct, limit: 500).count
        let received = try await bob.messages(in: direct, limit: 500).count
        #expect(converged, "server \(server.count), alice \(held), bob \(received)")
        #expect(server.count == restored.count + 1)
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test("a cold copy of the data folder put back under the server: devices whose cursors came after it start over")
    func snapshotPutBack() async throws {
        let folder = NSTemporaryDirectory() + "courier-snapshot-" + UUID().uuidString
        let snapshot = folder + ".copy"
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: snapshot)
        }
        let launch = ServerProcess.Launch(binary: Binaries.courierServer, folder: folder)
        let first = try ServerProcess(launch, secret: Binaries.secret)
        try await first.register(["alice", "bob"])
        let alice = try await first.app("alice")
        let bob = try await first.app("bob")
        let direct = ConversationID.direct("alice", "bob")
        for index in 0..<5 { try await alice.send("before-\(index)", to: direct).stored() }
        #expect(try await bob.holds(5, in: direct))
        #expect(first.stop() == 0)
        // What a filesystem or VM snapshot restores: the folder as it was, identity and all.
        try FileManager.default.copyItem(atPath: folder, toPath: snapshot)
        var again = launch
        again.port = first.port
        let second = try ServerProcess(again, secret: Binaries.secret)
        for index in 0..<3 { try await alice.send("lost-\(index)", to: direct).stored() }
        #expect(try await bob.holds(8, in: direct))
        #expect(second.stop() == 0)
        try FileManager.default.removeItem(atPath: folder)
        try FileManager.default.moveItem(atPath: snapshot, toPath: folder)

        let third = try ServerProcess(again, secret: Binaries.secret)
        defer { _ = third.stop() }
        // Both devices' cursors are ahead of the snapshot's clock: refused, they start over from the five it holds.
        let restarted = try await third.converges([alice, bob], in: direct, within: .seconds(30)) { $0.count == 5 }
        let heldAfterRestart = try await bob.messages(in: direct, limit: 500).map(\.body)
        #expect(restarted, "bob holds \(heldAfterRestart)")
        let last = try await alice.send("after-snapshot", to: direct).stored().id.rawValue
        #expect(try await third.converges([alice, bob], in: direct, within: .seconds(30)) { $0.count == 6 && $0.last == last })
        #expect(!(try await bob.messages(in: direct, limit: 500)).contains { $0.body.hasPrefix("lost-") })
        await alice.disconnect()
        await bob.disconnect()
    }
}
