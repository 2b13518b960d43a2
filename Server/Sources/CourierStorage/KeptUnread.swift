// Courier — Apache-2.0
public import CourierWire

/// A reader's kept unread count in one conversation (ADR 0042): `count` entries of others that count as
/// unread in `(from, to]`. A fact of the log alone — read acks, deletions for the reader and its clear are not in
/// it — so it stays true until an entry in the range stops counting, which only a recall does, and a recall appends
/// its notice after `to`.
///
/// A read answers its unread count from it, moved to the reader's new position and the conversation's newest entry:
/// the read pays for the seqs it read and the entries that arrived since, not for the whole backlog above it, which
/// is what a reader who reads each message as it arrives, behind a faster sender, paid before.
public struct KeptUnread: Hashable, Sendable {
    public var from: Seq
    public var to: Seq
    public var count: Int

    public init(from: Seq, to: Seq, count: Int) {
        self.from = from
        self.to = to
        self.count = count
    }

    /// Whether the count over `(floor, last]` is cheaper moved from this one than counted afresh: `floor` within
    /// `(from, to]`'s bounds, `last` not before `to`, and moving reads fewer entries — `(from, floor]` and
    /// `(to, last]` — than `(floor, last]` holds.
    public func moves(to floor: Seq, last: Seq) -> Bool {
        guard from <= floor, floor <= to, to <= last else { return false }
        return (floor.rawValue - from.rawValue) + (last.rawValue - to.rawValue) < last.rawValue - floor.rawValue
    }

    /// The count over `(floor, last]`, moved from this one: less the `read` entries `(from, floor]` counts, plus the
    /// `arrived` ones `(to, last]` counts. `nil` when a recall notice arrived in `(to, last]` (a recall makes an
    /// earlier entry stop counting) or the count would fall below zero: then the caller counts afresh.
    public func moved(to floor: Seq, last: Seq, read: Int, arrived: Int, recalls: Bool) -> KeptUnread? {
        let count = self.count - read + arrived
        guard !recalls, count >= 0 else { return nil }
        return KeptUnread(from: floor, to: last, count: count)
    }
}
