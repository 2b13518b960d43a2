// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import ServiceLifecycle

/// Files stored by Courier (docs/media.md, ADR 0032): uploads into a conversation, fetches by its members, and the
/// clean-up — the bytes of files a recall, a purge or the app erased, and, every collect interval, files no message
/// refers to after the grace period. Runs as a service for the clean-up.
final class MediaService: Service, Sendable {
    /// Who asks: the app's backend (its secret) or an account's device (its token).
    enum Caller: Sendable, Equatable {
        case app
        case account(AccountID)
    }

    let settings: CourierServerConfiguration.Media
    private let files: any MediaFiles
    private let store: any CourierStore
    private let access: ConversationAccess
    private let now: @Sendable () -> Timestamp
    private let logger: Logger

    init(
        settings: CourierServerConfiguration.Media,
        store: any CourierStore,
        access: ConversationAccess,
        now: @escaping @Sendable () -> Timestamp,
        logger: Logger
    ) {
        self.settings = settings
        switch settings.place {
        case .folder(let root): files = FolderMediaFiles(root: root)
        case .s3(let bucket, let incoming): files = S3MediaFiles(settings: bucket, incomingFolder: incoming)
        }
        self.store = store
        self.access = access
        self.now = now
        self.logger = logger
    }

    // MARK: Requests

    /// Stores an upload into `conversation`: its bytes in place, then its row.
    ///
    /// - Throws: the access check's errors for a device that is not a member (`conversation.notAMember`, …),
    ///   `group.notFound` for the app and a group that is not there, `media.typeNotAllowed`, `media.tooLarge`.
    func upload<Body: AsyncSequence>(
        _ body: Body,
        contentType: String?,
        declaredLength: Int?,
        into conversation: ConversationID,
        by caller: Caller
    ) async throws -> MediaRecord where Body.Element == ByteBuffer {
        switch caller {
        case .app: try await access.requireConversation(conversation)
        case .account(let account): try await access.check(account, in: conversation)
        }
        guard let contentType, settings.allows(contentType) else {
            throw RequestError(
                .mediaTypeNotAllowed,
                "Content-Type '\(contentType ?? "")' is not one this server stores (\(settings.types.joined(separator: ", ")))."
            )
        }
        if let declaredLength, declaredLength > settings.maxBytes { throw tooLarge }
        let written: MediaUpload.Written
        do {
            written = try await MediaUpload.write(body, into: files.incomingFolder, maxBytes: settings.maxBytes)
        } catch MediaUploadError.tooLarge {
            throw tooLarge
        }
        let record = MediaRecord(
            id: Self.newID(),
            conversation: conversation,
            uploader: caller.account,
            contentType: contentType,
            size: written.size,
            sha256: written.sha256,
            createdAt: now()
        )
        do {
            try await files.store(record.id, from: written.path, contentType: contentType)
        } catch {
            try? FileManager.default.removeItem(atPath: written.path)
            throw RequestError(.internal, "The file could not be stored; nothing was kept.", cause: "\(error)")
        }
        do {
            try await store.addMedia(record)
        } catch {
            try? await files.delete([record.id])
            throw RequestError(error)
        }
        return record
    }

    /// How to answer a fetch of file `id`: a non-member, a file that was never there and one that is erased are the
    /// same `media.notFound`, so that whether a file exists does not leak.
    func fetch(_ id: String, by caller: Caller) async throws -> (MediaRecord, MediaFetch) {
        guard MediaReference.isValid(id) else { throw notFound }
        let record: MediaRecord?
        do { record = try await store.media(id) } catch { throw RequestError(error) }
        guard let record else { throw notFound }
        if case .account(let account) = caller {
            do { try await access.check(account, in: record.conversation) } catch { throw notFound }
        }
        do {
            return (record, try await files.fetch(id, contentType: record.contentType))
        } catch {
            throw RequestError(.internal, "The file could not be read.", cause: "\(error)")
        }
    }

    /// Erases file `id` for the app; its bytes are deleted before this returns (or at the next sweep).
    func delete(_ id: String) async throws {
        guard MediaReference.isValid(id) else { throw notFound }
        let erased: Bool
        do { erased = try await store.eraseMedia(id) } catch { throw RequestError(error) }
        guard erased else { throw notFound }
        await sweep()
    }

    private var notFound: RequestError { RequestError(.mediaNotFound, "No such file, or not one you may fetch.") }

    private var tooLarge: RequestError {
        RequestError(.mediaTooLarge, "The file exceeds \(settings.maxBytes) bytes.")
    }

    /// `md_` and 128 random bits in hex.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "md_" + bytes.lowercaseHex
    }

    // MARK: Clean-up

    /// Deletes the bytes of erased files, then forgets them. A failure is logged and left for the next sweep.
    func sweep() async {
        do {
            while true {
                let ids = try await store.erasedMedia(limit: 256)
                guard !ids.isEmpty else { return }
                try await files.delete(ids)
                try await store.forgetMedia(ids)
                guard ids.count == 256 else { return }
            }
        } catch {
            logger.warning("Erased files could not be deleted yet", metadata: ["error": "\(error)"])
        }
    }

    /// Collects the files no message refers to past the grace period, then sweeps. Answers how many it erased.
    @discardableResult
    func collect() async -> Int {
        var erased = 0
        do {
            let before = Timestamp(milliseconds: now().rawValue - settings.grace.milliseconds)
            while true {
                let count = try await store.collectMedia(uploadedBefore: before, limit: 500)
                erased += count
                if count < 500 { break }
            }
        } catch {
            logger.warning("Files could not be collected", metadata: ["error": "\(error)"])
        }
        await sweep()
        return erased
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.collect()
                try? await Task.sleep(for: self.settings.collectInterval)
            }
        }
    }
}

extension MediaService.Caller {
    var account: AccountID? {
        if case .account(let account) = self { return account }
        return nil
    }
}
