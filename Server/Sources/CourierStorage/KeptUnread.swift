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

    /// The count over `(floor, last]`, moved from this one: less what `(from, floor]` counts, plus what `(to, last]`
    /// counts. `nil` when it cannot be moved — `floor` outside `(from, to]`'s bounds, `last` before `to` — when
    /// counting `(floor, last]` afresh reads no more entries than moving does, or when a recall notice arrived in
    /// `(to, last]`: then the caller counts afresh.
    ///
    /// - Parameter counting: the entries of others that count as unread in `(after, upTo]`, and whether a recall
    ///   notice is among them.
    public func moved(
        to floor: Seq,
        last: Seq,
        counting: (_ after: Seq, _ upTo: Seq) throws -> (count: Int, recalls: Bool)
    ) rethrows -> KeptUnread? {
        guard from <= floor, floor <= to, to <= last else { return nil }
        let moving = (floor.rawValue - from.rawValue) + (last.rawValue - to.rawValue)
        guard moving < last.rawValue - floor.rawValue else { return nil }
        let arrived = try counting(to, last)
        guard !arrived.recalls else { return nil }
        let read = try counting(from, floor).count
        let count = self.count - read + arrived.count
        guard count >= 0 else { return nil }
        return KeptUnread(from: floor, to: last, count: count)
    }
}
