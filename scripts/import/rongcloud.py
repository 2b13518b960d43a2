#!/usr/bin/env python3
"""RongCloud (融云) history export → Courier history lines (docs/import.md, docs/import-rongcloud.md).

    python3 scripts/import/rongcloud.py 2024030109.txt [2024030110.gz …] > history.jsonl
    python3 scripts/import/rongcloud.py export.txt -o history.jsonl --tz +08:00

An export is the hourly history-message log files that `POST /message/history.json` (获取历史消息日志) hands out a
download address for — compressed or not — one message a line, each a JSON object:
`fromUserId`, `targetId`, `targetType` (1 one-to-one, 3 group; others are not kept), `GroupId`, `classname`
(RC:TxtMsg, RC:ImgMsg, …), `content` (the message content, an object), `dateTime` ("2024-03-01 09:00:00.123",
Beijing time unless --tz says otherwise), `msgUID`. A line may carry text before its `{`. Records of the message
routing webhook (全量消息路由: `fromUserId`, `toUserId`, `objectName`, `content` as a string, `channelType`
PERSON/GROUP, `msgTimestamp`, `msgUID`, `groupUserIds`) are read too.

Recalls are the recall commands (RC:RcCmd, `content.messageUId`) the log keeps; reads are RC:ReadNtf (one-to-one)
and RC:RRRspMsg (group receipts); RC:RRReqMsg asks a group message's receipts; RC:GrpNtf notifications give a
group's membership changes. Standard library only; the same input always gives the same bytes."""
import datetime
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import courier_lines as cl  # noqa: E402

VENDOR = "rongcloud"

COURIER_TYPES = {"RC:ImgMsg": "image", "RC:GIFMsg": "image", "RC:HQVCMsg": "audio", "RC:VcMsg": "audio",
                 "RC:SightMsg": "video", "RC:FileMsg": "file", "RC:LBSMsg": "location", "RC:CombineMsg": "combine",
                 "RC:CombineV2Msg": "combine", "RC:ImgTextMsg": "imageText"}
# Status and signalling messages, and notices a client makes for itself: not history.
NOT_HISTORY = {"RC:TypSts", "RC:CmdMsg", "RC:SRSMsg", "RC:RcNtf", "RC:MsgExMsg", "RC:CmdNtf", "RC:ProfileNtf",
               "RC:ContactNtf", "RC:InfoNtf", "RC:chrmKVNotiMsg", "RC:LogCmdMsg", "RC:DizNtf"}
PRIVATE, GROUP = "private", "group"
TARGET_TYPES = {1: PRIVATE, 3: GROUP}
CHANNEL_TYPES = {"PERSON": PRIVATE, "GROUP": GROUP}
GROUP_OPERATIONS = {"Create": "created", "Add": "added", "Quit": "left", "Kicked": "removed", "Dismiss": "dismissed"}
DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\Z")


def parse_offset(text):
    match = re.match(r"([+-])(\d{2}):?(\d{2})\Z", text)
    if not match:
        raise ValueError("--tz takes an offset like +08:00")
    sign = 1 if match.group(1) == "+" else -1
    return datetime.timezone(sign * datetime.timedelta(hours=int(match.group(2)), minutes=int(match.group(3))))


def record_time(record, zone):
    millis = cl.to_millis(cl.first(record, "msgTimestamp", "timestamp", "sentTime"))
    if millis is not None:
        return millis
    text = cl.first(record, "dateTime")
    if not isinstance(text, str):
        return None
    match = DATE_TIME.match(text.strip())
    if not match:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = (match.group(7) or "0").ljust(6, "0")
    try:
        moment = datetime.datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=zone)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000) if moment.microsecond == 0 else \
        int(moment.replace(microsecond=0).timestamp()) * 1000 + moment.microsecond // 1000


