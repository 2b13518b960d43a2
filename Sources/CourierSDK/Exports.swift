// Courier — Apache-2.0
// The SDK's vocabulary: the identifiers and the small values its API speaks in, shared with the wire protocol so
// that nothing is converted on the way. Only these are re-exported: `import CourierSDK` is all an app needs, and the
// protocol's frames, requests and acks (CourierWire's other types) stay out of the app's namespace.
@_exported public import struct CourierWire.AccountID
@_exported public import struct CourierWire.AccountProfile
@_exported public import struct CourierWire.ClientMessageID
@_exported public import struct CourierWire.ConversationID
@_exported public import enum CourierWire.ConversationKind
@_exported public import struct CourierWire.DeviceID
@_exported public import struct CourierWire.ErrorCode
@_exported public import struct CourierWire.GroupID
@_exported public import struct CourierWire.GroupMember
@_exported public import struct CourierWire.GroupProfile
@_exported public import enum CourierWire.MemberRole
@_exported public import struct CourierWire.MessageID
@_exported public import struct CourierWire.ReactionCount
@_exported public import struct CourierWire.ReactionListEntry
@_exported public import struct CourierWire.ReadReceiptPolicy
@_exported public import struct CourierWire.ReadReceiptSettings
@_exported public import struct CourierWire.RecallMode
@_exported public import struct CourierWire.ReceiptCount
@_exported public import struct CourierWire.ReceiptListEntry
@_exported public import struct CourierWire.ReceiptListKind
@_exported public import struct CourierWire.Seq
@_exported public import struct CourierWire.ServerLimits
@_exported public import struct CourierWire.Timestamp
@_exported public import struct CourierWire.TypingSettings
@_exported public import struct CourierWire.Watermark
