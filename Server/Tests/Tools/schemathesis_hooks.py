"""schemathesis hooks for Courier's document (SCHEMATHESIS_HOOKS=schemathesis_hooks, this folder on PYTHONPATH).

`POST /v1/import` takes history lines (`application/x-ndjson`, docs/import.md), a media type schemathesis does not
generate by itself: chunks of valid lines, lines with one bad field, and arbitrary bytes.
"""
import json
import os

import schemathesis
from hypothesis import strategies as st

ids = st.from_regex(r"\A[a-z][a-z0-9]{0,7}\Z")
times = st.integers(min_value=0, max_value=2_000_000_000_000)


@st.composite
def history_lines(draw):
    sender, peer = draw(ids), draw(ids)
    lines = [{"kind": "account", "id": sender, "createdAt": draw(times)}]
    for index in range(draw(st.integers(min_value=0, max_value=5))):
        line = {"kind": "message", "id": "%s-%d" % (draw(ids), index), "from": sender, "to": peer,
                "time": draw(times), "body": draw(st.text(max_size=40))}
        lines.append(line)
    if len(lines) > 1 and draw(st.booleans()):
        lines.append({"kind": "read", "account": peer, "with": sender, "upTo": lines[-1]["id"], "time": draw(times)})
    if draw(st.booleans()):
        # One field with the wrong type: the chunk stops there with 400 import.invalidRecord.
        broken = dict(draw(st.sampled_from(lines)))
        broken["time"] = draw(st.one_of(st.text(max_size=5), st.none(), st.booleans()))
        lines.append(broken)
    return "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode()


schemathesis.openapi.media_type("application/x-ndjson", st.one_of(history_lines(), st.binary(max_size=512)))


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """The document's example (a string) and the strategy's bytes, sent as they are."""
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()


# Credentials (ADR 0048): with COURIER_KEYS set (a JSON object of scope → API key), each operation is called with a
# key that holds exactly one scope its `security` lists — `read` for a GET that takes it, the operation's room
# otherwise — and with the app secret (COURIER_APP_SECRET) only where no key may call it (keys, signing keys).
_keys = json.loads(os.environ.get("COURIER_KEYS", "{}"))
_secret = os.environ.get("COURIER_APP_SECRET", "")


def _credential(operation):
    scopes = [scope for alternative in operation.definition.raw.get("security", []) for scope in alternative.get("apiKey", [])]
    if "read" in scopes and "read" in _keys:
        return _keys["read"]
    for scope in scopes:
        if scope in _keys:
            return _keys[scope]
    return _secret


if _keys:
    @schemathesis.auth(refresh_interval=None)
    class CourierCredentials:
        def get(self, case, ctx):
            return _credential(case.operation)

        def set(self, case, data, ctx):
            case.headers = case.headers or {}
            case.headers["Authorization"] = "Bearer " + data
