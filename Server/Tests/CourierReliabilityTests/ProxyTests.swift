// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// A server behind Debian's nginx, configured as docs/deployment.md says: every connection reaches the server from
/// nginx's address, and the client's own comes in `X-Forwarded-For`. With `--trusted-proxies` naming nginx, the failed
/// connect throttle counts each client by its own address; without it, one client's bad tokens refuse everyone.
@Suite("Behind nginx", .timeLimit(.minutes(3)))
struct ProxyTests {
    @Test(
        "behind the documented nginx one client's bad tokens throttle that client, not another; the log names the client",
        arguments: [true, false]
    )
    func throttlePerClient(trusted: Bool) async throws {
        let nginx = try #require(
            Binaries.which("nginx") ?? ["/usr/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "nginx is installed (apt-get install nginx)"
        )
        let arguments = ["--failed-connects-per-minute", "3"] + (trusted ? ["--trusted-proxies", "127.0.0.1/32"] : [])
        let server = try ServerProcess(.init(binary: Binaries.courierServer, arguments: arguments, logLevel: "info"), secret: Binaries.secret)
        defer { _ = server.stop() }
        try await server.register(["mallory", "bob"])
        let proxy = try await Nginx.start(nginx, upstreamPort: server.port)
        defer { proxy.stop() }

        // mallory, from 127.0.0.2: five tokens it cannot sign. The limit is 3 a minute: the first three are refused
        // as invalid and counted, the rest already throttled; the count (5) stays past the limit for a while even if
        // a minute turns meanwhile (the window slides).
        let mallory = try RawSocket(port: proxy.port, from: "127.0.0.2")
        #expect(await mallory.upgrade())
        for attempt in 1...5 {
            await mallory.send(Self.connect("c\(attempt)", token: "not.a.token", account: "mallory"))
        }
        let (refusals, _) = await mallory.receive(until: #""id":"c5""#, timeout: .seconds(30))
        #expect(refusals.contains("auth.invalidToken") && refusals.contains("auth.throttled"), "\(refusals)")

        // Now mallory is throttled, even with a good token.
        let again = try RawSocket(port: proxy.port, from: "127.0.0.2")
        #expect(await again.upgrade())
        await again.send(Self.connect("m", token: try await Binaries.token(for: "mallory"), account: "mallory"))
        let (throttled, _) = await again.receive(until: #""id":"m""#, timeout: .seconds(30))
        #expect(throttled.contains("auth.throttled"))

        // bob, from 127.0.0.3, with his good token: only a server that knows the client's address lets him in.
        let bob = try RawSocket(port: proxy.port, from: "127.0.0.3")
        #expect(await bob.upgrade())
        await bob.send(Self.connect("b", token: try await Binaries.token(for: "bob"), account: "bob"))
        let (answer, _) = await bob.receive(until: #""id":"b""#, timeout: .seconds(30))
        if trusted {
            #expect(answer.contains(#""type":"ack""#) && !answer.contains("auth.throttled"), "\(answer)")
            let log = try String(contentsOfFile: server.folder! + "/server.log", encoding: .utf8)
            let lines = log.split(separator: "\n")
            #expect(lines.contains { $0.contains("Connect refused") && $0.contains("courier.client=127.0.0.2") })
            #expect(lines.contains { $0.contains("Client throttled") && $0.contains("courier.client=127.0.0.2") })
            #expect(!lines.contains { $0.contains("Connect refused") && !$0.contains("courier.client=127.0.0.2") })
        } else {
            // Every client is nginx's 127.0.0.1: mallory's failures refuse bob too.
            #expect(answer.contains("auth.throttled"), "\(answer)")
        }
    }

    @Test("behind the documented nginx: a key made with courier-server keys acts from its client's address, in the audit row; one client's wrong credentials throttle that client alone")
    func restBehindTheProxy() async throws {
        let nginx = try #require(
            Binaries.which("nginx") ?? ["/usr/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "nginx is installed (apt-get install nginx)"
        )
        let arguments = ["--failed-connects-per-minute", "3", "--trusted-proxies", "127.0.0.1/32"]
        let server = try ServerProcess(.init(binary: Binaries.courierServer, arguments: arguments, logLevel: "info"), secret: Binaries.secret)
        defer { _ = server.stop() }
        try await server.register(["alice"])
        let proxy = try await Nginx.start(nginx, upstreamPort: server.port)
        defer { proxy.stop() }

        // A moderation key, made as an operator would: the command, with the app secret it reads from the setting.
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_APP_SECRET"] = Binaries.secret
        let command = try ChildProcess(
            Binaries.courierServer,
            ["keys", "create", "--name", "moderator", "--scope", "moderation", "--server", "http://127.0.0.1:\(server.port)"],
            environment: environment,
            captureOutput: true
        )
        let credential = command.readToEnd().trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(command.wait() == 0)
        #expect(credential.hasPrefix("ck_"))

        // From 127.0.0.4 through nginx: deactivate alice with the key; the audit row names that client.
        let deactivated = try await Self.http(proxy.port, from: "127.0.0.4", "POST", "/v1/accounts/alice/deactivate", credential: credential, requestID: "through-nginx")
        #expect(deactivated.hasPrefix("HTTP/1.1 200"), "\(deactivated.prefix(300))")
        let audit = try await Self.http(proxy.port, from: "127.0.0.4", "GET", "/v1/audit?action=deactivateAccount", credential: Binaries.secret)
        #expect(audit.contains(#""clientAddress":"127.0.0.4""#) && audit.contains(#""requestId":"through-nginx""#), "\(audit.suffix(600))")
        #expect(audit.contains(#""credential":"\#(credential.split(separator: "_")[1])""#))
        // The key cannot mint tokens: it has no `accounts` scope.
        let minted = try await Self.http(proxy.port, from: "127.0.0.4", "POST", "/v1/accounts/alice/tokens", credential: credential, body: "{}")
        #expect(minted.hasPrefix("HTTP/1.1 403") && minted.contains("auth.scopeMissing"))

        // mallory guesses the app secret: throttled after three, while another client with the secret still passes.
        // The window slides over the wall clock's minutes: three failures count 3 until a minute turns and less at
        // once after, so a round that a turn crossed proves nothing and is done again from another address (a round
        // takes seconds: two in a row are not both crossed).
        var mallory = ""
        for address in ["127.0.0.2", "127.0.0.5"] {
            mallory = address
            let minute = Self.wallClockMinute()
            for _ in 0..<3 {
                let guess = try await Self.http(proxy.port, from: address, "GET", "/v1/accounts", credential: "guess")
                #expect(guess.hasPrefix("HTTP/1.1 401"))
            }
            let throttled = try await Self.http(proxy.port, from: address, "GET", "/v1/accounts", credential: Binaries.secret)
            if Self.wallClockMinute() != minute, address == "127.0.0.2" { continue }
            #expect(throttled.hasPrefix("HTTP/1.1 429") && throttled.contains("auth.throttled") && throttled.lowercased().contains("retry-after:"))
            break
        }
        let other = try await Self.http(proxy.port, from: "127.0.0.3", "GET", "/v1/accounts", credential: Binaries.secret)
        #expect(other.hasPrefix("HTTP/1.1 200"), "\(other.prefix(300))")
        let log = try String(contentsOfFile: server.folder! + "/server.log", encoding: .utf8)
        #expect(log.split(separator: "\n").contains { $0.contains("REST credential refused") && $0.contains("courier.client=\(mallory)") })
    }

    /// The wall clock's minute, as the failed-credential throttle counts them.
    static func wallClockMinute() -> Int64 { Int64(Date().timeIntervalSince1970 / 60) }

    @Test("TLS at the proxy, as the recipe has it: the backend calls https:// and a device connects with wss://, both verifying the certificate; a client that does not trust it gets nothing")
    func tlsAtTheProxy() async throws {
        let nginx = try #require(
            Binaries.which("nginx") ?? ["/usr/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "nginx is installed (apt-get install nginx)"
        )
        let openssl = try #require(Binaries.which("openssl"), "openssl is installed")
        let folder = try TemporaryFolder()
        let (certificate, key) = (folder.path + "/cert.pem", folder.path + "/key.pem")
        let made = try ChildProcess(openssl, [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", certificate,
        ])
        #expect(made.wait() == 0)
        let server = try ServerProcess(.init(binary: Binaries.courierServer, arguments: ["--trusted-proxies", "127.0.0.1/32"]), secret: Binaries.secret)
        defer { _ = server.stop() }
        try await server.register(["alice"])
        let proxy = try await Nginx.start(nginx, upstreamPort: server.port, tls: (certificate, key))
        defer { proxy.stop() }

        // An off-the-shelf TLS client (Python's ssl module) that checks the certificate and the address it names.
        let script = #"""
            import json, os, socket, ssl, sys
            port, cafile, secret, connect = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
            def tls(context):
                raw = socket.create_connection(("127.0.0.1", port), timeout=20)
                return context.wrap_socket(raw, server_hostname="127.0.0.1")
            trusted = ssl.create_default_context(cafile=cafile)
            s = tls(trusted)
            s.sendall(("GET /v1/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % secret).encode())
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                answer += chunk
            print(json.dumps({"https": answer.split(b"\r\n")[0].decode(), "version": s.version()}))
            s = tls(trusted)
            s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head: head += s.recv(1)
            frame = connect.encode()
            mask = os.urandom(4)
            s.sendall(bytes([0x81, 0x80 | 126]) + len(frame).to_bytes(2, "big") + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(frame)))
            first = s.recv(2)
            length = first[1] & 0x7F
            if length == 126: length = int.from_bytes(s.recv(2), "big")
            payload = b""
            while len(payload) < length: payload += s.recv(length - len(payload))
            print(json.dumps({"upgrade": head.split(b"\r\n")[0].decode(), "answer": json.loads(payload)["type"]}))
            try:
                tls(ssl.create_default_context())
                print(json.dumps({"untrusted": "accepted"}))
            except ssl.SSLCertVerificationError as error:
                print(json.dumps({"untrusted": "refused"}))
            """#
        let python = try #require(Binaries.which("python3"))
        let connectFrame = try FrameCoder().encode(
            ClientFrame.connect("c", ConnectRequest(token: try await Binaries.token(for: "alice"), account: "alice", device: "d"))
        )
        let client = try ChildProcess(
            python,
            ["-c", script, String(proxy.port), certificate, Binaries.secret, connectFrame],
            captureOutput: true,
            errorFile: folder.path + "/python.stderr"
        )
        let lines = client.readToEnd().split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
        }
        #expect(client.wait() == 0, "\((try? String(contentsOfFile: folder.path + "/python.stderr", encoding: .utf8)) ?? "")")
        #expect(lines.count == 3)
        #expect(lines.first?["https"] == "HTTP/1.1 200 OK" && lines.first?["version"]?.hasPrefix("TLSv1.") == true)
        #expect(lines.dropFirst().first?["upgrade"] == "HTTP/1.1 101 Switching Protocols")
        #expect(lines.dropFirst().first?["answer"] == "ack")
        #expect(lines.last?["untrusted"] == "refused")
    }

    /// One HTTP/1.1 request from `source` to nginx; the whole answer, head and body.
    static func http(
        _ port: Int,
        from source: String,
        _ method: String,
        _ path: String,
        credential: String,
        body: String = "",
        requestID: String? = nil
    ) async throws -> String {
        let socket = try RawSocket(port: port, from: source)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: chat.example.com\r\nAuthorization: Bearer \(credential)\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if let requestID { head += "X-Request-Id: \(requestID)\r\n" }
        #expect(await socket.send(head + "\r\n" + body))
        // `Connection: close`: the answer ends when nginx closes.
        return String(decoding: await socket.receive(timeout: .seconds(20)).bytes, as: UTF8.self)
    }

    static func connect(_ id: String, token: String, account: AccountID) -> [UInt8] {
        let frame = ClientFrame.connect(RequestID(rawValue: id), ConnectRequest(token: token, account: account, device: "d"))
        let text = (try? FrameCoder().encode(frame)) ?? ""
        return RawSocket.frame(opcode: 0x1, payload: Array(text.utf8))
    }
}

/// Debian's nginx in the foreground, with its own prefix folder, proxying to one node as docs/deployment.md's recipe
/// does (its `location /v1/ws` and `location /` blocks), in plain HTTP or with TLS.
struct Nginx {
    let port: Int
    let folder: String
    let process: ChildProcess

    /// nginx listening on `port`, with TLS when `tls` names a certificate and its key (PEM files), as the recipe's
    /// `listen 443 ssl` server does.
    static func start(_ binary: String, upstreamPort: Int, tls: (certificate: String, key: String)? = nil) async throws -> Nginx {
        let folder = NSTemporaryDirectory() + "courier-nginx-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder + "/logs", withIntermediateDirectories: true)
        let port = try await freePort()
        let listen = tls.map {
            """
            listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \($0.certificate);
                    ssl_certificate_key \($0.key);
                    ssl_protocols TLSv1.2 TLSv1.3;
            """
        } ?? "listen 127.0.0.1:\(port);"
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(folder)/nginx.pid;
            error_log \(folder)/logs/error.log warn;
            events { worker_connections 256; }
            http {
                access_log off;
                client_body_temp_path \(folder)/body;
                proxy_temp_path \(folder)/proxy;
                fastcgi_temp_path \(folder)/fastcgi;
                uwsgi_temp_path \(folder)/uwsgi;
                scgi_temp_path \(folder)/scgi;
                upstream courier {
                    server 127.0.0.1:\(upstreamPort) max_fails=1 fail_timeout=5s;
                }
                map $http_upgrade $connection_upgrade { default upgrade; '' close; }
                server {
                    \(listen)
                    location /v1/ws {
                        proxy_pass http://courier;
                        proxy_http_version 1.1;
                        proxy_set_header Upgrade $http_upgrade;
                        proxy_set_header Connection $connection_upgrade;
                        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                        proxy_read_timeout 120s;
                        proxy_buffering off;
                        tcp_nodelay on;
                    }
                    location / {
                        proxy_pass http://courier;
                        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                    }
                }
            }
            """
        try configuration.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            binary,
            ["-p", folder, "-c", folder + "/nginx.conf"],
            errorFile: folder + "/logs/stderr.log"
        )
        // nginx says nothing when it listens: its port answering is the sign (10 s at most).
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? RawSocket(port: port)) == nil {
            guard ContinuousClock.now < deadline else {
                process.signal(SIGKILL)
                _ = process.wait()
                let log = (try? String(contentsOfFile: folder + "/logs/error.log", encoding: .utf8)) ?? ""
                throw HarnessError.refused("nginx did not listen on \(port): \(log.suffix(800))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Nginx(port: port, folder: folder, process: process)
    }

    func stop() {
        process.signal(SIGTERM)
        _ = process.wait()
        try? FileManager.default.removeItem(atPath: folder)
    }
}
