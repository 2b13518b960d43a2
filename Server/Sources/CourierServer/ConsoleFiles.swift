// Courier — Apache-2.0
internal import Foundation
internal import Hummingbird
internal import CourierREST

/// The web console's files (`Console/`, this module's resources), served as they are: no build step, and nothing
/// loaded from elsewhere, which the content security policy enforces.
enum ConsoleFiles {
    /// The files' folder: `courier-server_CourierServer.resources/Console` beside the executable (or in the build
    /// folder). Looked up without `Bundle.module`, which stops the process when the folder was not installed: a node
    /// without it serves a page saying so, and everything else.
    static let folder: URL? = {
        let name = "courier-server_CourierServer.resources"
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent(name),
            Bundle.main.executableURL?.deletingLastPathComponent().appendingPathComponent(name),
        ] + Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent().appendingPathComponent(name) }
        return candidates.compactMap { $0?.appendingPathComponent("Console") }
            .first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("index.html").path) }
    }()

    /// `/console` is the page; its script and style beside it.
    static let all: [StaticFile] = [
        ("/console", "index.html", "text/html; charset=utf-8"),
        ("/console/console.js", "console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "console.css", "text/css; charset=utf-8"),
    ].map { path, name, type in
        let url = folder?.appendingPathComponent(name)
        let missing = "The console was not installed: copy courier-server_CourierServer.resources beside courier-server."
        let bytes = url.flatMap { try? Data(contentsOf: $0) }.map(Array.init) ?? Array(missing.utf8)
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        return StaticFile(path: path, bytes: bytes, headers: headers)
    }
}
