"""Shared helpers of the vendor converters (nim.py, agora.py, rongcloud.py): they turn a vendor's history export into
Courier history lines (docs/import.md).

A converter reads its vendor's records into a `History` (messages, group changes, recalls and reads, with
the vendor's own ids), and `History.render()` writes the lines:

1. an `account` line for every account named anywhere, sorted by id (`createdAt`: the export's, else the earliest
   time the account appears);
2. for each group without a `created` entry of its own in the export, a `created` line (owner: the export's, else the
   first sender; members: the export's members and everyone seen in the group), sorted by group;
3. each conversation's entries (messages, membership changes, recall notices), conversations sorted by id, entries by
   (time, export order) — so each conversation's lines are in time order and take their seqs in that order;
4. reads, sorted by (conversation, account, time, export order).

Ids are sanitised to Courier's rules, deterministically (see `Sanitizer`); the same input always gives the same bytes.
Standard library only."""
import argparse
import gzip
import hashlib
import io
import json
import re
import sys
import zipfile
from collections import Counter, OrderedDict, defaultdict

ACCOUNT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-")
ENTRY_CHARS = ACCOUNT_CHARS | {":"}
ACCOUNT_MAX = 128  # accounts and groups (docs/import.md)
ENTRY_MAX = 128  # message, membership-change and recall-notice ids
TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9._:-]{0,63}\Z")
MAX_BODY_BYTES = 65536  # the server's default maxBodyBytes
EXT_MAX_KEYS = 64
EXT_KEY_MAX = 64
EXT_MAX_BYTES = 4096
GROUP_ACTIONS = ("created", "added", "removed", "left", "roleChanged", "ownerTransferred", "dismissed")


