// Courier — Apache-2.0

/// An S3-compatible bucket (AWS S3, MinIO, Ceph, moto…) and the keys to it, from the configuration.
public struct S3Settings: Sendable, Hashable {
    /// The service's address: `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`.
    public var endpoint: String
    public var bucket: String
    public var region: String
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Path-style addresses (`endpoint/bucket/key`, what MinIO and moto expect) rather than virtual-hosted ones
    /// (`bucket.endpoint/key`).
    public var pathStyle: Bool

    public init(
        endpoint: String,
        bucket: String,
        region: String,
        accessKeyID: String,
        secretAccessKey: String,
        pathStyle: Bool = true
    ) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.pathStyle = pathStyle
    }
}
