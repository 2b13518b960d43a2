// Courier — Apache-2.0
internal import Crypto
internal import Foundation
internal import NIOCore
internal import _NIOFileSystem
internal import CourierServerCore

/// Where the bytes of stored files live (ADR 0032): a folder on this node (the default), or an S3-compatible bucket
/// that several nodes share (``S3MediaFiles``). The rows that say whose they are live in the store (`MediaStore`).
protocol MediaFiles: Sendable {
    /// Where an upload's bytes are written while they arrive (on this node, whatever the place).
    var incomingFolder: String { get }
    /// Puts the finished upload at `file` in place as file `id`; durable when this returns. `file` is gone after.
    func store(_ id: String, from file: String, contentType: String) async throws
    /// How a fetch of file `id` is answered.
    func fetch(_ id: String, contentType: String) async throws -> MediaFetch
    /// Deletes the bytes of file `id`; bytes already gone count as deleted.
    func delete(_ id: String) async throws
}

/// How a fetch is answered: the bytes from a local file, or a redirect to a short-lived address.
enum MediaFetch: Sendable {
    case file(String)
    case redirect(String)
}

/// Files under a folder of the data folder: `media/ab/md_ab…` (two hex digits fan them out), uploads arriving in
/// `media/incoming`. A stored file is synced, then renamed into place, then its folder synced: a `201` means the bytes
/// survive a power cut, like the row that names them.
struct FolderMediaFiles: MediaFiles {
    let root: String
    var incomingFolder: String { root + "/incoming" }

    init(root: String) {
        self.root = root
        IncomingFolder.prepare(root + "/incoming")
    }

    func path(of id: String) -> String {
        "\(root)/\(id.dropFirst(3).prefix(2))/\(id)"
    }

    func store(_ id: String, from file: String, contentType: String) async throws {
        let destination = path(of: id)
        let folder = (destination as NSString).deletingLastPathComponent
        if !FileManager.default.fileExists(atPath: folder) {
            try await FileSystem.shared.createDirectory(at: .init(folder), withIntermediateDirectories: true)
            // The new folder's name is durable too.
            try await FileSystem.shared.withFileHandle(forReadingAt: .init(root)) { try await $0.synchronize() }
        }
        try await FileSystem.shared.moveItem(at: .init(file), to: .init(destination))
        try await FileSystem.shared.withFileHandle(forReadingAt: .init(folder)) { try await $0.synchronize() }
    }

    func fetch(_ id: String, contentType: String) async throws -> MediaFetch {
        .file(path(of: id))
    }

    func delete(_ id: String) async throws {
        _ = try await FileSystem.shared.removeItem(at: .init(path(of: id)))
    }
}

/// Writes an upload's bytes to a new file in `folder`, counting them and hashing them, and syncs it: the SHA-256 and
/// the size, or ``MediaUploadError/tooLarge`` past `maxBytes` (the partial file removed).
enum MediaUpload {
    struct Written: Sendable {
        let path: String
        let size: Int64
        let sha256: String
    }

    static func write<Body: AsyncSequence>(
        _ body: Body,
        into folder: String,
        maxBytes: Int
    ) async throws -> Written where Body.Element == ByteBuffer {
        let path = folder + "/" + UUID().uuidString
        let handle = try await FileSystem.shared.openFile(
            forWritingAt: .init(path),
            options: .newFile(replaceExisting: false)
        )
        do {
            var hasher = SHA256()
            var size = 0
            for try await buffer in body {
                guard size + buffer.readableBytes <= maxBytes else { throw MediaUploadError.tooLarge }
                hasher.update(data: buffer.readableBytesView)
                try await handle.write(contentsOf: buffer, toAbsoluteOffset: Int64(size))
                size += buffer.readableBytes
            }
            try await handle.synchronize()
            try await handle.close()
            return Written(path: path, size: Int64(size), sha256: hasher.finalize().lowercaseHex)
        } catch {
            try? await handle.close()
            _ = try? await FileSystem.shared.removeItem(at: .init(path))
            throw error
        }
    }
}

enum IncomingFolder {
    static func prepare(_ path: String) {
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            try? FileManager.default.removeItem(atPath: path + "/" + name)
        }
    }
}

enum MediaUploadError: Error {
    case tooLarge
}
