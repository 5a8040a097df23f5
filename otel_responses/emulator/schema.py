"""Structured output: the model's answer as JSON that fits the request's `text.format` JSON schema.

The real API constrains decoding to the schema; the emulator builds one instance of it whose string fields
carry the plain answer, so an app (or a client library's `output_type`) parses it as it would the real one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 16


def text_format(raw: object) -> Mapping[str, Any] | None:
    """The `text.format` object of a request body, when it asks for JSON (`json_schema` or `json_object`)."""
    fmt = raw.get("format") if isinstance(raw, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object"):
        return fmt
    return None


def render(fmt: Mapping[str, Any], answer: str) -> str:
    """The answer as the JSON text the format asks for."""
    if fmt.get("type") == "json_object":
        return json.dumps({"answer": answer})
    schema = fmt.get("schema")
    root = schema if isinstance(schema, Mapping) else {}
    return json.dumps(_instance(root, answer, root, 0))


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _instance(schema: Mapping[str, Any], answer: str, root: Mapping[str, Any], depth: int) -> Any:
    """One value fitting ``schema``: strings carry the answer, numbers are 0, lists hold one element."""
    schema = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return None
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            usable = [o for o in options if isinstance(o, Mapping) and _resolve(o, root).get("type") != "null"]
            if usable:
                return _instance(usable[0], answer, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        fields = properties if isinstance(properties, Mapping) else {}
        return {
            name: _instance(sub if isinstance(sub, Mapping) else {}, answer, root, depth + 1)
            for name, sub in fields.items()
        }
    if kind == "array":
        items = schema.get("items")
        return [_instance(items if isinstance(items, Mapping) else {}, answer, root, depth + 1)]
    if kind in ("integer", "number"):
        minimum = schema.get("minimum")
        return minimum if isinstance(minimum, (int, float)) and not isinstance(minimum, bool) else 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return answer
