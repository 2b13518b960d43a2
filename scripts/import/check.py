#!/usr/bin/env python3
"""Checks a file of Courier history lines against docs/import.md.

    python3 scripts/import/check.py history.jsonl [--max-body-bytes N]

Exit status 0 when every line is valid, 1 with the problems listed (line numbers first), 2 when the file cannot be
read. It checks each line's kind, fields, types and limits (ids, types, bodies, ext), and across lines: that every
entry id (message, membership change, recall notice) is unique; that each conversation's entries are in
non-decreasing time order; that a group's entries come after its `created` line (and there is one `created` per
group); that a reply's original is earlier in its conversation; that a read's or a recall's message
is earlier in the file, in the conversation the line names. Reads are positions, not entries: their
times are not part of the order check. Standard library only."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import courier_lines as cl  # noqa: E402

FIELDS = {
    "account": {"kind", "id", "createdAt"},
    "group": {"kind", "id", "group", "action", "by", "accounts", "role", "time"},
    "message": {"kind", "id", "from", "to", "group", "time", "type", "body", "ext", "replyTo", "needsReadReceipt"},
    "read": {"kind", "account", "with", "group", "upTo", "time", "private"},
    "recall": {"kind", "id", "message", "by", "time"},
}


def is_time(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_lines(lines, max_body_bytes=cl.MAX_BODY_BYTES):
    """Problems of an iterable of text lines, as a list of (line number, text)."""
    problems = []
    entries = {}  # entry id -> (line, kind, conversation)
    last_time = {}  # conversation -> time of its last entry
    created = {}  # group -> line of its created line
    recalled = set()
    accounts_lined = set()
    counts = {}

    def problem(number, text):
        problems.append((number, text))

    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as error:
            problem(number, "not JSON (%s)" % error)
            continue
        if not isinstance(line, dict):
            problem(number, "not a JSON object")
            continue
        kind = line.get("kind")
        if kind not in FIELDS:
            problem(number, "unknown kind %r" % (kind,))
            continue
        counts[kind] = counts.get(kind, 0) + 1
        unknown = sorted(set(line) - FIELDS[kind])
        if unknown:
            problem(number, "unknown field(s) for %s: %s" % (kind, ", ".join(unknown)))

        def need_account(field, optional=False):
            value = line.get(field)
            if value is None and optional:
                return None
            if not cl.is_account_id(value):
                problem(number, "%s: %r is not an account id (1-128 of [A-Za-z0-9._@-])" % (field, value))
                return None
            return value

        def need_entry(field):
            value = line.get(field)
            if not cl.is_entry_id(value):
                problem(number, "%s: %r is not an entry id (1-128 of [A-Za-z0-9._@:-])" % (field, value))
                return None
            return value

        def need_time(field):
            value = line.get(field)
            if not is_time(value):
                problem(number, "%s: %r is not a time (integer milliseconds >= 0)" % (field, value))
                return None
            return value

        def record_entry(entry_id, entry_kind, conversation, time):
            if entry_id is None:
                return
            if entry_id in entries:
                problem(number, "id %r already used on line %d" % (entry_id, entries[entry_id][0]))
                return
            entries[entry_id] = (number, entry_kind, conversation)
            if conversation is not None and time is not None:
                previous = last_time.get(conversation)
                if previous is not None and time < previous:
                    problem(number, "time %d is earlier than the previous entry of %s (%d)" % (
                        time, display(conversation), previous))
                last_time[conversation] = max(time, previous or 0)

        def target_message(field, conversation):
            value = need_entry(field)
            if value is None:
                return None
            if value not in entries:
                problem(number, "%s: message %r is not earlier in the file" % (field, value))
                return None
            where, entry_kind, entry_conversation = entries[value]
            if entry_kind != "message":
                problem(number, "%s: %r (line %d) is not a message" % (field, value, where))
                return None
            if conversation is not None and entry_conversation != conversation:
                problem(number, "%s: message %r (line %d) is in %s, not %s" % (
                    field, value, where, display(entry_conversation), display(conversation)))
                return None
            return value

        if kind == "account":
            account = need_account("id")
            need_time("createdAt")
            if account is not None:
                if account in accounts_lined:
                    problem(number, "second account line for %r" % account)
                accounts_lined.add(account)

        elif kind == "group":
            entry_id = need_entry("id")
            group = need_account("group")
            action = line.get("action")
            by = need_account("by")
            time = need_time("time")
            accounts = line.get("accounts")
            if action not in cl.GROUP_ACTIONS:
                problem(number, "unknown action %r" % (action,))
            if accounts is not None:
                if not isinstance(accounts, list) or not all(cl.is_account_id(a) for a in accounts):
                    problem(number, "accounts: not a list of account ids")
                    accounts = []
                elif len(set(accounts)) != len(accounts):
                    problem(number, "accounts: an account is named twice")
            if action in ("added", "removed", "roleChanged", "ownerTransferred") and not accounts:
                problem(number, "%s needs accounts" % action)
            if action == "created" and accounts is None:
                problem(number, "created needs accounts (the other members; [] for none)")
            if action == "created" and by is not None and accounts and by in accounts:
                problem(number, "created: the owner %r is also among accounts" % by)
            if action == "left" and accounts is not None:
                problem(number, "left takes no accounts (by leaves)")
            if action == "dismissed" and accounts:
                problem(number, "dismissed takes no accounts")
            if action == "ownerTransferred" and accounts and len(accounts) != 1:
                problem(number, "ownerTransferred names exactly one account")
            if action == "roleChanged":
                if line.get("role") not in ("admin", "member"):
                    problem(number, "roleChanged needs role admin or member")
            elif "role" in line:
                problem(number, "role is only for roleChanged")
            conversation = ("g", group) if group is not None else None
            if group is not None:
                if action == "created":
                    if group in created:
                        problem(number, "second created line for group %r (first on line %d)" % (
                            group, created[group]))
                    else:
                        created[group] = number
                elif group not in created:
                    problem(number, "change of group %r before its created line" % group)
            record_entry(entry_id, "group", conversation, time)

        elif kind == "message":
            entry_id = need_entry("id")
            sender = need_account("from")
            time = need_time("time")
            conversation = None
            if ("to" in line) == ("group" in line):
                problem(number, "a message has either to (an account) or group")
            elif "to" in line:
                to = need_account("to")
                if to is not None and to == sender:
                    problem(number, "to is the sender")
                elif to is not None and sender is not None:
                    conversation = ("d",) + tuple(sorted((sender, to)))
            else:
                group = need_account("group")
                if group is not None:
                    conversation = ("g", group)
                    if group not in created:
                        problem(number, "message in group %r before its created line" % group)
            if "type" in line and not cl.is_type(line["type"]):
                problem(number, "type: %r is not 1-64 of [A-Za-z0-9._:-] starting with a letter" % (line["type"],))
            body = line.get("body")
            if not isinstance(body, str):
                problem(number, "body: missing or not a string")
            elif cl.utf8_len(body) > max_body_bytes:
                problem(number, "body: %d bytes, over %d" % (cl.utf8_len(body), max_body_bytes))
            if "ext" in line:
                ext = line["ext"]
                if not isinstance(ext, dict) or not all(isinstance(v, str) for v in ext.values()):
                    problem(number, "ext: not an object of strings")
                else:
                    if len(ext) > cl.EXT_MAX_KEYS:
                        problem(number, "ext: %d keys, over %d" % (len(ext), cl.EXT_MAX_KEYS))
                    if any(not 1 <= len(k) <= cl.EXT_KEY_MAX for k in ext):
                        problem(number, "ext: a key is not 1-64 characters")
                    size = sum(cl.utf8_len(k) + cl.utf8_len(v) for k, v in ext.items())
                    if size > cl.EXT_MAX_BYTES:
                        problem(number, "ext: %d bytes of keys and values, over %d" % (size, cl.EXT_MAX_BYTES))
            if "needsReadReceipt" in line and not isinstance(line["needsReadReceipt"], bool):
                problem(number, "needsReadReceipt: not a boolean")
            if "replyTo" in line:
                target_message("replyTo", conversation)
            record_entry(entry_id, "message", conversation, time)

        elif kind == "recall":
            entry_id = need_entry("id")
            need_account("by")
            time = need_time("time")
            target = target_message("message", None)
            conversation = None
            if target is not None:
                conversation = entries[target][2]
                if target in recalled:
                    problem(number, "message %r is recalled twice" % target)
                recalled.add(target)
            record_entry(entry_id, "recall", conversation, time)

        else:  # read
            account = need_account("account")
            need_time("time")
            conversation = None
            if ("with" in line) == ("group" in line):
                problem(number, "%s has either with (an account) or group" % kind)
            elif "with" in line:
                peer = need_account("with")
                if peer is not None and peer == account:
                    problem(number, "with is the account itself")
                elif peer is not None and account is not None:
                    conversation = ("d",) + tuple(sorted((account, peer)))
            else:
                group = need_account("group")
                if group is not None:
                    conversation = ("g", group)
            if "private" in line and not isinstance(line["private"], bool):
                problem(number, "private: not a boolean")
            if conversation is not None:
                target_message("upTo", conversation)
            else:
                need_entry("upTo")
    return problems, counts


def display(conversation):
    if conversation is None:
        return "?"
    if conversation[0] == "g":
        return "group %s" % conversation[1]
    return "d:%s:%s" % conversation[1:]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="check.py", description="Check a file of Courier history lines.")
    parser.add_argument("file", help="the history lines (JSON Lines)")
    parser.add_argument("--max-body-bytes", type=int, default=cl.MAX_BODY_BYTES, metavar="N",
                        help="the server's maxBodyBytes (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        with open(args.file, "r", encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except (OSError, UnicodeDecodeError) as error:
        sys.stderr.write("check.py: cannot read %s: %s\n" % (args.file, error))
        return 2
    problems, counts = check_lines(lines, args.max_body_bytes)
    summary = ", ".join("%d %s" % (counts[k], k) for k in sorted(counts))
    if problems:
        for number, text in problems:
            sys.stdout.write("%s:%d: %s\n" % (args.file, number, text))
        sys.stdout.write("%s: %d problem(s) (%s)\n" % (args.file, len(problems), summary or "no lines"))
        return 1
    sys.stdout.write("%s: valid (%s)\n" % (args.file, summary or "no lines"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
