#!/usr/bin/env python3
"""Render the REST API's OpenAPI document as a Markdown reference.

Reads Server/Sources/CourierAPI/openapi.yaml and writes docs/rest.md (both relative to the repository root, found
from this script's location): the API's description, the error responses, one section per tag with every operation
(parameters, request body, responses) and one section per schema. The output is deterministic.

    python3 scripts/render-rest-reference.py           # write docs/rest.md
    python3 scripts/render-rest-reference.py --check   # exit 1 if docs/rest.md is not what would be written

Needs only PyYAML. Warns on stderr of what would make the reference wrong: a $ref to nothing, an operation without
a listed tag, a key without a value.
"""
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "Server/Sources/CourierAPI/openapi.yaml"
TARGET = "docs/rest.md"
METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]


def warn(message, _seen=set()):
    if message not in _seen:
        _seen.add(message)
        print(f"render-rest-reference: warning: {message}", file=sys.stderr)


def check_values(node, where=""):
    """Warn of keys without a value: `{ description: A, B }` silently cuts a description at its comma."""
    for key, value in node.items() if isinstance(node, dict) else enumerate(node if isinstance(node, list) else []):
        if value is None:
            warn(f"{where}: key {key!r} has no value (an unquoted comma in a flow mapping?)")
        check_values(value, f"{where}/{key}")


def anchor(heading):
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def cell(text):
    """Text fit for a table cell: one line, pipes escaped."""
    return " ".join(str(text or "").split()).replace("|", "\\|")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def example_block(example):
    return ["```json", json.dumps(example, indent=2, ensure_ascii=False), "```", ""]


def bounds(schema, low, high, label=""):
    """`label 1–128`, `label ≥ 1` or `label ≤ 128` from a pair of constraints; None when neither is set."""
    lo, hi = schema.get(low), schema.get(high)
    if lo is None and hi is None:
        return None
    text = f"{lo}–{hi}" if lo is not None and hi is not None else f"≥ {lo}" if hi is None else f"≤ {hi}"
    return f"{label} {text}".strip()


