// Courier — Apache-2.0
internal import Foundation
internal import Hummingbird

/// The web console's files (`Console/`, this module's resources), served as they are: no build step, and nothing
/// loaded from elsewhere, which the content security policy enforces.
struct ConsoleFiles: Sendable {
    let path: String
    let bytes: [UInt8]
    let headers: HTTPFields

    /// `/console` is the page; its script and style beside it.
    static let all: [ConsoleFiles] = [
        ("/console", "index.html", "text/html; charset=utf-8"),
        ("/console/console.js", "console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "console.css", "text/css; charset=utf-8"),
    ].map { path, name, type in
        let url = Bundle.module.resourceURL?.appendingPathComponent("Console").appendingPathComponent(name)
        let bytes = url.flatMap { try? Data(contentsOf: $0) }.map(Array.init) ?? Array("Not installed: \(name)".utf8)
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        return ConsoleFiles(path: path, bytes: bytes, headers: headers)
    }
}
