#!/usr/bin/env python3
"""NetEase Yunxin NIM (网易云信) history export → Courier history lines (docs/import.md, docs/import-nim.md).

    python3 scripts/import/nim.py export.json [more.json …] > history.jsonl
    python3 scripts/import/nim.py export.json -o history.jsonl

An export is what NIM's server API answers, kept as JSON (one document, an array of documents, or JSON Lines):

- history queries (`history/querySessionMsg.action`, `history/queryTeamMsg.action`,
  `superteam/queryHistoryMsg.action`): `{"code":200,"size":N,"msgs":[…]}`. The answer does not name its conversation,
  so keep each one with the form parameters you posted: `{"request":{"from":…,"to":…},"response":{…}}` (one-to-one)
  or `{"request":{"tid":…,"accid":…},"response":{…}}` (team). A message that carries `to` and `ope` (0 one-to-one,
  1 team) or `convType` needs no request;
- team lists (`team/query.action`): `{"code":200,"tinfos":[{"tid","owner","admins","members","createtime",…}]}`;
- message copies (消息抄送, `eventType` "1"): one message each, with `convType`, `fromAccount`, `to`, `msgType`,
  `msgTimestamp`, `msgidServer`, `body`, `attach`, `ext`;
- recalls: NIM's history drops a recalled message, so a recall is only known from a record of it, shaped like the
  recall API's parameters (`msg/recall.action`): `{"deleteMsgid","from","to","type":7|8,"timetag"}` (plus `time`,
  when it was recalled, if you kept it).

Standard library only; the same input always gives the same bytes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import courier_lines as cl  # noqa: E402

VENDOR = "nim"

# NIM message types (the `type` of history messages, the `msgType` of message copies) → Courier types.
TYPE_NAMES = {"TEXT": 0, "PICTURE": 1, "AUDIO": 2, "VIDEO": 3, "LOCATION": 4, "NOTIFICATION": 5, "FILE": 6,
              "TIPS": 10, "ROBOT": 11, "CUSTOM": 100}
COURIER_TYPES = {1: "image", 2: "audio", 3: "video", 4: "location", 6: "file", 10: "tip", 11: "robot",
                 100: "custom"}

# Team notifications (type 5, attach {"id": N, "data": {…}}) that change membership.
TEAM_INVITE, TEAM_KICK, TEAM_LEAVE, TEAM_DISMISS, TEAM_PASS_APPLY, TEAM_TRANSFER, TEAM_ADD_MANAGER, \
    TEAM_REMOVE_MANAGER, TEAM_ACCEPT_INVITE = 0, 1, 2, 4, 5, 6, 7, 8, 9


def message_type(record):
    value = cl.first(record, "type", "msgType")
    if isinstance(value, str):
        if value.strip().isdigit():
            return int(value)
        return TYPE_NAMES.get(value.strip().upper(), value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return 0 if value is None else None


def conversation(record, context):
    """(to, group) of a message: from the message itself, else from the query it answered."""
    to = cl.text_id(cl.first(record, "to"))
    conv_type = cl.first(record, "convType")
    if isinstance(conv_type, str):
        conv_type = conv_type.upper()
        if conv_type == "PERSON":
            return to, None
        if conv_type in ("TEAM", "SUPER_TEAM"):
            return None, to
        return "unsupported", None
    ope = cl.first(record, "ope")
    if ope is not None and to is not None:
        if str(ope) == "0":
            return to, None
        if str(ope) == "1":
            return None, to
    tid = cl.text_id(cl.first(context, "tid"))
    if tid is not None:
        return None, tid
    sender = cl.text_id(cl.first(record, "from", "fromAccount"))
    a, b = cl.text_id(cl.first(context, "from")), cl.text_id(cl.first(context, "to"))
    if a is not None and b is not None:
        return (b if sender == a else a), None
    return None, None


def team_notification(history, where, record, msg_id, sender, group, time):
    attach = cl.parse_json_object(cl.first(record, "attach")) or cl.parse_json_object(cl.first(record, "body")) or {}
    op = attach.get("id")
    data = attach.get("data") if isinstance(attach.get("data"), dict) else {}
    tinfo = data.get("tinfo") if isinstance(data.get("tinfo"), dict) else {}
    if tinfo.get("owner") is not None:
        history.group_info(group, owner=tinfo.get("owner"))
    ids = data.get("ids") if isinstance(data.get("ids"), list) else (
        [data["id"]] if data.get("id") not in (None, "") else [])
    op = int(op) if isinstance(op, (int, str)) and str(op).isdigit() else None
    if op == TEAM_INVITE:
        return history.add_group_change(where, msg_id, group, "added", sender, time, ids)
    if op in (TEAM_PASS_APPLY, TEAM_ACCEPT_INVITE):
        # The joiner is named in the notification; the change is written as made by the team's owner when the
        # export names one (Courier's rules: only an owner or an admin adds), else by the notification's sender.
        change = history.add_group_change(where, msg_id, group, "added", sender, time, ids or [sender])
        if change is not None:
            history.joins.append(change)
        return change
    if op == TEAM_KICK:
        return history.add_group_change(where, msg_id, group, "removed", sender, time, ids)
    if op == TEAM_LEAVE:
        return history.add_group_change(where, msg_id, group, "left", sender, time)
    if op == TEAM_DISMISS:
        return history.add_group_change(where, msg_id, group, "dismissed", sender, time)
    if op == TEAM_TRANSFER:
        return history.add_group_change(where, msg_id, group, "ownerTransferred", sender, time, ids[:1])
    if op in (TEAM_ADD_MANAGER, TEAM_REMOVE_MANAGER):
        role = "admin" if op == TEAM_ADD_MANAGER else "member"
        return history.add_group_change(where, msg_id, group, "roleChanged", sender, time, ids, role=role)
    return history.skip("team notification that is not a membership change", where)


def add_message(history, where, record, context):
    history.records += 1
    msg_id = cl.first(record, "msgid", "msgidServer", "msgIdServer", "msgidclient", "msgidClient", "msgIdClient")
    sender = cl.first(record, "from", "fromAccount")
    time = cl.to_millis(cl.first(record, "sendtime", "msgTimestamp", "time"))
    to, group = conversation(record, context)
    if to == "unsupported":
        return history.skip("message of a conversation type Courier does not keep (chat room, custom notification)",
                            where)
    kind = message_type(record)
    if kind == 5:
        if group is None:
            return history.skip("notification outside a team", where)
        return team_notification(history, where, record, msg_id, sender, cl.text_id(group), time)
    body_value = record.get("body")
    attach_value = record.get("attach")
    if kind == 0:
        courier_type = None
        body = body_value if isinstance(body_value, str) else cl.compact_json_text(body_value)
    elif kind == 10:
        courier_type = "tip"
        body = body_value if isinstance(body_value, str) else cl.compact_json_text(body_value)
    else:
        if isinstance(kind, int):
            courier_type = COURIER_TYPES.get(kind, "nim:%d" % kind)
        else:
            courier_type = "custom" if kind is None else str(kind)
        body = cl.compact_json_text(attach_value if attach_value not in (None, "") else body_value)
    ext = cl.flatten_ext(cl.first(record, "ext", "remoteExt"), history.notes)
    reply_to = cl.first(record, "replyMsgIdServer")
    if reply_to in (0, "0"):
        reply_to = None
    if reply_to is None and cl.first(record, "replyMsgIdClient") is not None:
        reply_to = ("client", cl.text_id(record["replyMsgIdClient"]))
    message = history.add_message(where, msg_id, sender, time, body, to=to, group=group, type=courier_type, ext=ext,
                                  reply_to=None)
    if message is not None:
        client_id = cl.text_id(cl.first(record, "msgidclient", "msgidClient", "msgIdClient"))
        if client_id is not None:
            history.client_ids.setdefault(client_id, message.id)
        history.pending_replies.append((message, reply_to))
    return message


def add_recall(history, where, record):
    history.records += 1
    message_id = cl.first(record, "deleteMsgid", "msgidServer", "msgid")
    by = cl.first(record, "operator", "operatorAccount", "fromAccount", "from")
    time = cl.to_millis(cl.first(record, "time", "recallTime", "msgTimestamp", "timetag"))
    return history.add_recall(where, message_id, by, time)


def add_teams(history, where, response):
    teams = response.get("tinfos")
    if not isinstance(teams, list):
        return history.skip("team list without tinfos", where)
    for index, team in enumerate(teams):
        history.records += 1
        if not isinstance(team, dict) or cl.text_id(team.get("tid")) is None:
            history.skip("team without a tid", "%s tinfos[%d]" % (where, index))
            continue
        members = team.get("members") if isinstance(team.get("members"), list) else []
        admins = team.get("admins") if isinstance(team.get("admins"), list) else []
        history.group_info(team.get("tid"), owner=team.get("owner"), members=members, admins=admins,
                           created_at=cl.to_millis(cl.first(team, "createtime", "createTime")))


def add_response(history, where, response, request):
    code = response.get("code")
    if code is not None and str(code) != "200":
        history.records += 1
        return history.skip("API answer that is an error (code other than 200)", where)
    if "tinfos" in response:
        return add_teams(history, where, response)
    msgs = response.get("msgs")
    if isinstance(msgs, str):
        try:
            msgs = cl.loads(msgs)
        except ValueError:
            msgs = None
    if not isinstance(msgs, list):
        history.records += 1
        return history.skip("history answer without msgs", where)
    context = dict(request or {})
    if response.get("tid") is not None and "tid" not in context:
        context["tid"] = response["tid"]
    for index, record in enumerate(msgs):
        if isinstance(record, dict):
            add_message(history, "%s msgs[%d]" % (where, index), record, context)
        else:
            history.records += 1
            history.skip("message that is not a JSON object", "%s msgs[%d]" % (where, index))


def walk(history, where, document):
    if isinstance(document, list):
        for index, item in enumerate(document):
            walk(history, "%s[%d]" % (where, index), item)
        return
    if not isinstance(document, dict):
        history.records += 1
        return history.skip("record that is not a JSON object", where)
    if isinstance(document.get("response"), dict):
        request = cl.first(document, "request", "params", "query")
        return add_response(history, where, document["response"], request if isinstance(request, dict) else {})
    if "msgs" in document or "tinfos" in document:
        request = document.get("request")
        return add_response(history, where, document, request if isinstance(request, dict) else {})
    if "deleteMsgid" in document or str(document.get("eventType")) in ("7", "8"):
        return add_recall(history, where, document)
    if "eventType" in document:
        if str(document.get("eventType")) == "1":
            return add_message(history, where, document, {})
        history.records += 1
        return history.skip("message copy (抄送) that is not a message or a recall", where)
    if cl.first(document, "from", "fromAccount") is not None and \
            cl.first(document, "msgid", "msgidServer", "msgidclient", "msgidClient") is not None:
        return add_message(history, where, document, {})
    history.records += 1
    return history.skip("record of an unknown shape", where)


def finish(history):
    """Once every export is read: a reply names its original by server id (replyMsgIdServer) or by client id; a
    join is made by the team's owner."""
    for message, reply_to in history.pending_replies:
        if isinstance(reply_to, tuple):
            reply_to = history.client_ids.get(reply_to[1])
        message.reply_to = cl.text_id(reply_to)
    for change in history.joins:
        owner = history.groups[change.group].owner if change.group in history.groups else None
        if owner is not None:
            change.by = owner


def convert(history, documents, args):
    if not hasattr(history, "client_ids"):
        history.client_ids = {}
        history.pending_replies = []
        history.joins = []
        history.finishers.append(finish)
    for where, document in documents:
        walk(history, where, document)


def main(argv=None):
    return cl.run(VENDOR, "Convert a NetEase Yunxin NIM history export to Courier history lines.", convert, argv)


if __name__ == "__main__":
    sys.exit(main())