class Renderer:
    def __init__(self, doc):
        self.doc = doc
        self.components = doc.get("components", {})
        self.schemas = self.components.get("schemas", {})
        self.responses = self.components.get("responses", {})

    def resolve(self, obj, kind):
        """obj, or the component its `$ref` names (`#/components/KIND/NAME`); None for a $ref to nothing."""
        ref = obj.get("$ref") if isinstance(obj, dict) else None
        if ref is None:
            return obj
        name = ref.rsplit("/", 1)[-1]
        if ref != f"#/components/{kind}/{name}" or name not in self.components.get(kind, {}):
            warn(f"$ref to a missing {kind[:-1]}: {ref}")
            return None
        return self.components[kind][name]

    def type_of(self, schema):
        """A schema as a compact phrase: `array of [Seq](#seq), items ≥ 1`, `string, length 1–128, pattern …`."""
        if not schema:
            return "any"
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            return f"[{name}](#{anchor(name)})" if self.resolve(schema, "schemas") else f"{name} (missing)"
        kind = schema.get("type", "object" if "properties" in schema else "any")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if kind == "array":
            item = self.type_of(schema.get("items"))
            parts = ["array of " + (f"({item})" if ", " in item else item)]
        elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            parts = ["map of string to " + self.type_of(schema["additionalProperties"])]
        else:
            parts = [kind + (f" ({schema['format']})" if "format" in schema else "")]
        if "enum" in schema:
            parts.append("one of: " + ", ".join(f"`{value}`" for value in schema["enum"]))
        parts.append(bounds(schema, "minLength", "maxLength", "length"))
        parts.append(bounds(schema, "minimum", "maximum"))
        parts.append(bounds(schema, "minItems", "maxItems", "items"))
        if "pattern" in schema:
            parts.append(f"pattern `{schema['pattern']}`")
        if "default" in schema:
            parts.append(f"default `{json.dumps(schema['default'])}`")
        return ", ".join(p for p in parts if p)

    def properties(self, schema):
        required = set(schema.get("required", []))
        for name in required - set(schema.get("properties", {})):
            warn(f"required property {name!r} is not among the properties")
        rows = [[f"`{name}`", self.type_of(prop), "yes" if name in required else "no", prop.get("description")]
                for name, prop in schema.get("properties", {}).items()]
        return table(["Name", "Type", "Required", "Description"], rows)

    def operations(self):
        for path, item in self.doc.get("paths", {}).items():
            for method, operation in item.items():
                if method in METHODS:
                    yield path, method, operation

    def render(self):
        info = self.doc.get("info", {})
        out = ["# REST API reference", "",
               f"Generated from `{SOURCE}` by `scripts/render-rest-reference.py` — do not edit by hand. "
               "The server serves the document at `GET /v1/openapi.yaml`.", "",
               f"*{info.get('title', 'API')}, version {info.get('version', '?')}.*", "",
               info.get("description", "").rstrip(), ""]
        out += self.errors()
        tags = [t["name"] for t in self.doc.get("tags", [])]
        descriptions = {t["name"]: t.get("description") for t in self.doc.get("tags", [])}
        by_tag = {}
        for path, method, operation in self.operations():
            for tag in operation.get("tags") or ["Untagged"]:
                if tag not in tags:
                    problem = "no tag" if tag == "Untagged" else f"tag {tag!r} is not in the top-level list"
                    warn(f"{method.upper()} {path}: {problem}")
                    tags.append(tag)
                by_tag.setdefault(tag, []).append((path, method, operation))
        for tag in tags:
            out += [f"## {tag}", ""]
            if descriptions.get(tag):
                out += [descriptions[tag].rstrip(), ""]
            if tag not in by_tag:
                out += ["No operations.", ""]
            for path, method, operation in by_tag.get(tag, []):
                out += self.operation(path, method, operation)
        out += ["## Schemas", ""]
        for name, schema in self.schemas.items():
            out += self.schema(name, schema)
        return "\n".join(out).rstrip() + "\n"

    def errors(self):
        out = ["## Errors", "",
               "Every failure answers `application/problem+json` with a [Problem](#problem), whose `code` is one of "
               "the stable [error codes](#errorcode):", ""]
        out += self.properties(self.schemas.get("Problem", {}))
        used = {}  # response name -> the statuses the paths use it for, e.g. BadRequest -> {"400"}
        for _, _, operation in self.operations():
            for status, response in operation.get("responses", {}).items():
                if "$ref" in response:
                    used.setdefault(response["$ref"].rsplit("/", 1)[-1], set()).add(str(status))
        out += ["The responses operations refer to, by the status they are used with:", ""]
        for name, response in self.responses.items():
            status = ", ".join(sorted(used.get(name, []))) or "unused"
            out.append(f"- **{status}** `{name}`: {cell(response.get('description'))}")
        out.append("")
        for name, response in self.responses.items():
            for content_type, media in response.get("content", {}).items():
                if "example" in media:
                    out += [f"Example of `{name}` (`{content_type}`):", ""] + example_block(media["example"])
        return out

    def operation(self, path, method, operation):
        out = [f"### {method.upper()} {path}", ""]
        if operation.get("summary"):
            out += [f"**{operation['summary'].strip()}**", ""]
        if operation.get("description"):
            out += [operation["description"].rstrip(), ""]
        out += [self.credentials(method, operation), ""]
        out += self.parameter_table(self.doc["paths"][path].get("parameters", []) + operation.get("parameters", []))
        body = self.resolve(operation.get("requestBody"), "requestBodies") or {}
        for content_type, media in body.get("content", {}).items():
            required = "required" if body.get("required") else "optional"
            out += [f"Request body (`{content_type}`, {required}): {self.type_of(media.get('schema'))}", ""]
            if "example" in media:
                out += example_block(media["example"])
        rows, examples = [], []
        for status, response in operation.get("responses", {}).items():
            resolved = self.resolve(response, "responses") or {}
            content = resolved.get("content", {})
            schemas = [self.type_of(media.get("schema")) for media in content.values()]
            rows.append([f"`{status}`", resolved.get("description"), ", ".join(schemas)])
            if "$ref" not in response:
                examples += [(status, media["example"]) for media in content.values() if "example" in media]
        out += ["Responses:", ""] + table(["Status", "Description", "Schema"], rows)
        for status, example in examples:
            out += [f"Example `{status}` response:", ""] + example_block(example)
        return out

    def credentials(self, method, operation):
        """Who may call it (its `security`: ADR 0048) and whether it is audited."""
        security = operation.get("security", self.doc.get("security", []))
        names = {"appSecret": "the app secret", "clientToken": "a client token"}
        callers = [names[name] for alternative in security for name in alternative if name in names]
        scopes = [f"`{scope}`" for alternative in security for scope in alternative.get("apiKey", [])]
        if scopes:
            callers.append("an API key with " + " or ".join(scopes))
        audited = method != "get" and operation.get("x-courier-audit", True)
        return ("Credentials: " + ", ".join(callers[:-1]) + (" or " if len(callers) > 1 else "") + callers[-1] + "."
                + (" Recorded in the audit trail." if audited else ""))

    def parameter_table(self, parameters):
        merged = {}
        for parameter in parameters:
            resolved = self.resolve(parameter, "parameters")
            if resolved:
                merged[(resolved.get("name"), resolved.get("in"))] = resolved  # an operation's overrides its path's
        if not merged:
            return []
        rows = [[f"`{p.get('name')}`", p.get("in"), "yes" if p.get("required") else "no",
                 self.type_of(p.get("schema")), p.get("description")] for p in merged.values()]
        return ["Parameters:", ""] + table(["Name", "In", "Required", "Type", "Description"], rows)

    def schema(self, name, schema):
        out = [f"### {name}", ""]
        if schema.get("description"):
            out += [schema["description"].rstrip(), ""]
        if "properties" in schema:
            out += self.properties(schema)
        else:
            out += [f"Type: {self.type_of(schema)}.", ""]
        return out


def main(argv):
    check = "--check" in argv[1:]
    if set(argv[1:]) - {"--check"}:
        print(f"usage: {argv[0]} [--check]", file=sys.stderr)
        return 2
    doc = yaml.safe_load((ROOT / SOURCE).read_text(encoding="utf-8"))
    check_values(doc)
    text = Renderer(doc).render()
    target = ROOT / TARGET
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            print(f"{TARGET} is out of date with {SOURCE}: run python3 scripts/render-rest-reference.py",
                  file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
