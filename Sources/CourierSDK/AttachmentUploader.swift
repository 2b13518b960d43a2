// Courier — Apache-2.0
public import Foundation
internal import Logging

/// Uploads the file of an attachment you send, before its message goes out (``CourierClient/Configuration/attachmentUploader``).
///
/// Send an ``Attachment`` whose `url` is a file on the device (`file:`); the outbox calls ``upload(_:progress:)``
/// beside the connection (receipts, reads and your other messages go on meanwhile), keeps the address it returns in
/// the queued message (a relaunch does not upload it again), then sends the message once, with that address. A failed
/// upload is tried again (``CourierClient/Configuration/uploadAttempts``); after the last one the message is
/// ``MessageStatus/failed`` with ``CourierError/uploadFailed(_:)`` (``CourierClient/retryFailedMessage(_:)`` uploads
/// again). Progress arrives as ``CourierEvent/uploadProgress(_:)``. The preview (``Attachment/thumbnailURL``) must
/// already be an address recipients can fetch.
///
/// NIM uploads through its own `NOS` storage, Agora and RongCloud through theirs; with Courier you bring the storage
/// (your S3 bucket, your CDN) through this protocol.
public protocol AttachmentUploader: Sendable {
    /// Uploads `attachment`'s file (`attachment.url`, a `file:` URL) and returns the address recipients fetch it from.
    /// Call `progress` with the fraction sent (0…1) as you go; throw to fail this attempt.
    func upload(_ attachment: Attachment, progress: @escaping @Sendable (Double) -> Void) async throws -> URL
}

/// How far the upload of a queued attachment has gone.
public struct UploadProgress: Sendable, Hashable {
    /// The message being sent (its ``PendingMessage/clientID``).
    public let clientID: ClientMessageID
    public let conversation: ConversationID
    /// Fraction sent, 0…1.
    public let fraction: Double
}

extension CourierClient {
    /// Starts uploading a queued message's attachment unless that runs already; the connection is signalled when the
    /// message can go.
    func startUpload(of outgoing: OutgoingMessage) {
        state.withLock { state in
            guard state.uploads[outgoing.clientID] == nil else { return }
            state.uploads[outgoing.clientID] = Task {
                defer { _ = self.state.withLock { $0.uploads.removeValue(forKey: outgoing.clientID) } }
                do {
                    guard try await self.upload(outgoing) else { return }
                    self.state.withLock { $0.link }?.signal()
                } catch {
                    // Cancelled, or the store failed: the message stays queued, and the next flush starts again.
                    self.configuration.logger.info("An upload stopped", metadata: ["error.type": "\(type(of: error))"])
                }
            }
        }
    }

    /// Uploads a queued message's attachment (with the configured attempts) and stores its address in the queued
    /// message; `false` when the upload failed for good (the message is then failed).
    private func upload(_ outgoing: OutgoingMessage) async throws -> Bool {
        guard var attachment = outgoing.pendingUpload else { return true }
        let fail = { (error: CourierError) in
            try await self.store.failSend(outgoing.clientID, with: error)
            self.sendWaiters.resolve(outgoing.clientID, with: .failure(error))
            return false
        }
        guard let uploader = configuration.attachmentUploader else {
            return try await fail(.uploadFailed("No attachment uploader is configured for a file attachment."))
        }
        let broadcaster = self.broadcaster
        let progress: @Sendable (Double) -> Void = { fraction in
            let update = UploadProgress(
                clientID: outgoing.clientID,
                conversation: outgoing.conversation,
                fraction: min(1, max(0, fraction))
            )
            broadcaster.emit([.uploadProgress(update)])
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                attachment.url = try await uploader.upload(attachment, progress: progress)
                break
            } catch {
                // Cancelled (the client closes): the message stays queued, and is uploaded again next time.
                if error is CancellationError || Task.isCancelled { throw error }
                guard attempt < max(1, configuration.uploadAttempts) else {
                    return try await fail(.uploadFailed("The attachment could not be uploaded: \(error)"))
                }
                let delay = configuration.reconnectBackoff.delay(attempt: attempt - 1, jitter: .random(in: 0...1))
                try await configuration.clock.sleep(for: delay)
            }
        }
        guard !attachment.url.isFileURL else {
            return try await fail(.uploadFailed("The uploader returned a file on this device, not where the file went."))
        }
        let body = try MessageContent(type: outgoing.type, body: outgoing.body).replacing(attachment).body()
        try await store.setOutboxBody(body, of: outgoing.clientID)
        return true
    }
}
