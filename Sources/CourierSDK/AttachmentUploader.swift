// Courier — Apache-2.0
public import Foundation

/// Uploads the file of an attachment you send, before its message goes out (``CourierClient/Configuration/attachmentUploader``).
///
/// Send an ``Attachment`` whose `url` is a file on the device (`file:`); the outbox calls ``upload(_:progress:)``
/// first, keeps the address it returns in the queued message (a relaunch does not upload it again), then sends the
/// message once, with that address. A failed upload is tried again
/// (``CourierClient/Configuration/uploadAttempts``); after the last one the message is
/// ``MessageStatus/failed`` with ``CourierError/uploadFailed(_:)``. Progress arrives as
/// ``CourierEvent/uploadProgress(_:)``.
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
    /// Uploads a queued message's attachment if it still has to (with the configured attempts) and returns the
    /// message as it is sent; `nil` when the upload failed for good (the message is then failed).
    func uploadingAttachment(of outgoing: OutgoingMessage) async throws -> OutgoingMessage? {
        guard var attachment = outgoing.pendingUpload else { return outgoing }
        let fail = { (error: CourierError) in
            try await self.store.failSend(outgoing.clientID, with: error)
            self.sendWaiters.resolve(outgoing.clientID, with: .failure(error))
            return nil as OutgoingMessage?
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
                guard attempt < max(1, configuration.uploadAttempts) else {
                    return try await fail(.uploadFailed("The attachment could not be uploaded: \(error)"))
                }
                let delay = configuration.reconnectBackoff.delay(attempt: attempt - 1, jitter: .random(in: 0...1))
                try await configuration.clock.sleep(for: delay)
            }
        }
        let content: MessageContent =
            switch outgoing.type {
            case "image": .image(attachment)
            case "audio": .audio(attachment)
            case "video": .video(attachment)
            default: .file(attachment)
            }
        var uploaded = outgoing
        uploaded.body = try content.body()
        try await store.setOutboxBody(uploaded.body, of: outgoing.clientID)
        return uploaded
    }
}
