"""Print a cassette's traffic as facts to read when writing its expectations by hand (not used by the tests).

``python -m tests.real_traffic.describe PATH...``: per call, the request's state fields (store, include,
instructions, previous_response_id, conversation), its input items (type, id, call_id, role, phase, encrypted
payload length) with the earlier response of the same cassette each one is a copy of, and the response's output
items. It states traffic facts only; which signals they make is decided by the reader, from the catalogue.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

_B64 = re.compile(r"[A-Za-z0-9+/=]*")
_B64URL = re.compile(r"[A-Za-z0-9_=-]*")


def _short(value: str | None, n: int = 10) -> str:
    return "-" if value is None else (value if len(value) <= n + 6 else value[:n] + "…" + value[-4:])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def _text(item: dict[str, Any]) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or p.get("refusal") or "") for p in content if isinstance(p, dict))
    return None


def _alphabet(value: str) -> str:
    if _B64.fullmatch(value):
        return "b64"
    if _B64URL.fullmatch(value):
        return "b64url"
    return "other"


def _sse_events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        if line.startswith("data: "):
            try:
                events.append(json.loads(line[6:]))
            except ValueError:
                pass
    return events


def response_of(call: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(final response body, every output item copy the API returned in this answer)."""
    if "response_sse" in call:
        final = None
        copies: list[dict[str, Any]] = []
        for event in _sse_events(call["response_sse"]):
            kind = event.get("type", "")
            if kind == "response.output_item.done":
                copies.append(event["item"])
            if kind in ("response.completed", "response.incomplete", "response.failed", "response.created"):
                final = event.get("response", final) if kind != "response.created" or final is None else final
            if kind == "error":
                final = {"error": event}
        if final is not None:
            copies.extend(final.get("output") or [])
        return final, copies
    body = call.get("response_body")
    if not isinstance(body, dict):
        return None, []
    return body, list(body.get("output") or [])


def _item_line(item: dict[str, Any]) -> str:
    parts = [str(item.get("type") or ("message" if "role" in item else "?"))]
    for key in ("id", "call_id", "role", "phase", "status", "name"):
        if item.get(key) is not None:
            parts.append(f"{key}={_short(str(item[key]), 14)}")
    if item.get("encrypted_content") is not None:
        enc = item["encrypted_content"]
        parts.append(f"enc={len(enc)}:{_alphabet(enc)}:{_digest(enc)}")
    if "encrypted_content" in item and item["encrypted_content"] is None:
        parts.append("enc=null")
    text = _text(item)
    if text:
        parts.append(f"text#{_digest(text)}[{len(text)}]")
    if item.get("type") == "reasoning":
        parts.append(f"summary={len(item.get('summary') or [])}")
    if item.get("execution"):
        parts.append(f"execution={item['execution']}")
    return " ".join(parts)


def describe(path: Path) -> str:
    cassette = json.loads(path.read_text())
    lines = [f"== {path}  ({cassette['source']['repository']})"]
    if cassette.get("dropped"):
        lines.append(f"   dropped: {cassette['dropped']}")
    seen: list[tuple[int, dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = []  # (call, final, copies, req)
    for index, call in enumerate(cassette["calls"], 1):
        body = call["request_body"] if isinstance(call["request_body"], dict) else {}
        final, copies = response_of(call)
        head = f"#{index} {call['method']} {call['path']}"
        if call["query"]:
            head += f" ?{call['query']}"
        flags = []
        for key in ("model", "store", "stream", "background", "previous_response_id", "conversation", "include"):
            if key in body:
                flags.append(f"{key}={body[key]}")
        if "instructions" in body:
            ins = body["instructions"]
            flags.append(f"instructions={'None' if ins is None else ('EMPTY' if ins == '' else '#' + _digest(str(ins)))}")
        else:
            flags.append("instructions=absent")
        text_format = (body.get("text") or {}).get("format", {}).get("type") if isinstance(body.get("text"), dict) else None
        if text_format:
            flags.append(f"text.format={text_format}")
        if body.get("tools"):
            flags.append("tools=" + ",".join(str(t.get("type")) for t in body["tools"]))
        if body.get("context_management"):
            flags.append(f"context_management={body['context_management']}")
        lines.append(head + "  " + " ".join(flags))
        inputs = body.get("input")
        if isinstance(inputs, str):
            lines.append(f"   in: (string) text#{_digest(inputs)}")
        for item in inputs or [] if isinstance(inputs, list) else []:
            note = []
            for earlier, efinal, ecopies, _ in seen:
                for copy in ecopies:
                    if item.get("id") and copy.get("id") == item.get("id"):
                        note.append(f"id of #{earlier}")
                        break
                    if (
                        item.get("call_id")
                        and copy.get("call_id") == item.get("call_id")
                        and copy.get("type") == item.get("type")
                    ):
                        note.append(f"call_id of #{earlier}")
                        break
                    if (
                        copy.get("type") == "message"
                        and item.get("role") == "assistant"
                        and _text(item)
                        and _text(item) == _text(copy)
                    ):
                        note.append(f"text of #{earlier}")
                        break
                enc = item.get("encrypted_content")
                if enc:
                    same = [c for c in ecopies if c.get("encrypted_content") == enc]
                    if same:
                        note.append(f"enc identical to a copy of #{earlier}")
                    else:
                        lens = {
                            len(c["encrypted_content"])
                            for c in ecopies
                            if c.get("id") == item.get("id") and c.get("encrypted_content")
                        }
                        if lens:
                            note.append(f"enc NOT identical; returned lengths {sorted(lens)}")
            lines.append(f"   in: {_item_line(item)}" + (f"   <= {'; '.join(note)}" if note else ""))
        status = call["status"]
        if final is None:
            lines.append(f"   -> HTTP {status} {json.dumps(call.get('response_body'))[:300]}")
        else:
            info = [f"HTTP {status}"]
            for key in ("id", "status", "store", "previous_response_id", "background"):
                if key in final:
                    info.append(f"{key}={final[key]}")
            if final.get("conversation"):
                info.append(f"conversation={final['conversation']}")
            if final.get("incomplete_details"):
                info.append(f"incomplete={final['incomplete_details']}")
            if final.get("error"):
                info.append(f"error={json.dumps(final['error'])[:200]}")
            if "instructions" in final:
                ins = final["instructions"]
                info.append(f"resp.instructions={'None' if ins is None else ('EMPTY' if ins == '' else '#' + _digest(str(ins)))}")
            if final.get("object") and final.get("object") != "response":
                info.append(f"object={final['object']}")
            lines.append("   -> " + " ".join(info))
            done_ids = set()
            for item in final.get("output") or []:
                lines.append(f"      out: {_item_line(item)}")
                done_ids.add(item.get("id"))
            streamed = [c for c in copies if c not in (final.get("output") or [])]
            for item in streamed:
                lines.append(f"      done-copy: {_item_line(item)}")
            if final.get("data") and isinstance(final["data"], list):
                for item in final["data"]:
                    lines.append(f"      data: {_item_line(item)}")
            if final.get("items") and isinstance(final["items"], list):
                for item in final["items"]:
                    lines.append(f"      items: {_item_line(item)}")
        seen.append((index, final or {}, copies, body))
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(describe(Path(arg)))
        print()
