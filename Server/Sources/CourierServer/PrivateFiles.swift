// Courier — Apache-2.0
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Foundation

/// What Courier writes is its own: the data folder is 0700 and every file in it 0600 — the database and its WAL, the
/// app secret, media, backups, the folders a restore sets aside — as PostgreSQL keeps its data directory. The
/// commands set the process's umask to 077 before they create anything, so no file is ever readable by another
/// account on the host, even for a moment; a folder made by an older version, or by hand, is reported at start.
public enum PrivateFiles {
    /// From now on, what the process creates is readable by its own account only (umask 077).
    public static func restrictNewFiles() {
        umask(0o077)
    }

    /// Paths under `folder` (the folder included) that others on the host may read or enter: group or other bits set.
    /// At most `limit` entries are looked at (a media folder can hold millions).
    public static func looser(in folder: String, limit: Int = 10_000) -> [String] {
        var found: [String] = []
        var looked = 0
        func check(_ path: String) {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                attributes[.type] as? FileAttributeType != .typeSymbolicLink,
                let mode = attributes[.posixPermissions] as? Int
            else { return }
            if mode & 0o077 != 0 { found.append(path) }
        }
        check(folder)
        guard let entries = FileManager.default.enumerator(atPath: folder) else { return found }
        for case let entry as String in entries {
            looked += 1
            if looked > limit { break }
            check((folder as NSString).appendingPathComponent(entry))
        }
        return found
    }
}
