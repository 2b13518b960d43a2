// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire

/// Connected devices in `connected_device`. A node is live while it holds connections to the database
/// (`pg_stat_activity` names them by `application_name`, ``PostgresStore/applicationName(of:)``): the rows of a node
/// that stopped, even by `kill -9`, drop out of every answer as soon as PostgreSQL sees its connections close.
extension PostgresStore: PresenceStore {
    public func recordConnected(
        _ connection: Int64,
        account: AccountID,
        device: DeviceID,
        at time: Timestamp
    ) async throws(StorageError) -> AccountStatus? {
        try await writeRows([
            """
            INSERT INTO connected_device (node, connection, account, device, connected_at)
            VALUES (\(nodeID), \(connection), \(account.rawValue), \(device.rawValue), \(time.rawValue))
            ON CONFLICT (node, connection) DO NOTHING
            """,
            "SELECT \(unescaped: AccountStatus.columns) FROM account WHERE id = \(account.rawValue)",
        ])[1].first.map(AccountStatus.init)
    }

    public func recordDisconnected(_ connections: [Int64]) async throws(StorageError) {
        guard !connections.isEmpty else { return }
        _ = try await writeRows("DELETE FROM connected_device WHERE node = \(nodeID) AND connection IN \(list: connections)")
    }

    public func forgetConnections(includingOwn: Bool) async throws(StorageError) {
        _ = try await writeRows(
            """
            DELETE FROM connected_device d
            WHERE (d.node = \(nodeID) AND \(includingOwn)) OR (d.node <> \(nodeID) AND NOT \(unescaped: Self.nodeIsLive))
            """
        )
    }

    public func connectedDevices(of account: AccountID) async throws(StorageError) -> [ConnectedDevice] {
        try await readRows(
            """
            SELECT d.device, d.node, d.connected_at FROM connected_device d
            WHERE d.account = \(account.rawValue) AND \(unescaped: Self.nodeIsLive)
            ORDER BY d.device, d.node, d.connected_at
            """
        ).map { row throws(StorageError) in
            ConnectedDevice(
                device: DeviceID(rawValue: try row.string(0)),
                node: try row.string(1),
                connectedAt: Timestamp(milliseconds: try row.int64(2))
            )
        }
    }

    /// Whether row `d`'s node holds a connection to the database (its name cut as ``applicationName(of:)`` cuts it).
    private static let nodeIsLive = """
        EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = left('courier-' || d.node, 63))
        """
}
