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

    static func connect(_ id: String, token: String, account: AccountID) -> [UInt8] {
        let frame = ClientFrame.connect(RequestID(rawValue: id), ConnectRequest(token: token, account: account, device: "d"))
        let text = (try? FrameCoder().encode(frame)) ?? ""
        return RawSocket.frame(opcode: 0x1, payload: Array(text.utf8))
    }
}

/// Debian's nginx in the foreground, with its own prefix folder, proxying to one node as docs/deployment.md's recipe
/// does (its `location /v1/ws` and `location /` blocks, plain HTTP: TLS is not what is tested here).
struct Nginx {
    let port: Int
    let folder: String
    let process: ChildProcess

    static func start(_ binary: String, upstreamPort: Int) async throws -> Nginx {
        let folder = NSTemporaryDirectory() + "courier-nginx-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder + "/logs", withIntermediateDirectories: true)
        let port = try await freePort()
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
                    listen 127.0.0.1:\(port);
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
