// Courier — Apache-2.0
package import CourierWire

/// `groupReceipts` updates for one sender merged per message: each message's readers and notes gathered once, its
/// counts the latest (a message's read count only grows and its unread count only shrinks, so the highest and the
/// lowest seen). Updated in place: a copy per reader would make a batch quadratic.
///
/// Used for the reads of one request (``Change/events(of:)``) and for the events that
/// wait in a device's queue (``DeviceQueue``, ADR 0021).
package struct GroupReceiptMerge: Sendable {
    package struct Message: Sendable {
        package let messageID: MessageID
        package let seq: Seq
        package var readers: [AccountID: Timestamp] = [:]
        package var contents: [AccountID: String] = [:]
        package var readCount = 0
        package var unreadCount = Int.max

        package mutating func count(read: Int, unread: Int) {
            readCount = max(readCount, read)
            unreadCount = min(unreadCount, unread)
        }

        package var update: GroupReceiptUpdate {
            GroupReceiptUpdate(
                messageID: messageID,
                seq: seq,
                readers: readers,
                contents: contents.isEmpty ? nil : contents,
                readCount: readCount,
                unreadCount: unreadCount
            )
        }
    }

    package private(set) var messages: [Message] = []
    private var index: [MessageID: Int] = [:]
    /// Reader entries over all messages.
    package private(set) var readerEntries = 0

    package init() {}

    /// A merge of `event`'s updates.
    package init(_ event: GroupReceiptsEvent) { add(event) }

    /// Changes the entry of `messageID` (made if new) in place.
    package mutating func withMessage(_ messageID: MessageID, seq: Seq, _ body: (inout Message) -> Void) {
        let position =
            index[messageID]
            ?? {
                messages.append(Message(messageID: messageID, seq: seq))
                index[messageID] = messages.count - 1
                return messages.count - 1
            }()
        let before = messages[position].readers.count
        body(&messages[position])
        readerEntries += messages[position].readers.count - before
    }

    /// Adds the updates of a later event.
    package mutating func add(_ event: GroupReceiptsEvent) {
        for update in event.updates {
            withMessage(update.messageID, seq: update.seq) { message in
                message.readers.merge(update.readers) { _, later in later }
                if let contents = update.contents { message.contents.merge(contents) { _, later in later } }
                message.count(read: update.readCount, unread: update.unreadCount)
            }
        }
    }

    /// The messages in seq order.
    package var sorted: [Message] { messages.sorted { $0.seq < $1.seq } }

    /// Reader entries of `event` (a message named twice counts twice: an upper bound).
    package static func readerEntries(of event: GroupReceiptsEvent) -> Int {
        event.updates.reduce(0) { $0 + $1.readers.count }
    }
}
