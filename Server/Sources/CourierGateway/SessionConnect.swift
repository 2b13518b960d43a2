// Courier — Apache-2.0
internal import CourierDomain
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import CourierServerCore

/// A session's `connect`: the token, the account's status and the registration of the device on this node (and, where
/// nodes share the store, in it). Runs in the ``RequestRunner`` (it waits for the store); the session's state machine
/// takes its outcome.
struct SessionConnect {
    enum Outcome: Sendable {
        /// Registered: the device, when its token expires, and the ack to send.
        case connected(DeviceContext, expires: Date, ack: ConnectAck)
        /// Refused; a bad token counts toward the connection's and the address's failed connects (`failures`: the
        /// address's this minute, for the log; `nil` when it did not count).
        case refused(RequestError, failures: Int?)
    }

    let environment: GatewayEnvironment
    /// The peer's address; `nil` when unknown.
    let peer: String?

    func connect(_ request: ConnectRequest, queue: DeviceQueue, control: SessionControl) async -> Outcome {
        var failures: Int?
        do throws(RequestError) {
            if let peer, environment.connectThrottle.isThrottled(peer) {
                throw RequestError(.authThrottled, "Too many failed connects from this address; try again later.")
            }
            let token: VerifiedToken
            do throws(RequestError) {
                token = try await environment.tokens.verify(request.token)
                if let claimed = request.account, claimed != token.account {
                    throw RequestError(.authAccountMismatch, "The token is for another account than '\(claimed)'.")
                }
            } catch {
                failures = peer.map { environment.connectThrottle.recordFailure($0) } ?? 0
                throw error
            }
            let account = token.account
            guard request.device.isValid else {
                throw RequestError(.invalidArgument, "device must be 1–128 characters of [A-Za-z0-9._@-].")
            }
            // Registering is a durable write; a known account (nearly every connect) only needs a read, which also
            // says whether it may connect.
            let status: AccountStatus?
            do {
                status = try await environment.store.accountStatus(account)
                if status == nil { try await environment.store.registerAccount(account, at: environment.now()) }
            } catch {
                throw RequestError(error)
            }
            if let refusal = status?.refusal(tokenIssuedAt: token.issuedAt) { throw refusal }
            let connection = environment.registry.add(
                queue,
                control: control,
                tokenIssuedAt: token.issuedAt,
                device: request.device,
                at: environment.now(),
                for: account
            )
            // A deactivation or a revocation committed between the read above and the registration found no session
            // to end: read again now that this one is registered (any later one finds it). Where nodes share the
            // store, the same transaction records the connection (``DevicePresence``).
            let refusal: RequestError?
            do {
                let status =
                    if let presence = environment.registry.presence {
                        try await presence.store.recordConnected(
                            Int64(connection.rawValue),
                            account: account,
                            device: request.device,
                            at: environment.now()
                        )
                    } else {
                        try await environment.store.accountStatus(account)
                    }
                refusal = status?.refusal(tokenIssuedAt: token.issuedAt)
            } catch {
                environment.registry.remove(connection, for: account)
                throw RequestError(error)
            }
            if let refusal {
                environment.registry.remove(connection, for: account)
                throw refusal
            }
            // Ended while its record was being written: the end's own record may have gone first.
            if !environment.registry.contains(connection, for: account) {
                environment.registry.presence?.ended([connection])
            }
            let ack = ConnectAck(
                account: account,
                device: request.device,
                serverTime: environment.now(),
                limits: environment.serverLimits,
                readReceiptPolicy: environment.readReceiptPolicy
            )
            let device = DeviceContext(account: account, device: request.device, connection: connection)
            return .connected(device, expires: token.expires, ack: ack)
        } catch {
            return .refused(error, failures: failures)
        }
    }
}
