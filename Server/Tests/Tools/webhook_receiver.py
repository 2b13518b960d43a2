#!/usr/bin/env python3
"""A webhook receiver for Courier's tests: verifies every delivery with the Standard Webhooks reference library
(`standardwebhooks` on PyPI, a verifier Courier did not write) and prints one JSON line per request to stdout.

    webhook_receiver.py PORT SECRET [SECRET...]

PORT 0 picks a free port. The first line printed is `listening PORT`. A delivery is verified against each SECRET
(a rotation has two); a verified one is answered 204 and printed as {"verified": true, "id", "type", "payload",
"signatures"}; one that fails every secret is answered 400 and printed as {"verified": false, "error"}.
With RECEIVER_PATH=/p only deliveries to that path are verified and reported (others get 404). With FAIL_STATUS=N in
the environment every delivery is answered N after it is verified (a receiver that is up but
failing).
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRETS = sys.argv[2:]
FAIL_STATUS = int(os.environ.get("FAIL_STATUS", "0"))
# Deliveries to another path are someone else's (a server of another test that once had this port): 404, unreported.
RECEIVER_PATH = os.environ.get("RECEIVER_PATH")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        if len(body) < length:
            # The sender went away mid-request (a server killed while it sent): no delivery, nothing to answer.
            self.close_connection = True
            return
        if RECEIVER_PATH and self.path != RECEIVER_PATH:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified = None
        errors = []
        for secret in SECRETS:
            try:
                verified = Webhook(secret).verify(body, headers)
                break
            except WebhookVerificationError as error:
                errors.append(str(error))
        if verified is None:
            line = {"verified": False, "error": "; ".join(errors), "id": headers.get("webhook-id")}
            status = 400
        else:
            line = {
                "verified": True,
                "id": headers.get("webhook-id"),
                "type": verified.get("type"),
                "payload": verified,
                "signatures": len(headers.get("webhook-signature", "").split(" ")),
            }
            status = FAIL_STATUS or 204
        line["status"] = status
        # One line at a time: handler threads writing at once would interleave long lines.
        with OUTPUT:
            sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
            sys.stdout.flush()
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


OUTPUT = threading.Lock()
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
sys.stdout.write("listening %d\n" % server.server_address[1])
sys.stdout.flush()
server.serve_forever()