def dumps(value):
    """Compact JSON, UTF-8 kept as is, key order as given (dicts keep the export's order)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(text):
    return json.loads(text, object_pairs_hook=OrderedDict)


def utf8_len(text):
    return len(text.encode("utf-8"))


def is_account_id(value):
    return isinstance(value, str) and 1 <= len(value) <= ACCOUNT_MAX and all(c in ACCOUNT_CHARS for c in value)


def is_entry_id(value):
    return isinstance(value, str) and 1 <= len(value) <= ENTRY_MAX and all(c in ENTRY_CHARS for c in value)


def is_type(value):
    return isinstance(value, str) and TYPE_RE.match(value) is not None


def text_id(value):
    """A vendor id as text: numbers (NIM's server ids) become their decimal form; empty or missing is None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not value.is_integer():
            return repr(value)
        return str(int(value))
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return None


def to_millis(value):
    """Milliseconds since 1970 from an int, a float or a numeric string; None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def first(record, *keys):
    """The value of the first key present with a non-empty value."""
    for key in keys:
        if isinstance(record, dict) and key in record and record[key] not in (None, ""):
            return record[key]
    return None


def compact_json_text(value):
    """A body for a non-text message: the vendor's attachment JSON, compact, key order kept. A string holding JSON
    is parsed and written again; any other string is kept as it is."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return dumps(loads(stripped))
            except ValueError:
                return value
        return value
    if value is None:
        return ""
    return dumps(value)


def parse_json_object(value):
    """A dict from a dict or from a string holding a JSON object; None otherwise."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


class ExportError(Exception):
    """A file the converter cannot read (exit status 2)."""


# ---------------------------------------------------------------------------------------------------------------------
# Reading exports


def read_export(path):
    """The JSON documents of an export file: `[(location, value)]` and `[(location, reason)]` of unreadable lines.

    A file is JSON (one document), or JSON Lines (one document a line; a line may carry a text prefix before its
    `{`). gzip and zip files (the vendors' downloads are compressed) are read through; a zip's members in name
    order. Raises ExportError when the file cannot be read or holds no JSON."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ExportError(error.strerror or str(error))
    parts = []
    if raw[:2] == b"\x1f\x8b":
        try:
            parts.append((path, gzip.decompress(raw)))
        except (OSError, EOFError) as error:
            raise ExportError("not a readable gzip file (%s)" % error)
    elif raw[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                for name in sorted(archive.namelist()):
                    if not name.endswith("/"):
                        parts.append(("%s!%s" % (path, name), archive.read(name)))
        except (zipfile.BadZipFile, OSError) as error:
            raise ExportError("not a readable zip file (%s)" % error)
    else:
        parts.append((path, raw))
    documents, bad = [], []
    for where, data in parts:
        if data[:2] == b"\x1f\x8b":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as error:
                raise ExportError("%s: not a readable gzip member (%s)" % (where, error))
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ExportError("%s: not UTF-8 text (%s)" % (where, error))
        if not text.strip():
            continue
        try:
            documents.append((where, loads(text)))
            continue
        except ValueError:
            pass
        parsed_any = False
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped:
                continue
            start = stripped.find("{")
            if start < 0:
                bad.append(("%s:%d" % (where, number), "not JSON"))
                continue
            try:
                documents.append(("%s:%d" % (where, number), loads(stripped[start:])))
                parsed_any = True
            except ValueError:
                bad.append(("%s:%d" % (where, number), "not JSON"))
        if not parsed_any:
            raise ExportError("%s: neither JSON nor JSON Lines" % where)
    return documents, bad


# ---------------------------------------------------------------------------------------------------------------------
# Ids


class Sanitizer:
    """Maps vendor ids to Courier ids, deterministically.

    A valid id is kept. Any other id gets each character outside the allowed set replaced by `-`, is cut to fit, and
    gets `-` and the first 8 hex digits of the SHA-256 of the original appended (16, 32 … digits when that collides
    with another id). Valid ids are reserved first and the others mapped in sorted order, so the mapping depends only
    on the set of ids."""

    def __init__(self, allowed, max_length, ids):
        self.allowed = allowed
        self.max_length = max_length
        self.mapping = {}
        used = set()
        for raw in ids:
            if self._valid(raw):
                self.mapping[raw] = raw
                used.add(raw)
        for raw in sorted(set(ids) - set(self.mapping)):
            mapped = None
            for digits in (8, 16, 32, 48):
                candidate = self.candidate(raw, digits)
                if candidate not in used:
                    mapped = candidate
                    break
            if mapped is None:
                raise ValueError("cannot map id %r" % raw)
            self.mapping[raw] = mapped
            used.add(mapped)

    def _valid(self, raw):
        return 1 <= len(raw) <= self.max_length and all(c in self.allowed for c in raw)

    def candidate(self, raw, digits=8):
        digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:digits]
        cleaned = "".join(c if c in self.allowed else "-" for c in raw)
        room = self.max_length - digits - 1
        cleaned = cleaned[:room] if room > 0 else ""
        return (cleaned + "-" + digest) if cleaned else digest

    def __call__(self, raw):
        return self.mapping[raw]

    def rewritten(self):
        return sum(1 for raw, mapped in self.mapping.items() if raw != mapped)


def sanitize_account_id(raw):
    """The Courier account (or group) id of one vendor id on its own (no collision handling): for tests and docs."""
    return Sanitizer(ACCOUNT_CHARS, ACCOUNT_MAX, [raw])(raw)


def sanitize_entry_id(raw):
    return Sanitizer(ENTRY_CHARS, ENTRY_MAX, [raw])(raw)


# ---------------------------------------------------------------------------------------------------------------------
# ext


def flatten_ext(value, notes):
    """Courier's ext from a vendor's: a flat map of strings (non-strings become compact JSON), at most 64 keys of
    1–64 characters and 4,096 UTF-8 bytes of keys and values together. Keys that do not fit are dropped (and
    counted in `notes`). A string that is not a JSON object is kept under the key `ext`. Returns None when empty."""
    if value is None or value == "" or (isinstance(value, dict) and not value):
        return None
    if isinstance(value, str):
        parsed = parse_json_object(value)
        if parsed is None:
            notes["ext that is not a JSON object kept under the key \"ext\""] += 1
            value = OrderedDict([("ext", value)])
        else:
            value = parsed
            if not value:
                return None
    elif not isinstance(value, dict):
        notes["ext that is not a JSON object kept under the key \"ext\""] += 1
        value = OrderedDict([("ext", dumps(value))])
    out = OrderedDict()
    size = 0
    for key, item in value.items():
        key = str(key)
        if not 1 <= len(key) <= EXT_KEY_MAX:
            notes["ext key dropped: not 1-64 characters"] += 1
            continue
        if len(out) >= EXT_MAX_KEYS:
            notes["ext key dropped: more than 64 keys"] += 1
            continue
        text = item if isinstance(item, str) else dumps(item)
        cost = utf8_len(key) + utf8_len(text)
        if size + cost > EXT_MAX_BYTES:
            notes["ext key dropped: ext over 4096 bytes"] += 1
            continue
        out[key] = text
        size += cost
    return out or None


# ---------------------------------------------------------------------------------------------------------------------
# The history a converter builds


class Message:
    __slots__ = ("id", "sender", "to", "group", "time", "type", "body", "ext", "reply_to", "needs_receipt", "order",
                 "where")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


class GroupChange:
    __slots__ = ("id", "group", "action", "by", "accounts", "role", "time", "order", "where")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


class Recall:
    __slots__ = ("id", "message", "by", "time", "order", "where")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


class Position:
    """A read: by `account`, up to the message `message`, or — when the vendor gives a time, not a
    message — up to the last message at or before `up_to_time` of the conversation with `peer` or in `group`."""
    __slots__ = ("kind", "account", "message", "peer", "group", "up_to_time", "time", "private", "order", "where")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))


