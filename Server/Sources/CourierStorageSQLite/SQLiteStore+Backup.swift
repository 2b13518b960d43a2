// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import Foundation
internal import GRDB
#if canImport(Glibc)
internal import Glibc
#endif

/// Backups of the embedded database and their restore (docs/operations.md). A restored database gets a new identity
/// (`change_clock.store_id`): every device's sync cursor names the old one, is refused with `sync.cursorInvalid`, and
/// the device resyncs to exactly what the restored database holds (ADR 0026).
extension SQLiteStore {
    /// What a backup or a restore did.
    public struct BackupReport: Sendable {
        /// The database's size in bytes.
        public let bytes: Int64
        /// Its identity (`store_id`): a restore's is new.
        public let identity: String
    }

    /// Copies the database at `path` to `destination` with SQLite's online backup API, while a server may be writing
    /// it: one consistent snapshot (the copy is made in one step, in one read transaction), the server's writes going
    /// on meanwhile. `destination` must not exist.
    public static func backup(databaseAt path: String, to destination: String) throws -> BackupReport {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StorageError.failed("No database at \(path).")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw StorageError.failed("\(destination) exists already: a backup never overwrites a file.")
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        let identity: String
        do {
            let source = try DatabaseQueue(path: path, configuration: configuration)
            let copy = try DatabaseQueue(path: destination)
            try source.backup(to: copy)
            identity = try copy.read { db in try String.fetchOne(db, sql: "SELECT store_id FROM change_clock") } ?? ""
            try copy.close()
            try source.close()
        } catch {
            // A backup that failed half-way (a full disk) must not look like one.
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: destination + suffix) }
            throw error
        }
        let bytes = (try FileManager.default.attributesOfItem(atPath: destination)[.size] as? Int64) ?? 0
        return BackupReport(bytes: bytes, identity: identity)
    }

    /// Puts the backup at `backup` in place of the database at `path`, with a new identity. No server may run on it
    /// (hold ``FolderLock`` first). The database it replaces, with its WAL, is moved to `aside` (a folder created for
    /// it), never deleted. A file that is not a Courier database is refused before anything moves.
    public static func restore(backup: String, into path: String, aside: String) throws -> BackupReport {
        let temporary = path + ".restoring"
        // What an interrupted restore may have left, its journal files included (a stale WAL would be replayed).
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: temporary + suffix) }
        do {
            // A copy through the backup API (not of the file: the backup may itself have a WAL beside it).
            var configuration = Configuration()
            configuration.readonly = true
            let source = try DatabaseQueue(path: backup, configuration: configuration)
            guard try source.read({ db in try db.tableExists("change_clock") && db.tableExists("message") }) else {
                throw StorageError.failed("\(backup) is not a Courier database.")
            }
            let copy = try DatabaseQueue(path: temporary)
            try source.backup(to: copy)
            try source.close()
            // The new identity, in the copy, before it is put in place.
            try copy.write { db in
                try db.execute(sql: "UPDATE change_clock SET store_id = lower(hex(randomblob(8)))")
            }
            try copy.close()
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        // The old database and its WAL and shared memory go aside together (a stale WAL next to the restored file
        // would be replayed onto it), then the copy takes its name.
        try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            let name = (path as NSString).lastPathComponent + suffix
            try FileManager.default.moveItem(atPath: path + suffix, toPath: (aside as NSString).appendingPathComponent(name))
        }
        try FileManager.default.moveItem(atPath: temporary, toPath: path)
        let identity = try DatabaseQueue(path: path).read { db in
            try String.fetchOne(db, sql: "SELECT store_id FROM change_clock")
        } ?? ""
        let bytes = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? 0
        return BackupReport(bytes: bytes, identity: identity)
    }

    /// The data folder's lock: a server holds it while it runs, and a restore takes it, so that neither starts while the
    /// other works on the same database (nor two servers on one file). An advisory `flock` on `courier.lock` in the
    /// folder: the kernel releases it when the process ends, however it ends.
    public final class FolderLock: Sendable {
        private let descriptor: Int32

        /// Takes the lock of `folder`, or throws when another process holds it.
        public init(folder: String) throws {
            let path = (folder as NSString).appendingPathComponent("courier.lock")
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                let reason = String(cString: strerror(errno))
                if errno == EROFS || errno == EACCES {
                    throw StorageError.failed(
                        "The data folder cannot be written (a read-only file or file system): \(path): \(reason)"
                    )
                }
                throw StorageError.failed("Cannot open \(path): \(reason)")
            }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let failure = errno
                close(descriptor)
                if failure == EWOULDBLOCK {
                    throw StorageError.failed(
                        "Another courier-server process uses the data folder \(folder) (it holds \(path))."
                    )
                }
                throw StorageError.failed("Cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            self.descriptor = descriptor
        }

        deinit { close(descriptor) }
    }
}
