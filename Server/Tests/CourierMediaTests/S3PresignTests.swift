// Courier — Apache-2.0
@testable import CourierMedia
@testable import CourierServerCore
import Foundation
import Testing

/// The presigned URLs are AWS Signature Version 4: checked against the example AWS publishes for presigned GETs
/// ("Authenticating Requests: Using Query Parameters", Amazon S3 API reference), byte for byte.
@Suite("S3 presigned URLs")
struct S3PresignTests {
    @Test("AWS's published example: GET examplebucket/test.txt, 2013-05-24, 86,400 s")
    func awsExample() {
        let presigner = S3Presigner(
            settings: S3Settings(
                endpoint: "https://s3.amazonaws.com",
                bucket: "examplebucket",
                region: "us-east-1",
                accessKeyID: "AKIAIOSFODNN7EXAMPLE",
                secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                pathStyle: false
            )
        )
        let url = presigner.url("GET", key: "test.txt", expires: 86400, now: Date(timeIntervalSince1970: 1_369_353_600))
        #expect(
            url == "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                + "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                + "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                + "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        )
    }

    @Test("path-style addresses keep the endpoint's port in the signed host and encode the key")
    func pathStyle() {
        let presigner = S3Presigner(
            settings: S3Settings(
                endpoint: "http://127.0.0.1:9000", bucket: "media", region: "eu-west-1", accessKeyID: "k",
                secretAccessKey: "s"
            )
        )
        let url = presigner.url("PUT", key: "media/a b", expires: 60, now: Date(timeIntervalSince1970: 0))
        #expect(url.hasPrefix("http://127.0.0.1:9000/media/media/a%20b?X-Amz-Algorithm=AWS4-HMAC-SHA256"))
        #expect(url.contains("X-Amz-Credential=k%2F19700101%2Feu-west-1%2Fs3%2Faws4_request"))
    }
}
