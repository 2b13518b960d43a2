// Courier — Apache-2.0
internal import CourierAPI
internal import Foundation
internal import Yams

/// What an API key may do (ADR 0048): one room of the REST API each, `read` for every `GET` of those rooms, `metrics`
/// for `GET /metrics` alone. Keys and signing keys are the app secret's alone.
package enum Scope: String, CaseIterable, Sendable {
    case accounts, messages, groups, webhooks, moderation, `import`, server, audit, read, metrics
}

/// Which credentials each operation takes and whether it is audited, as openapi.yaml declares them: read from the
/// document the server serves, so that what it enforces is what it publishes. An operation's `security` lists the
/// alternatives (`{appSecret: []}`, `{apiKey: [groups]}`, …); an operation the document does not know, or one without
/// an `apiKey` alternative, is the app secret's alone.
package struct OperationPolicy: Sendable {
    struct Operation: Sendable, Equatable {
        /// The scopes any one of which lets a key call it.
        var scopes: Set<Scope>
        /// Every method but `GET`, unless the document says `x-courier-audit: false`.
        var audited: Bool
    }

    let operations: [String: Operation]

    /// The policy of the document this build serves.
    static let document: OperationPolicy = {
        do {
            return try OperationPolicy(yaml: String(decoding: CourierAPIDocument.yaml, as: UTF8.self))
        } catch {
            fatalError("openapi.yaml does not say which credentials its operations take: \(error)")
        }
    }()

    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    init(yaml: String) throws {
        guard let document = try Yams.load(yaml: yaml) as? [String: Any],
            let paths = document["paths"] as? [String: Any]
        else { throw Malformed(description: "no paths") }
        var operations: [String: Operation] = [:]
        for (path, item) in paths {
            guard let item = item as? [String: Any] else { continue }
            for method in ["get", "put", "post", "delete", "patch"] {
                guard let operation = item[method] as? [String: Any] else { continue }
                guard let id = operation["operationId"] as? String else {
                    throw Malformed(description: "\(method.uppercased()) \(path) has no operationId")
                }
                var scopes: Set<Scope> = []
                for alternative in operation["security"] as? [[String: Any]] ?? [] {
                    for name in alternative["apiKey"] as? [String] ?? [] {
                        guard let scope = Scope(rawValue: name) else {
                            throw Malformed(description: "\(id) names an unknown scope '\(name)'")
                        }
                        scopes.insert(scope)
                    }
                }
                let audited = method != "get" && (operation["x-courier-audit"] as? Bool ?? true)
                operations[id] = Operation(scopes: scopes, audited: audited)
            }
        }
        self.operations = operations
    }

    /// Whether `caller` may call `operationID`.
    func allows(_ caller: Caller, _ operationID: String) -> Bool {
        guard let scopes = caller.scopes else { return true }
        return !(operations[operationID]?.scopes ?? []).isDisjoint(with: scopes)
    }

    func isAudited(_ operationID: String) -> Bool { operations[operationID]?.audited ?? true }

    /// The scopes that let a key call `operationID` (for a refusal's message).
    func scopes(of operationID: String) -> [Scope] {
        Scope.allCases.filter { operations[operationID]?.scopes.contains($0) ?? false }
    }
}
