// Courier — Apache-2.0
import Foundation

/// The REST API's OpenAPI document, as the server serves it at `GET /v1/openapi.yaml`: the same file the handlers are
/// generated from, shipped as this module's resource.
public enum CourierAPIDocument {
    public static let yaml: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
            let data = try? Data(contentsOf: url)
        else {
            return Array("# The OpenAPI document was not installed beside the server binary.\n".utf8)
        }
        return Array(data)
    }()
}