def add_record(history, where, record, zone):
    if isinstance(record, list):
        for index, item in enumerate(record):
            add_record(history, "%s[%d]" % (where, index), item, zone)
        return
    history.records += 1
    if not isinstance(record, dict):
        return history.skip("record that is not a JSON object", where)
    classname = cl.first(record, "classname", "objectName")
    if not isinstance(classname, str):
        return history.skip("message without a classname", where)
    sender = cl.first(record, "fromUserId")
    msg_uid = cl.first(record, "msgUID", "msgUid", "messageUId")
    time = record_time(record, zone)
    content = record.get("content")
    if isinstance(content, str):
        content = cl.parse_json_object(content) or content
    content = content if content is not None else {}

    kind = None
    target_type = cl.first(record, "targetType", "conversationType")
    if target_type is not None:
        kind = TARGET_TYPES.get(int(str(target_type))) if str(target_type).isdigit() else None
    elif cl.first(record, "channelType") is not None:
        kind = CHANNEL_TYPES.get(str(record["channelType"]).upper())
    else:
        return history.skip("record of an unknown shape (no targetType or channelType)", where)
    if kind is None:
        return history.skip("conversation type Courier does not keep (discussion, chat room, customer service, "
                            "system, public service, ultra group)", where)
    target = cl.first(record, "targetId", "toUserId")
    to, group = (target, None) if kind == PRIVATE else (None, cl.first(record, "GroupId", "groupId") or target)
    if kind == GROUP:
        # A group line may name one recipient (targetId other than GroupId), and a routed message its recipients.
        recipients = [target] if target not in (None, "") and cl.text_id(target) != cl.text_id(group) else []
        if isinstance(record.get("groupUserIds"), list):
            recipients += record["groupUserIds"]
        if recipients:
            history.group_info(group, members=recipients)

    if classname in NOT_HISTORY:
        return history.skip("status or notice message (%s): not history" % classname, where)
    if classname == "RC:RcCmd":
        target_uid = cl.first(content, "messageUId", "messageUID", "msgUID") if isinstance(content, dict) else None
        return history.add_recall(where, target_uid, sender, time, recall_id=msg_uid)
    if classname == "RC:ReadNtf":
        if kind != PRIVATE or not isinstance(content, dict):
            return history.skip("read notice outside a one-to-one conversation", where)
        return history.add_position(where, "read", sender, time, message=content.get("messageUId"), peer=to,
                                    up_to_time=cl.to_millis(content.get("lastMessageSendTime")))
    if classname == "RC:RRRspMsg":
        listed = content.get("receiptMessageDic") if isinstance(content, dict) else None
        listed = listed if isinstance(listed, dict) else {}
        uids = [uid for uids in listed.values() if isinstance(uids, list) for uid in uids]
        if kind != GROUP or not uids:
            return history.skip("group read receipt naming no message", where)
        history.receipt_reads.append((where, sender, group, time, [cl.text_id(u) for u in uids]))
        return None
    if classname == "RC:RRReqMsg":
        target_uid = content.get("messageUId") if isinstance(content, dict) else None
        if cl.text_id(target_uid) is None:
            return history.skip("read receipt request naming no message", where)
        history.receipt_requests.append(cl.text_id(target_uid))
        return None
    if classname == "RC:GrpNtf":
        return group_notification(history, where, msg_uid, sender, group, time, content)

    extra = content.get("extra") if isinstance(content, dict) else None
    ext_source = record.get("expansionDic") if isinstance(record.get("expansionDic"), dict) else None
    ext_value = dict(ext_source) if ext_source else {}
    if extra not in (None, ""):
        ext_value.setdefault("extra", extra)
    ext = cl.flatten_ext(ext_value or None, history.notes)
    reply_to = None
    if classname in ("RC:TxtMsg", "RC:ReferenceMsg"):
        courier_type = None
        body = content.get("content") if isinstance(content, dict) else content
        body = body if isinstance(body, str) else cl.compact_json_text(body)
        if classname == "RC:ReferenceMsg" and isinstance(content, dict):
            reply_to = cl.first(content, "referMsgUid", "referMsgUId", "referMsgUID")
            if reply_to is None:
                history.note("RC:ReferenceMsg without referMsgUid: written as text without replyTo")
    else:
        if classname in COURIER_TYPES:
            courier_type = COURIER_TYPES[classname]
        elif cl.is_type(classname):
            courier_type = classname  # an app's own message type (App:CardMsg …) keeps its name
        else:
            courier_type = "custom"
        body = cl.compact_json_text(content)
    return history.add_message(where, msg_uid, sender, time, body, to=to, group=group, type=courier_type, ext=ext,
                               reply_to=reply_to)


def group_notification(history, where, msg_uid, sender, group, time, content):
    if not isinstance(content, dict):
        return history.skip("group notification without content", where)
    operation = content.get("operation")
    action = GROUP_OPERATIONS.get(operation) if isinstance(operation, str) else None
    if action is None:
        return history.skip("group notification that is not a membership change (%s)" % operation, where)
    data = content.get("data")
    if isinstance(data, str):
        data = cl.parse_json_object(data)
    data = data if isinstance(data, dict) else {}
    operator = cl.first(content, "operatorUserId") or sender
    accounts = data.get("targetUserIds") if isinstance(data.get("targetUserIds"), list) else []
    operator_id = cl.text_id(operator)
    if action == "created":
        accounts = [a for a in accounts if cl.text_id(a) != operator_id]
        history.group_info(group, owner=operator)
    elif action in ("left", "dismissed"):
        accounts = []
    return history.add_group_change(where, msg_uid, group, action, operator, time, accounts)


def finish(history):
    """Once every file is read: receipt requests mark their messages; receipt responses become group reads up to
    the latest message they name."""
    wanted = set(history.receipt_requests)
    for message in history.messages:
        if message.id in wanted and message.group is not None:
            message.needs_receipt = True
    times = {m.id: (m.time, m.order) for m in history.messages}
    for where, reader, group, time, uids in history.receipt_reads:
        known = [u for u in uids if u in times]
        if not known:
            history.skip("group read receipt of messages not in the export", where)
            continue
        latest = max(known, key=lambda u: times[u])
        history.add_position(where, "read", reader, time, message=latest, group=group)


def convert(history, documents, args):
    if not hasattr(history, "receipt_reads"):
        history.receipt_reads = []
        history.receipt_requests = []
        history.finishers.append(finish)
    for where, document in documents:
        add_record(history, where, document, args.tz)


def add_arguments(parser):
    parser.add_argument("--tz", type=parse_offset, default=parse_offset("+08:00"), metavar="OFFSET",
                        help="the UTC offset of the log's dateTime (default +08:00, Beijing time)")


def main(argv=None):
    return cl.run(VENDOR, "Convert a RongCloud history-message log to Courier history lines.", convert, argv,
                  add_arguments)


if __name__ == "__main__":
    sys.exit(main())
