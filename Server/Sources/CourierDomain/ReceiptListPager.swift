// Courier — Apache-2.0
public import CourierWire

/// Pages a receipt list across its segments, the same way for every backend: the backend answers each segment
/// request with one indexed range query, the pager stitches the page and the next cursor.
///
/// - read list: one-by-one acks of the message (by account), then watermark readers (by `(read seq, account)`), then
///   former members who read it (by account);
/// - unread and delivered lists: watermark positions (by `(seq, account)`);
/// - a list filtered by accounts: all of them at once (at most 100), by account.
public struct ReceiptListPager: Sendable {
    /// What to fetch next: up to `limit` entries of `segment` after `after` (from the segment's start when `nil`).
    public struct Request: Sendable {
        public let segment: ReceiptCursor.Segment
        public let after: ReceiptCursor?
        public let limit: Int
    }

    public let query: ReceiptListQuery
    private let segments: [ReceiptCursor.Segment]
    private var index: Int
    private var after: ReceiptCursor?
    private var entries: [(cursor: ReceiptCursor, entry: ReceiptListEntry)] = []

    public init(_ query: ReceiptListQuery) {
        self.query = query
        segments = query.segments
        if let cursor = query.cursor, let position = segments.firstIndex(of: cursor.segment) {
            index = position
            after = cursor
        } else {
            index = query.cursor == nil ? 0 : segments.count
        }
    }

    /// The next segment request, or `nil` when the page (plus one entry, to know whether more follow) is complete.
    public var next: Request? {
        let wanted = query.limit + 1 - entries.count
        guard wanted > 0, index < segments.count else { return nil }
        return Request(segment: segments[index], after: after, limit: wanted)
    }

    /// Takes the backend's answer to ``next``, in the segment's order.
    public mutating func receive(_ rows: [(cursor: ReceiptCursor, entry: ReceiptListEntry)]) {
        guard let request = next else { return }
        var rows = rows
        if request.segment == .filtered, let after = request.after {
            rows = rows.filter { $0.cursor.account > after.account }
        }
        entries += rows.prefix(request.limit)
        if rows.count < request.limit {
            index += 1
            after = nil
        } else {
            after = rows[request.limit - 1].cursor
        }
    }

    /// The page, with a cursor when more entries follow.
    public func page(total: Int) -> ReceiptPage {
        let page = entries.prefix(query.limit)
        let more = entries.count > query.limit
        return ReceiptPage(entries: page.map(\.entry), total: total, next: more ? page.last?.cursor : nil)
    }
}