class GroupInfo:
    def __init__(self):
        self.owner = None
        self.members = []
        self.admins = []
        self.created_at = None


class History:
    def __init__(self, vendor, max_body_bytes=MAX_BODY_BYTES):
        self.vendor = vendor
        self.max_body_bytes = max_body_bytes
        self.messages = []
        self.changes = []
        self.recalls = []
        self.positions = []
        self.groups = defaultdict(GroupInfo)
        self.account_created = {}
        self.skipped = Counter()
        self.skip_examples = defaultdict(list)
        self.notes = Counter()
        self.records = 0
        self._order = 0
        self.counts = Counter()
        self.finishers = []  # callables run once every export is read, before the lines are made

    # -- recording -----------------------------------------------------------------------------------------------

    def next_order(self):
        self._order += 1
        return self._order

    def skip(self, reason, where=None):
        self.skipped[reason] += 1
        if where is not None and len(self.skip_examples[reason]) < 3:
            self.skip_examples[reason].append(where)

    def note(self, text, count=1):
        self.notes[text] += count

    def add_message(self, where, msg_id, sender, time, body, to=None, group=None, type=None, ext=None,
                    reply_to=None, needs_receipt=False):
        """Records a message; returns it, or None when it cannot be kept (the reason is counted)."""
        msg_id, sender, to, group = text_id(msg_id), text_id(sender), text_id(to), text_id(group)
        if msg_id is None:
            return self.skip("message without an id", where)
        if sender is None:
            return self.skip("message without a sender", where)
        if time is None:
            return self.skip("message without a valid time", where)
        if (to is None) == (group is None):
            return self.skip("message without a conversation (no recipient or group)", where)
        if to is not None and to == sender:
            return self.skip("direct message to its own sender", where)
        if type in ("", "text"):
            type = None
        if type is not None and not is_type(type):
            self.note("message type not valid in Courier, written as \"custom\"")
            type = "custom"
        if body is None:
            body = ""
        if not isinstance(body, str):
            body = dumps(body)
        if utf8_len(body) > self.max_body_bytes:
            return self.skip("body over %d bytes" % self.max_body_bytes, where)
        message = Message(id=msg_id, sender=sender, to=to, group=group, time=time, type=type, body=body,
                          ext=ext or None, reply_to=text_id(reply_to), needs_receipt=bool(needs_receipt and group),
                          order=self.next_order(), where=where)
        self.messages.append(message)
        return message

    def add_group_change(self, where, change_id, group, action, by, time, accounts=None, role=None):
        change_id, group, by = text_id(change_id), text_id(group), text_id(by)
        accounts = list(OrderedDict.fromkeys(a for a in (text_id(x) for x in (accounts or [])) if a is not None))
        if change_id is None or group is None or by is None or time is None:
            return self.skip("membership change without an id, group, operator or time", where)
        if action not in GROUP_ACTIONS:
            return self.skip("membership change of an unknown kind", where)
        if action in ("added", "removed", "roleChanged") and not accounts:
            return self.skip("membership change naming no account", where)
        if action == "ownerTransferred" and len(accounts) != 1:
            return self.skip("owner transfer not naming exactly one account", where)
        if action == "roleChanged" and role not in ("admin", "member"):
            return self.skip("role change without a role", where)
        change = GroupChange(id=change_id, group=group, action=action, by=by, accounts=accounts, role=role, time=time,
                             order=self.next_order(), where=where)
        self.changes.append(change)
        return change

    def add_recall(self, where, message_id, by, time, recall_id=None):
        message_id, by = text_id(message_id), text_id(by)
        if message_id is None or by is None or time is None:
            return self.skip("recall without a message, recaller or time", where)
        recall = Recall(id=text_id(recall_id), message=message_id, by=by, time=time, order=self.next_order(),
                        where=where)
        self.recalls.append(recall)
        return recall

    def add_position(self, where, kind, account, time, message=None, peer=None, group=None, up_to_time=None,
                     private=False):
        account, message = text_id(account), text_id(message)
        if account is None or time is None or (message is None and up_to_time is None):
            return self.skip("%s without an account, a message or a time" % kind, where)
        position = Position(kind=kind, account=account, message=message, peer=text_id(peer),
                            group=text_id(group), up_to_time=up_to_time, time=time, private=bool(private),
                            order=self.next_order(), where=where)
        self.positions.append(position)
        return position

    def group_info(self, group, owner=None, members=None, admins=None, created_at=None):
        group = text_id(group)
        if group is None:
            return None
        info = self.groups[group]
        if owner is not None and text_id(owner) is not None:
            info.owner = text_id(owner)
        for member in members or []:
            member = text_id(member)
            if member is not None and member not in info.members:
                info.members.append(member)
        for admin in admins or []:
            admin = text_id(admin)
            if admin is not None and admin not in info.admins:
                info.admins.append(admin)
        if created_at is not None:
            info.created_at = created_at if info.created_at is None else min(info.created_at, created_at)
        return info

    def account_created_at(self, account, time):
        account = text_id(account)
        if account is not None and time is not None:
            previous = self.account_created.get(account)
            self.account_created[account] = time if previous is None else min(previous, time)

    # -- rendering -----------------------------------------------------------------------------------------------

    def render(self):
        """The history lines, as UTF-8 bytes."""
        lines = [dumps(line) + "\n" for line in self.lines()]
        return "".join(lines).encode("utf-8")

    def lines(self):
        for finish in self.finishers:
            finish(self)
        self.finishers = []
        # 1. One entry per id: the first wins (overlapping export windows give the same message twice).
        seen = set()
        messages = []
        for message in self.messages:
            if message.id in seen:
                self.skip("duplicate message id (the first is kept)", message.where)
                continue
            seen.add(message.id)
            messages.append(message)
        changes = []
        for change in self.changes:
            if change.id in seen:
                self.skip("duplicate membership-change id (the first is kept)", change.where)
                continue
            seen.add(change.id)
            changes.append(change)
        by_id = {m.id: m for m in messages}

        recalls = []
        recalled = set()
        for recall in sorted(self.recalls, key=lambda r: (r.time, r.order)):
            target = by_id.get(recall.message)
            if target is None:
                self.skip("recall of a message not in the export", recall.where)
                continue
            if recall.message in recalled:
                self.skip("second recall of the same message", recall.where)
                continue
            if recall.id is None or recall.id in seen:
                recall.id = "r-" + recall.message
            if recall.id in seen:
                self.skip("recall notice id already used", recall.where)
                continue
            seen.add(recall.id)
            recalled.add(recall.message)
            recalls.append(recall)

        # 2. Ids: accounts and groups, then entries.
        accounts, groups = set(), set()
        for m in messages:
            accounts.add(m.sender)
            if m.to is not None:
                accounts.add(m.to)
            else:
                groups.add(m.group)
        for c in changes:
            groups.add(c.group)
            accounts.add(c.by)
            accounts.update(c.accounts)
        for r in recalls:
            accounts.add(r.by)
        for p in self.positions:
            accounts.add(p.account)
            if p.peer is not None:
                accounts.add(p.peer)
            if p.group is not None:
                groups.add(p.group)
        for group, info in self.groups.items():
            groups.add(group)
            if info.owner is not None:
                accounts.add(info.owner)
            accounts.update(info.members)
            accounts.update(info.admins)
        account_ids = Sanitizer(ACCOUNT_CHARS, ACCOUNT_MAX, accounts)
        group_ids = Sanitizer(ACCOUNT_CHARS, ACCOUNT_MAX, groups)
        self.note_rewritten("account id", account_ids.rewritten())
        self.note_rewritten("group id", group_ids.rewritten())

        def conversation_of(message):
            if message.group is not None:
                return ("g", group_ids(message.group))
            a, b = sorted((account_ids(message.sender), account_ids(message.to)))
            return ("d", a, b)

        # 3. Each conversation's entries: (time, export order); a recall after its message.
        # Sort key (time, rank, export order): a recall at its message's time still comes after it.
        streams = defaultdict(list)
        for m in messages:
            streams[conversation_of(m)].append((m.time, m.order, "message", m))
        for c in changes:
            streams[("g", group_ids(c.group))].append((c.time, c.order, "group", c))
        for r in recalls:
            target = by_id[r.message]
            streams[conversation_of(target)].append((max(r.time, target.time), r.order, "recall", r))
        for key in streams:
            streams[key].sort(key=lambda item: (item[0], 1 if item[2] == "recall" else 0, item[1]))

        entry_ids = Sanitizer(ENTRY_CHARS, ENTRY_MAX,
                              [m.id for m in messages] + [c.id for c in changes] + [r.id for r in recalls])
        self.note_rewritten("message or entry id", entry_ids.rewritten())
        taken = set(entry_ids.mapping.values())

        def made_id(text):
            """An id for a line the converter makes (a group's created line): never one of the export's."""
            candidate = text if is_entry_id(text) else sanitize_entry_id(text)
            digits = 8
            while candidate in taken:
                candidate = Sanitizer(ENTRY_CHARS, ENTRY_MAX, []).candidate(text, digits)
                digits += 8
            taken.add(candidate)
            return candidate

        # 4. Groups: a created line unless the export has one (then it goes first in its group).
        group_raw = {group_ids(g): g for g in groups}
        created_lines = []
        for key in sorted(k for k in set(streams) | {("g", group_ids(g)) for g in self.groups} if k[0] == "g"):
            stream = streams.get(key, [])
            raw_group = group_raw[key[1]]
            info = self.groups.get(raw_group) or GroupInfo()
            own_created = [item for item in stream if item[2] == "group" and item[3].action == "created"]
            first_time = stream[0][0] if stream else info.created_at
            if first_time is None:
                continue
            if own_created:
                created = own_created[0]
                stream.remove(created)
                for extra in own_created[1:]:
                    self.skip("second created change of a group", extra[3].where)
                    stream.remove(extra)
                created[3].time = min(created[3].time, first_time)
                stream.insert(0, (created[3].time, created[3].order, "group", created[3]))
                continue
            time = first_time if info.created_at is None else min(info.created_at, first_time)
            owner = info.owner
            if owner is None:
                senders = [item[3].sender for item in stream if item[2] == "message"]
                operators = [item[3].by for item in stream if item[2] == "group"]
                owner = (senders or operators or info.members or [None])[0]
            if owner is None:
                self.skip("group with no known member", raw_group)
                continue
            # Accounts a change adds are not in the created line, unless they were active in the group before.
            first_added, first_active = {}, {}
            for time_, _, kind, entry in stream:
                if kind == "group" and entry.action == "added":
                    for a in entry.accounts:
                        first_added.setdefault(a, time_)
                active = [entry.sender] if kind == "message" else [entry.by] if kind == "recall" else (
                    [entry.by] + ([] if entry.action == "added" else list(entry.accounts)))
                for a in active:
                    first_active.setdefault(a, time_)
            added_later = {a for a, t in first_added.items() if a not in first_active or first_active[a] >= t}
            seen_in_group = set(info.members) | set(info.admins)
            for _, _, kind, entry in stream:
                if kind == "message":
                    seen_in_group.add(entry.sender)
                elif kind == "recall":
                    seen_in_group.add(entry.by)
                elif kind == "group":
                    seen_in_group.add(entry.by)
                    if entry.action not in ("added",):
                        seen_in_group.update(entry.accounts)
            for p in self.positions:
                if p.group == raw_group:
                    seen_in_group.add(p.account)
                elif p.message is not None and p.message in by_id and by_id[p.message].group == raw_group:
                    seen_in_group.add(p.account)
            members = sorted({account_ids(a) for a in seen_in_group - added_later} - {account_ids(owner)})
            group_id = key[1]
            created_lines.append(OrderedDict([
                ("kind", "group"), ("id", made_id("g-%s-created" % group_id)), ("group", group_id),
                ("action", "created"), ("by", account_ids(owner)), ("accounts", members), ("time", time)]))
            for admin in sorted({account_ids(a) for a in info.admins} - {account_ids(owner)}):
                created_lines.append(OrderedDict([
                    ("kind", "group"), ("id", made_id("g-%s-admin-%s" % (group_id, admin))),
                    ("group", group_id), ("action", "roleChanged"), ("by", account_ids(owner)),
                    ("accounts", [admin]), ("role", "admin"), ("time", time)]))

        # 5. Entry lines, each conversation's times made non-decreasing.
        entry_lines = []
        positions_in = {}  # message id -> (conversation, index) of the messages written
        written = set()
        for key in sorted(streams):
            last = None
            index = 0
            for time, _, kind, entry in streams[key]:
                if last is not None and time < last:
                    time = last
                last = time
                if kind == "message":
                    line = OrderedDict([("kind", "message"), ("id", entry_ids(entry.id)),
                                        ("from", account_ids(entry.sender))])
                    if entry.group is not None:
                        line["group"] = group_ids(entry.group)
                    else:
                        line["to"] = account_ids(entry.to)
                    line["time"] = time
                    if entry.type is not None:
                        line["type"] = entry.type
                    line["body"] = entry.body
                    if entry.ext:
                        line["ext"] = entry.ext
                    if entry.reply_to is not None:
                        target = positions_in.get(entry.reply_to)
                        if target is not None and target[0] == key:
                            line["replyTo"] = entry_ids(entry.reply_to)
                        else:
                            self.note("reply whose original is not earlier in its conversation: written without "
                                      "replyTo")
                    if entry.needs_receipt:
                        line["needsReadReceipt"] = True
                    index += 1
                    positions_in[entry.id] = (key, index, entry.time)
                    self.counts["messages"] += 1
                elif kind == "group":
                    line = OrderedDict([("kind", "group"), ("id", entry_ids(entry.id)),
                                        ("group", group_ids(entry.group)), ("action", entry.action),
                                        ("by", account_ids(entry.by))])
                    if entry.action not in ("left", "dismissed"):
                        line["accounts"] = [account_ids(a) for a in entry.accounts]
                    if entry.action == "roleChanged":
                        line["role"] = entry.role
                    line["time"] = time
                    self.counts["group changes"] += 1
                else:
                    line = OrderedDict([("kind", "recall"), ("id", entry_ids(entry.id)),
                                        ("message", entry_ids(entry.message)), ("by", account_ids(entry.by)),
                                        ("time", time)])
                    self.counts["recalls"] += 1
                written.add(entry.id)
                entry_lines.append(line)
        self.counts["group changes"] += len(created_lines)

        # 6. Reads.
        messages_by_conversation = defaultdict(list)
        for message_id, (key, index, time) in positions_in.items():
            messages_by_conversation[key].append((time, index, message_id))
        for key in messages_by_conversation:
            messages_by_conversation[key].sort()
        position_lines = {"read": []}
        for p in self.positions:
            account = account_ids(p.account)
            if p.message is not None and (p.message in positions_in or p.up_to_time is None):
                if p.message not in positions_in:
                    self.skip("%s of a message not in the export" % p.kind, p.where)
                    continue
                key, _, _ = positions_in[p.message]
                target = p.message
            else:
                if p.group is not None:
                    key = ("g", group_ids(p.group))
                elif p.peer is not None and p.peer != p.account:
                    key = ("d",) + tuple(sorted((account, account_ids(p.peer))))
                else:
                    self.skip("%s without a conversation" % p.kind, p.where)
                    continue
                candidates = [m for m in messages_by_conversation.get(key, []) if m[0] <= p.up_to_time]
                if not candidates:
                    self.skip("%s before the first message of its conversation" % p.kind, p.where)
                    continue
                target = candidates[-1][2]
            line = OrderedDict([("kind", p.kind), ("account", account)])
            if key[0] == "g":
                line["group"] = key[1]
            else:
                if account not in key[1:]:
                    self.skip("%s by an account outside the conversation" % p.kind, p.where)
                    continue
                line["with"] = key[2] if key[1] == account else key[1]
            line["upTo"] = entry_ids(target)
            line["time"] = p.time
            if p.private and p.kind == "read":
                line["private"] = True
            position_lines[p.kind].append(((key, account, p.time, p.order), line))
        read_lines = [line for _, line in sorted(position_lines["read"], key=lambda item: item[0])]
        self.counts["reads"] = len(read_lines)

        # 7. Accounts: every one named, created at the export's time or when first met.
        first_seen = {}

        def meet(account, time):
            if account is not None and (account not in first_seen or time < first_seen[account]):
                first_seen[account] = time

        for line in created_lines + entry_lines + read_lines:
            time = line["time"]
            for field in ("from", "to", "by", "account", "with"):
                meet(line.get(field), time)
            for account in line.get("accounts", []):
                meet(account, time)
        exported = {}
        for raw, time in self.account_created.items():
            if raw in account_ids.mapping:
                mapped = account_ids(raw)
                exported[mapped] = time if mapped not in exported else min(exported[mapped], time)
        account_lines = []
        for account in sorted(first_seen):
            created = exported.get(account, first_seen[account])
            account_lines.append(OrderedDict([("kind", "account"), ("id", account), ("createdAt", created)]))
        self.counts["accounts"] = len(account_lines)
        self.counts["groups"] = sum(1 for line in created_lines if line["action"] == "created") + sum(
            1 for line in entry_lines if line["kind"] == "group" and line["action"] == "created")
        return account_lines + created_lines + entry_lines + read_lines

    def note_rewritten(self, what, count):
        if count:
            self.note("%s rewritten to Courier's rules (invalid characters or too long)" % what, count)

    def summary(self, out):
        c = self.counts
        lines = sum(c[k] for k in ("accounts", "messages", "group changes", "recalls", "reads"))
        out.write("%s: %d records read, %d lines written (account %d, group %d, message %d, recall %d, read %d); "
                  "%d groups\n" % (
                      self.vendor, self.records, lines, c["accounts"], c["group changes"], c["messages"],
                      c["recalls"], c["reads"], c["groups"]))
        total = sum(self.skipped.values())
        if total:
            out.write("%s: %d records skipped:\n" % (self.vendor, total))
            for reason in sorted(self.skipped):
                examples = self.skip_examples.get(reason) or []
                out.write("  %5d  %s%s\n" % (self.skipped[reason], reason,
                                             (" (e.g. %s)" % ", ".join(examples)) if examples else ""))
        for text in sorted(self.notes):
            out.write("%s: note: %d × %s\n" % (self.vendor, self.notes[text], text))


