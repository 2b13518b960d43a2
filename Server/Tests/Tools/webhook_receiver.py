#!/usr/bin/env python3
"""A webhook receiver for Courier's tests: verifies every delivery with the Standard Webhooks reference library
(`standardwebhooks` on PyPI, a verifier Courier did not write) and prints one JSON line per request to stdout.

    webhook_receiver.py PORT SECRET [SECRET...]

PORT 0 picks a free port. The first line printed is `listening PORT`. A delivery is verified against each SECRET
(a rotation has two); a verified one is answered 204 and printed as {"verified": true, "id", "type", "payload",
"signatures", "verified_by"} (the indexes of the secrets it verifies with); one that fails every secret is answered
400 and printed as {"verified": false, "error"}. With SECRETS_FILE=PATH the secrets in that file (one a line, read
again for every delivery) come after those given as arguments, so a test can hand the receiver a rotated secret.
With RECEIVER_PATH=/p only deliveries to that path are verified and reported (others get 404). With FAIL_STATUS=N in
the environment every delivery is answered N after it is verified (a receiver that is up but
failing); with FAIL_FIRST=N only the first N verified deliveries are. A batch (an endpoint with `batch`: the body is
a JSON array of events, each with its `id`) is printed with "batch": the events, and no "type" or "payload". With HOLD_FILE=PATH every delivery is reported when it arrives, with "held" true if that file did not exist then,
and answered only once it exists (an endpoint that is slow to answer, until the test lets it go). With
HOLD_REPEATS_FILE=PATH the same, but only for a delivery whose `webhook-id` came before (a retry), "held" reported on
those only. With CLOCK_FILE=PATH the receiver's clock is ahead of the machine's by the milliseconds that file holds
(read again for every delivery): it keeps time with a server whose clock a test moves, so the library's check that
a signature is recent holds at the server's time.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks.webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRETS = sys.argv[2:]
FAIL_STATUS = int(os.environ.get("FAIL_STATUS", "0"))
FAIL_FIRST = int(os.environ.get("FAIL_FIRST", "0"))
failed_first = 0
# Deliveries to another path are someone else's (a server of another test that once had this port): 404, unreported.
RECEIVER_PATH = os.environ.get("RECEIVER_PATH")
SECRETS_FILE = os.environ.get("SECRETS_FILE")
HOLD_FILE = os.environ.get("HOLD_FILE")
HOLD_REPEATS_FILE = os.environ.get("HOLD_REPEATS_FILE")
CLOCK_FILE = os.environ.get("CLOCK_FILE")
seen_ids = set()

if CLOCK_FILE:
    class ServerTime(standardwebhooks.webhooks.datetime):
        """The clock the library checks a signature's timestamp against: the machine's plus the test's skew."""

        @classmethod
        def now(cls, tz=None):
            with open(CLOCK_FILE) as file:
                skew = int(file.read().strip() or "0")
            return super().now(tz) + standardwebhooks.webhooks.timedelta(milliseconds=skew)

    standardwebhooks.webhooks.datetime = ServerTime


def secrets():
    if not SECRETS_FILE:
        return SECRETS
    with open(SECRETS_FILE) as file:
        return SECRETS + [line.strip() for line in file if line.strip()]


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
        verified_by = []
        errors = []
        for index, secret in enumerate(secrets()):
            try:
                verified = Webhook(secret).verify(body, headers)
                verified_by.append(index)
            except WebhookVerificationError as error:
                errors.append(str(error))
        if verified is None:
            line = {"verified": False, "error": "; ".join(errors), "id": headers.get("webhook-id")}
            status = 400
        else:
            line = {
                "verified": True,
                "id": headers.get("webhook-id"),
                "signatures": len(headers.get("webhook-signature", "").split(" ")),
                "verified_by": verified_by,
            }
            if isinstance(verified, list):
                line["batch"] = verified
            else:
                line["type"] = verified.get("type")
                line["payload"] = verified
            status = FAIL_STATUS or 204
            global failed_first
            with OUTPUT:
                if failed_first < FAIL_FIRST:
                    failed_first += 1
                    status = 503
        line["status"] = status
        hold = HOLD_FILE
        with OUTPUT:
            if HOLD_REPEATS_FILE and headers.get("webhook-id") in seen_ids:
                hold = HOLD_REPEATS_FILE
            seen_ids.add(headers.get("webhook-id"))
        if hold:
            line["held"] = not os.path.exists(hold)
        # One line at a time: handler threads writing at once would interleave long lines.
        with OUTPUT:
            sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
            sys.stdout.flush()
        while hold and not os.path.exists(hold):
            time.sleep(0.01)
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
