"""Tests of the vendor converters (nim.py, agora.py, rongcloud.py), their shared helpers and check.py.

    python3 -m unittest scripts/import/test_converters.py

Each converter's output on its sample export equals the sample's expected file byte for byte, passes check.py and is
the same on a second run; ids that need sanitising map deterministically. To refresh an expected file after a
deliberate change: `python3 scripts/import/nim.py scripts/import/samples/nim-export.json >
scripts/import/samples/nim.expected.jsonl` (likewise for agora and rongcloud), then read the diff."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check  # noqa: E402
import courier_lines as cl  # noqa: E402

SAMPLES = {
    "nim": "nim-export.json",
    "agora": "agora-export.jsonl",
    "rongcloud": "rongcloud-export.txt",
}


def run(vendor, *args):
    return subprocess.run([sys.executable, os.path.join(HERE, vendor + ".py")] + list(args), capture_output=True)


def sample(vendor):
    return os.path.join(HERE, "samples", SAMPLES[vendor])


def expected(vendor):
    with open(os.path.join(HERE, "samples", vendor + ".expected.jsonl"), "rb") as handle:
        return handle.read()


def problems_of(data):
    problems, _ = check.check_lines(data.decode("utf-8").split("\n"))
    return problems


def lines_of(data):
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


class SampleTests(unittest.TestCase):
    def test_output_equals_expected_file(self):
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor):
                result = run(vendor, sample(vendor))
                self.assertEqual(result.returncode, 0, result.stderr.decode())
                self.assertEqual(result.stdout, expected(vendor))

    def test_expected_file_passes_check(self):
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor):
                self.assertEqual(problems_of(expected(vendor)), [])
                path = os.path.join(HERE, "samples", vendor + ".expected.jsonl")
                with open(os.devnull, "w") as null:
                    saved, sys.stdout = sys.stdout, null
                    try:
                        status = check.main([path])
                    finally:
                        sys.stdout = saved
                self.assertEqual(status, 0)

    def test_second_run_gives_identical_bytes(self):
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor):
                self.assertEqual(run(vendor, sample(vendor)).stdout, run(vendor, sample(vendor)).stdout)

    def test_output_option_writes_the_same_bytes(self):
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor), tempfile.TemporaryDirectory() as directory:
                path = os.path.join(directory, "history.jsonl")
                result = run(vendor, sample(vendor), "-o", path)
                self.assertEqual(result.returncode, 0, result.stderr.decode())
                self.assertEqual(result.stdout, b"")
                with open(path, "rb") as handle:
                    self.assertEqual(handle.read(), expected(vendor))

    def test_samples_cover_the_brief(self):
        """Two direct conversations and a group of 3-4, 10-30 messages, a non-text message, an ext, a reply, a
        recall; reads where the vendor's export has them."""
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor):
                lines = lines_of(expected(vendor))
                messages = [l for l in lines if l["kind"] == "message"]
                direct = {tuple(sorted((m["from"], m["to"]))) for m in messages if "to" in m}
                groups = {m["group"] for m in messages if "group" in m}
                self.assertEqual(len(direct), 2)
                self.assertEqual(len(groups), 1)
                self.assertTrue(10 <= len(messages) <= 30)
                self.assertTrue(any("type" in m for m in messages))
                self.assertTrue(any("ext" in m for m in messages))
                self.assertTrue(any("replyTo" in m for m in messages))
                self.assertTrue(any(l["kind"] == "recall" for l in lines))
                self.assertTrue(any("🙂" in m["body"] or "👍" in m["body"] for m in messages))
                members = {m["from"] for m in messages if "group" in m}
                self.assertTrue(3 <= len(members) <= 4)
                if vendor != "nim":
                    self.assertTrue(any(l["kind"] == "read" for l in lines))

    def test_summary_goes_to_stderr(self):
        result = run("agora", sample("agora"))
        summary = result.stderr.decode()
        self.assertIn("message 17", summary)
        self.assertIn("command (cmd) message", summary)

    def test_unreadable_export_exits_2_and_writes_nothing(self):
        for vendor in SAMPLES:
            with self.subTest(vendor=vendor), tempfile.TemporaryDirectory() as directory:
                missing = os.path.join(directory, "missing.json")
                result = run(vendor, sample(vendor), missing)
                self.assertEqual(result.returncode, 2)
                self.assertEqual(result.stdout, b"")
                self.assertIn("cannot read", result.stderr.decode())
                garbage = os.path.join(directory, "garbage.txt")
                with open(garbage, "wb") as handle:
                    handle.write(b"\xff\xfe not json at all")
                self.assertEqual(run(vendor, garbage).returncode, 2)

    def test_gzip_export_reads_the_same(self):
        import gzip
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "export.gz")
            with open(sample("rongcloud"), "rb") as source, gzip.open(path, "wb") as target:
                target.write(source.read())
            self.assertEqual(run("rongcloud", path).stdout, expected("rongcloud"))


