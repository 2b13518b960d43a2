// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore: AccountStore {
    public func setPushToken(_ token: PushToken?, of account: AccountID, device: DeviceID) async throws(StorageError) {
        try await transaction { connection in
            try await connection.query(
                """
                DELETE FROM push_token WHERE (account = \(account.rawValue) AND device = \(device.rawValue))
                    OR (platform = \(token?.platform.rawValue) AND token = \(token?.token))
                """,
                logger: logger
            )
            guard let token else { return }
            try await connection.query(
                """
                INSERT INTO push_token (account, device, platform, token, sandbox, updated_at)
                VALUES (\(account.rawValue), \(device.rawValue), \(token.platform.rawValue), \(token.token),
                        \(token.sandbox), \(token.updatedAt.rawValue))
                """,
                logger: logger
            )
        }
    }

    public func pushTokens(of account: AccountID) async throws(StorageError) -> [PushToken] {
        try await withPooledConnection { connection in
            var tokens: [PushToken] = []
            let rows = try await connection.query(
                """
                SELECT device, platform, token, sandbox, updated_at FROM push_token WHERE account = \(account.rawValue)
                ORDER BY device
                """,
                logger: logger
            )
            for try await (device, platform, token, sandbox, updatedAt) in rows.decode(
                (String, String, String, Bool, Int64).self
            ) {
                tokens.append(
                    PushToken(
                        device: DeviceID(rawValue: device),
                        platform: PushPlatform(rawValue: platform),
                        token: token,
                        sandbox: sandbox,
                        updatedAt: Timestamp(milliseconds: updatedAt)
                    )
                )
            }
            return tokens
        }
    }

    public func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                "INSERT INTO account (id, created_at) VALUES (\(account.rawValue), \(time.rawValue)) ON CONFLICT (id) DO NOTHING",
                logger: logger
            )
        }
    }

    public func registerAccounts(_ accounts: [AccountID], at time: Timestamp) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                """
                INSERT INTO account (id, created_at) SELECT unnest(\(accounts.map(\.rawValue))::text[]), \(time.rawValue)
                ON CONFLICT (id) DO NOTHING
                """,
                logger: logger
            )
        }
    }

    public func accountExists(_ account: AccountID) async throws(StorageError) -> Bool {
        try await withPooledConnection { connection in
            try await connection.query("SELECT 1 FROM account WHERE id = \(account.rawValue)", logger: logger)
                .decode(Int.self).first { _ in true } != nil
        }
    }
}
