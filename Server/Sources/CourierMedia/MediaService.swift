// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation
package import Logging
internal import NIOCore
internal import ServiceLifecycle
package import CourierServerCore

/// Files stored by Courier (docs/media.md, ADR 0032): uploads into a conversation, fetches by its members, and the
/// clean-up — the bytes of files a recall, a purge or the app erased, and, every collect interval, files no message
/// refers to after the grace period. Runs as a service for the clean-up.
package final class MediaService: Service, Sendable {
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

    package init(
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
        if let owner = conversation.filesAccount {
            // An account's own files (its avatar): its devices upload them, or the app for a registered account.
            switch caller {
            case .app:
                guard (try? await store.accountExists(owner)) == true else {
                    throw RequestError(.accountNotFound, "Account '\(owner)' does not exist.")
                }
            case .account(let account):
                guard account == owner else {
                    throw RequestError(.invalidArgument, "A device uploads files of its own account only.")
                }
            }
        } else {
            switch caller {
            case .app: try await access.requireConversation(conversation)
            case .account(let account): try await access.check(account, in: conversation)
            }
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
        // The row first, then the bytes: a crash between them leaves a row without bytes (fetched as 404, collected
        // after the grace period like any file no message refers to), never bytes no row names.
        do {
            try await store.addMedia(record)
        } catch {
            try? FileManager.default.removeItem(atPath: written.path)
            throw RequestError(error)
        }
        do {
            try await files.store(record.id, from: written.path, contentType: contentType)
        } catch {
            try? FileManager.default.removeItem(atPath: written.path)
            _ = try? await store.eraseMedia(record.id)
            throw RequestError(.internal, "The file could not be stored; nothing was kept.", cause: "\(error)")
        }
        return record
    }

    /// How to answer a fetch of file `id`: a non-member, a file that was never there and one that is erased are the
    /// same `media.notFound`, so that whether a file exists does not leak.
    func fetch(_ id: String, by caller: Caller) async throws -> (MediaRecord, MediaFetch) {
        guard MediaReference.isValid(id) else { throw notFound }
        let record = try await storing { () throws(StorageError) in try await store.media(id) }
        guard let record else { throw notFound }
        // An account's own files (an avatar) are for every account to fetch; a conversation's for its members.
        if case .account(let account) = caller, record.conversation.filesAccount == nil {
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
        let erased = try await storing { () throws(StorageError) in try await store.eraseMedia(id) }
        guard erased else { throw notFound }
        await sweep()
    }

    /// The one answer for no file, someone else's and an erased one.
    static let notFound = RequestError(.mediaNotFound, "No such file, or not one you may fetch.")
    private var notFound: RequestError { Self.notFound }

    private var tooLarge: RequestError {
        RequestError(.mediaTooLarge, "The file exceeds \(settings.maxBytes) bytes.")
    }

    /// `md_` and 128 random bits in hex.
    static func newID() -> String {
        "md_" + String.randomHex(bytes: 16)
    }

    // MARK: Clean-up

    /// Deletes the bytes of erased files, a batch of them, and forgets those it deleted; a file whose bytes cannot be
    /// deleted now (the bucket unreachable) is logged and left for the next pass, without holding back the others.
    /// Returns whether a full batch was found (more may be left).
    @discardableResult
    package func sweep() async -> Bool {
        let ids: [String]
        do { ids = try await store.erasedMedia(limit: Self.sweepBatch) } catch {
            logger.warning("Erased files could not be listed", metadata: ["error": "\(error)"])
            return false
        }
        var deleted: [String] = []
        for id in ids {
            do {
                try await files.delete(id)
                deleted.append(id)
            } catch {
                logger.warning("The bytes of an erased file could not be deleted yet", metadata: ["media.id": "\(id)", "error": "\(error)"])
            }
        }
        do { try await store.forgetMedia(deleted) } catch {
            logger.warning("Deleted files could not be forgotten yet", metadata: ["error": "\(error)"])
        }
        return ids.count == Self.sweepBatch
    }

    static let sweepBatch = 256
    /// Files the collector decides per statement: each is a scan of its conversation's messages, in the writer's
    /// transaction, so small batches keep sends from waiting behind it.
    static let collectBatch = 50

    /// Collects the files no message refers to past the grace period, then sweeps. Answers how many it erased.
    @discardableResult
    func collect() async -> Int {
        var erased = 0
        do {
            let before = Timestamp(milliseconds: now().rawValue - settings.grace.milliseconds)
            while !Task.isCancelled {
                let pass = try await store.collectMedia(uploadedBefore: before, limit: Self.collectBatch)
                erased += pass.erased
                if pass.decided < Self.collectBatch { break }
            }
        } catch {
            logger.warning("Files could not be collected", metadata: ["error": "\(error)"])
        }
        while !Task.isCancelled, await sweep() {}
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