# ---------------------------------------------------------------------------------------------------------------------
# The command line every converter shares


def run(vendor, description, convert, argv=None, add_arguments=None):
    """`python3 <vendor>.py EXPORT [EXPORT…] [-o FILE]`: reads every export (exit 2 when one cannot be read, before
    anything is written), converts, writes the lines to FILE or standard output, the summary to standard error."""
    parser = argparse.ArgumentParser(prog="%s.py" % vendor, description=description)
    parser.add_argument("exports", nargs="+", metavar="EXPORT", help="an export file (JSON, JSON Lines, .gz or .zip)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the history lines here (default: stdout)")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES, metavar="N",
                        help="skip messages whose body is over N UTF-8 bytes (the server's maxBodyBytes; "
                             "default %(default)s)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    loaded = []
    for path in args.exports:
        try:
            loaded.append((path, read_export(path)))
        except ExportError as error:
            sys.stderr.write("%s.py: cannot read %s: %s\n" % (vendor, path, error))
            return 2
    history = History(vendor, args.max_body_bytes)
    for path, (documents, bad) in loaded:
        for where, reason in bad:
            history.records += 1
            history.skip("line that is %s" % reason, where)
        convert(history, documents, args)
    data = history.render()
    if args.output:
        try:
            with open(args.output, "wb") as handle:
                handle.write(data)
        except OSError as error:
            sys.stderr.write("%s.py: cannot write %s: %s\n" % (vendor, args.output, error.strerror or error))
            return 2
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    history.summary(sys.stderr)
    return 0