class SanitisingTests(unittest.TestCase):
    @staticmethod
    def mapped(raw, limit):
        cleaned = "".join(c if c in cl.ACCOUNT_CHARS else "-" for c in raw)[:limit - 9]
        return cleaned + "-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:8]

    def test_valid_ids_are_kept(self):
        self.assertEqual(cl.sanitize_account_id("zhang.san@example-1"), "zhang.san@example-1")
        self.assertEqual(cl.sanitize_entry_id("CD2G-B0E4-0MF5-H4HA"), "CD2G-B0E4-0MF5-H4HA")
        self.assertEqual(cl.sanitize_entry_id("recall:123"), "recall:123")

    def test_invalid_ids_map_deterministically(self):
        for raw in ("zhang+san/01", "张三", "a b", "x" * 140):
            with self.subTest(raw=raw):
                first = cl.sanitize_account_id(raw)
                self.assertEqual(first, cl.sanitize_account_id(raw))
                self.assertEqual(first, self.mapped(raw, cl.ACCOUNT_MAX))
                self.assertTrue(cl.is_account_id(first), first)
        self.assertTrue(cl.is_entry_id(cl.sanitize_entry_id("msg#1/2")))
        self.assertTrue(cl.sanitize_entry_id("y" * 200).startswith("y" * 119 + "-"))

    def test_a_mapped_id_never_takes_an_existing_one(self):
        raw = "a b"
        taken = cl.Sanitizer(cl.ACCOUNT_CHARS, cl.ACCOUNT_MAX, [raw]).candidate(raw)
        sanitizer = cl.Sanitizer(cl.ACCOUNT_CHARS, cl.ACCOUNT_MAX, [taken, raw])
        self.assertEqual(sanitizer(taken), taken)
        self.assertNotEqual(sanitizer(raw), taken)
        self.assertEqual(sanitizer(raw), sanitizer.candidate(raw, 16))

    def test_converter_maps_vendor_ids_the_same_way_every_run(self):
        records = [
            {"fromUserId": "zhang+san/01", "targetId": "li si", "targetType": 1, "GroupId": "",
             "classname": "RC:TxtMsg", "content": {"content": "你好 🙂", "extra": ""},
             "dateTime": "2024-03-01 09:00:00.000", "msgUID": "CD2G#0001"},
            {"fromUserId": "li si", "targetId": "zhang+san/01", "targetType": 1, "GroupId": "",
             "classname": "RC:ReferenceMsg", "content": {"content": "收到", "referMsgUid": "CD2G#0001"},
             "dateTime": "2024-03-01 09:00:01.000", "msgUID": "CD2G-0002"},
        ]
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "log.txt")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
            first, second = run("rongcloud", path), run("rongcloud", path)
            self.assertEqual(first.returncode, 0, first.stderr.decode())
            self.assertEqual(first.stdout, second.stdout)
            self.assertEqual(problems_of(first.stdout), [])
            lines = lines_of(first.stdout)
            sender = self.mapped("zhang+san/01", 64)
            peer = self.mapped("li si", 64)
            self.assertEqual(sorted(l["id"] for l in lines if l["kind"] == "account"), sorted([sender, peer]))
            messages = [l for l in lines if l["kind"] == "message"]
            entry = "CD2G-0001-" + hashlib.sha256(b"CD2G#0001").hexdigest()[:8]
            self.assertEqual(messages[0]["id"], entry)
            self.assertEqual(messages[0]["from"], sender)
            self.assertEqual(messages[1]["replyTo"], entry)
            self.assertIn("rewritten to Courier's rules", first.stderr.decode())


