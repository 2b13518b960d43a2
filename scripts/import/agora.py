#!/usr/bin/env python3
"""Agora Chat history export → Courier history lines (docs/import.md, docs/import-agora.md).

    python3 scripts/import/agora.py export.jsonl [more.jsonl.gz …] > history.jsonl
    python3 scripts/import/agora.py export.jsonl -o history.jsonl

An export is one or more files of JSON records (JSON Lines, a JSON array, gzip'd or not), in any order:

- the historical-message files that `GET /{org}/{app}/chatmessages/{yyyyMMddHH}` hands out, one message a line:
  `msg_id`, `timestamp`, `from`, `to`, `chat_type` (`chat`, `groupchat`, `chatroom`),
  `payload` {`bodies`: [{`type`: txt|img|audio|video|file|loc|custom|cmd|combine, …}], `ext`, `from`, `to`};
- post-delivery webhook (callback) records, which have the same fields, kept by your app server: `chat_type`
  `recall` (`recall_id`), `read_ack`, `channel_ack` and `delivery_ack` (`payload.ack_message_id`); message callbacks
  (`chat`, `groupchat`) are read as messages;
- the answer of `GET /{org}/{app}/chatgroups/{group_ids}` (group details: `data[].id`, `owner`, `created`,
  `affiliations`), for each group's owner and members.

Standard library only; the same input always gives the same bytes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import courier_lines as cl  # noqa: E402

VENDOR = "agora"

COURIER_TYPES = {"img": "image", "audio": "audio", "video": "video", "file": "file", "loc": "location",
                 "custom": "custom", "combine": "combine"}


def payload_of(record):
    payload = record.get("payload")
    if isinstance(payload, str):
        payload = cl.parse_json_object(payload)
    return payload if isinstance(payload, dict) else {}


def add_message(history, where, record, chat_type):
    payload = payload_of(record)
    sender = cl.first(payload, "from") or cl.first(record, "from")
    if chat_type == "groupchat":
        to, group = None, cl.first(record, "group_id") or cl.first(payload, "to") or cl.first(record, "to")
    else:
        to, group = cl.first(payload, "to") or cl.first(record, "to"), None
    bodies = payload.get("bodies")
    if not isinstance(bodies, list) or not bodies or not isinstance(bodies[0], dict):
        return history.skip("message without bodies", where)
    if len(bodies) > 1:
        history.note("message with more than one body: the first is kept")
    body_object = bodies[0]
    kind = body_object.get("type")
    if kind == "cmd":
        return history.skip("command (cmd) message: transient, not history", where)
    if kind == "txt":
        courier_type = None
        body = body_object.get("msg")
        body = body if isinstance(body, str) else cl.compact_json_text(body)
    else:
        courier_type = COURIER_TYPES.get(kind, kind) if isinstance(kind, str) else "custom"
        body = cl.dumps(body_object)
    raw_ext = payload.get("ext")
    ext = cl.flatten_ext(raw_ext, history.notes)
    reply_to = None
    quote = cl.parse_json_object(raw_ext.get("msgQuote")) if isinstance(raw_ext, dict) else None
    if quote is not None:
        reply_to = quote.get("msgID")
    config = payload.get("msg_config") if isinstance(payload.get("msg_config"), dict) else {}
    needs_receipt = config.get("allow_group_ack") is True or payload.get("allow_group_ack") is True
    return history.add_message(where, record.get("msg_id"), sender, cl.to_millis(record.get("timestamp")), body,
                               to=to, group=group, type=courier_type, ext=ext, reply_to=reply_to,
                               needs_receipt=needs_receipt)


def add_groups(history, where, groups):
    for index, group in enumerate(groups):
        history.records += 1
        here = "%s data[%d]" % (where, index)
        if not isinstance(group, dict) or cl.text_id(group.get("id")) is None:
            history.skip("group details without an id", here)
            continue
        owner = group.get("owner")
        members = []
        affiliations = group.get("affiliations") if isinstance(group.get("affiliations"), list) else []
        for affiliation in affiliations:
            if isinstance(affiliation, dict):
                if affiliation.get("owner") not in (None, "") and owner in (None, ""):
                    owner = affiliation["owner"]
                members.extend(v for k, v in affiliation.items() if k in ("member", "owner", "admin"))
        history.group_info(group.get("id"), owner=owner, members=members,
                           created_at=cl.to_millis(group.get("created")))


def add_record(history, where, record):
    if isinstance(record, list):
        for index, item in enumerate(record):
            add_record(history, "%s[%d]" % (where, index), item)
        return
    if not isinstance(record, dict):
        history.records += 1
        return history.skip("record that is not a JSON object", where)
    if isinstance(record.get("data"), list) and "msg_id" not in record:
        return add_groups(history, where, record["data"])
    history.records += 1
    chat_type = record.get("chat_type")
    time = cl.to_millis(record.get("timestamp"))
    payload = payload_of(record)
    if chat_type in ("chat", "groupchat"):
        return add_message(history, where, record, chat_type)
    if chat_type == "chatroom":
        return history.skip("chat room message (Courier has no chat rooms)", where)
    if chat_type == "recall":
        target = cl.first(record, "recall_id") or cl.first(payload, "ack_message_id")
        return history.add_recall(where, target, record.get("from"), time, recall_id=record.get("msg_id"))
    if chat_type == "delivery_ack":
        # Deliveries are not imported: a device that syncs the history acknowledges it (docs/import.md).
        return history.skip("delivery receipt (a device's sync delivers imported history)", where)
    if chat_type in ("read_ack", "channel_ack"):
        kind = "read"
        # channel_ack reads the whole conversation: when its message is not in the export, everything up to the
        # ack's time in the conversation with `to` counts as read.
        up_to_time = time if chat_type == "channel_ack" else None
        return history.add_position(where, kind, record.get("from"), time,
                                    message=cl.first(payload, "ack_message_id"), peer=record.get("to"),
                                    up_to_time=up_to_time)
    if chat_type in ("muc", "roster", "recall_ack") or chat_type is None and "eventType" in record:
        return history.skip("webhook event that is not a message, recall or receipt", where)
    return history.skip("record of an unknown shape", where)


def convert(history, documents, args):
    for where, document in documents:
        add_record(history, where, document)


def main(argv=None):
    return cl.run(VENDOR, "Convert an Agora Chat history export to Courier history lines.", convert, argv)


if __name__ == "__main__":
    sys.exit(main())
