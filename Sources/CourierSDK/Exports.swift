// Courier — Apache-2.0
// The SDK's public API speaks in the wire module's identifiers (AccountID, ConversationID, Seq, …); re-export them
// so that `import CourierSDK` is all an app needs.
@_exported public import CourierWire
