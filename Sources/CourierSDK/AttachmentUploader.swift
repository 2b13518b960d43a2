// Courier — Apache-2.0
public import Foundation
#if canImport(FoundationNetworking)
internal import FoundationNetworking
#endif
internal import Logging
public import CourierWire

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
/// Without one, the client uploads to the Courier server itself (docs/media.md): into the conversation the message goes
/// to, with the account's token, and sends the file's address (`https://…/v1/media/md_…`), which only the
/// conversation's members can fetch and which a two-way recall deletes. NIM uploads through its own `NOS` storage,
/// Agora and RongCloud through theirs; bring your own storage (your S3 bucket, your CDN) through this protocol.
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
        let uploader =
            configuration.attachmentUploader
            ?? CourierMediaUploader(
                serverURL: configuration.serverURL,
                path: "/v1/conversations/\(outgoing.conversation.rawValue)/media",
                token: { [state] in
                    guard let credentials = state.withLock({ $0.credentials }) else { throw CourierMediaUploader.NotConnected() }
                    return try await credentials.token()
                }
            )
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

/// Reports an upload's bytes sent as a fraction of its file.
final class UploadProgressDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    let progress: @Sendable (Double) -> Void

    init(progress: @escaping @Sendable (Double) -> Void) {
        self.progress = progress
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        guard totalBytesExpectedToSend > 0 else { return }
        // 1 is the uploader's "done", once the server has answered.
        progress(min(0.99, Double(totalBytesSent) / Double(totalBytesExpectedToSend)))
    }
}

/// The default uploader: `POST /v1/conversations/{id}/media` on the server the client connects to, with the account's
/// token (docs/media.md). The answer's address, made absolute, is what the message carries.
struct CourierMediaUploader: AttachmentUploader {
    let serverURL: URL
    /// Where the file goes: `/v1/conversations/{id}/media`, or `/v1/accounts/{id}/media` for an account's own file.
    let path: String
    let token: @Sendable () async throws -> String

    struct NotConnected: Error, CustomStringConvertible {
        var description: String { "the client has not connected yet (the upload needs the account's token)" }
    }

    struct Refused: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "the server answered \(status): \(body)" }
    }

    /// The server's HTTP address: the WebSocket URL's scheme made `http(s)`, its `/v1/ws` dropped (a prefix a proxy
    /// serves the server under stays).
    var base: URL {
        var components = URLComponents(url: serverURL, resolvingAgainstBaseURL: false) ?? URLComponents()
        components.scheme = components.scheme == "wss" || components.scheme == "https" ? "https" : "http"
        if components.path.hasSuffix("/v1/ws") { components.path.removeLast("/v1/ws".count) }
        if components.path.hasSuffix("/") { components.path.removeLast() }
        components.query = nil
        return components.url ?? serverURL
    }

    func upload(_ attachment: Attachment, progress: @escaping @Sendable (Double) -> Void) async throws -> URL {
        var request = URLRequest(url: base.appendingPathComponent(path))
        request.httpMethod = "POST"
        request.setValue("Bearer \(try await token())", forHTTPHeaderField: "Authorization")
        request.setValue(attachment.mimeType, forHTTPHeaderField: "Content-Type")
        progress(0)
        // Streamed from the file (never read into memory whole), reporting the bytes sent as they go.
        let (body, response) = try await URLSession.shared.upload(
            for: request,
            fromFile: attachment.url,
            delegate: UploadProgressDelegate(progress: progress)
        )
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 201 else {
            throw Refused(status: status, body: String(decoding: body.prefix(500), as: UTF8.self))
        }
        struct Stored: Decodable { let url: String }
        let stored = try JSONDecoder().decode(Stored.self, from: body)
        progress(1)
        return base.appendingPathComponent(stored.url)
    }
}