class ExtTests(unittest.TestCase):
    def test_values_become_strings_in_order(self):
        notes = cl.Counter()
        ext = cl.flatten_ext(cl.loads('{"b":1,"a":"x","c":{"d":[1,"中"]},"e":null,"f":true}'), notes)
        self.assertEqual(list(ext.items()),
                         [("b", "1"), ("a", "x"), ("c", '{"d":[1,"中"]}'), ("e", "null"), ("f", "true")])

    def test_json_text_and_other_text(self):
        notes = cl.Counter()
        self.assertEqual(cl.flatten_ext('{"docId":"HT-1"}', notes), {"docId": "HT-1"})
        self.assertEqual(cl.flatten_ext("plain", notes), {"ext": "plain"})
        self.assertIsNone(cl.flatten_ext("", notes))
        self.assertIsNone(cl.flatten_ext({}, notes))

    def test_limits(self):
        notes = cl.Counter()
        ext = cl.flatten_ext({"k%d" % i: "v" for i in range(70)}, notes)
        self.assertEqual(len(ext), 64)
        self.assertIsNone(cl.flatten_ext({"x" * 65: "v"}, notes))
        big = cl.flatten_ext({"a": "x" * 4000, "b": "y" * 200}, notes)
        self.assertEqual(list(big), ["a"])
        self.assertTrue(sum(notes.values()) >= 3)


class CheckTests(unittest.TestCase):
    def problems(self, *lines):
        return [text for _, text in check.check_lines([json.dumps(l, ensure_ascii=False) for l in lines])[0]]

    def test_valid_lines(self):
        self.assertEqual(self.problems(
            {"kind": "account", "id": "alice", "createdAt": 1},
            {"kind": "group", "id": "g-team-1", "group": "team", "action": "created", "by": "alice",
             "accounts": ["bob"], "time": 2},
            {"kind": "message", "id": "m1", "from": "alice", "to": "bob", "time": 3, "body": "hi"},
            {"kind": "message", "id": "m2", "from": "bob", "group": "team", "time": 4, "type": "image",
             "body": "{}", "ext": {"w": "640"}, "needsReadReceipt": True},
            {"kind": "message", "id": "m3", "from": "alice", "group": "team", "time": 5, "body": "ok",
             "replyTo": "m2"},
            {"kind": "recall", "id": "r-m1", "message": "m1", "by": "alice", "time": 6},
            {"kind": "read", "account": "bob", "with": "alice", "upTo": "m1", "time": 7},
            {"kind": "read", "account": "alice", "group": "team", "upTo": "m3", "time": 8}), [])

    def test_ordering_problems(self):
        found = self.problems(
            {"kind": "message", "id": "m1", "from": "bob", "group": "team", "time": 4, "body": "early"},
            {"kind": "recall", "id": "r1", "message": "m9", "by": "alice", "time": 6},
            {"kind": "message", "id": "m2", "from": "alice", "to": "bob", "time": 5, "body": "x"},
            {"kind": "message", "id": "m2", "from": "alice", "to": "bob", "time": 6, "body": "again"},
            {"kind": "message", "id": "m3", "from": "bob", "to": "alice", "time": 1, "body": "back in time"},
            {"kind": "read", "account": "bob", "group": "team", "upTo": "m2", "time": 7})
        joined = "\n".join(found)
        self.assertIn("before its created line", joined)
        self.assertIn("not earlier in the file", joined)
        self.assertIn("already used", joined)
        self.assertIn("earlier than the previous entry", joined)
        self.assertIn("is in d:alice:bob, not group team", joined)

    def test_field_problems(self):
        joined = "\n".join(self.problems(
            {"kind": "note", "id": "x"},
            {"kind": "account", "id": "a b", "createdAt": "1"},
            {"kind": "message", "id": "m1", "from": "alice", "to": "alice", "time": 1, "body": 5,
             "type": "1bad", "ext": {"k": 1}},
            {"kind": "group", "id": "g1", "group": "team", "action": "joined", "by": "alice", "time": 1}))
        for text in ("unknown kind", "not an account id", "not a time", "to is the sender", "body: missing",
                     "type:", "ext: not an object of strings", "unknown action"):
            self.assertIn(text, joined)


if __name__ == "__main__":
    unittest.main()
