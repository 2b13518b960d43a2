// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A group's row held shared, then its reads' transaction-scoped advisory lock (class 7460212, the group id's
    /// hash), both until the transaction ends (``markRecordingRead(_:on:)``). Only reads take the advisory lock and
    /// shares of the row do not wait for each other, so whichever of the two the statement takes first, no read
    /// waits for another while holding what that one needs.
    enum HoldGroupReads: HotStatement {
        static let sql = """
            SELECT pg_advisory_xact_lock(7460212, hashtext(id))::text FROM conversation WHERE id = $1 FOR SHARE
            """
    }

    enum MessageTime: HotStatement {
        static let sql = "SELECT time FROM message WHERE conversation_id = $1 AND seq = $2"
    }
}
