"""Print a cassette's traffic as facts to read when writing its expectations by hand (not used by the tests).

``python -m tests.real_traffic.describe PATH...``: per call, the request's state fields (store, include,
instructions, previous_response_id, conversation), its input items (type, id, call_id, role, phase, encrypted
payload length) with the earlier response of the same cassette each one is a copy of, and the response's output
items. It states traffic facts only; which signals they make is decided by the reader, from the catalogue.
"""

from __future__ import annotations

import contextlib
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
            with contextlib.suppress(ValueError):
                events.append(json.loads(line[6:]))
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
            flags.append(
                f"instructions={'None' if ins is None else ('EMPTY' if ins == '' else '#' + _digest(str(ins)))}"
            )
        else:
            flags.append("instructions=absent")
        text_format = (
            (body.get("text") or {}).get("format", {}).get("type") if isinstance(body.get("text"), dict) else None
        )
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
            for earlier, _efinal, ecopies, _ in seen:
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
                shown = "None" if ins is None else ("EMPTY" if ins == "" else "#" + _digest(str(ins)))
                info.append(f"resp.instructions={shown}")
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


# -- notable facts: what a reader checks against the catalogue -------------------------------------------------

_CLIENT_CALLS = {
    "function_call",
    "custom_tool_call",
    "computer_call",
    "apply_patch_call",
    "local_shell_call",
    "shell_call",
}
_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "apply_patch_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "tool_search_output",
    "mcp_approval_response",
}


def _type(item: dict[str, Any]) -> str:
    return str(item.get("type") or ("message" if "role" in item else "?"))


def _is_call(item: dict[str, Any]) -> bool:
    t = _type(item)
    return t in _CLIENT_CALLS or (t == "tool_search_call" and item.get("execution") == "client")


def notable(path: Path) -> list[str]:
    """Facts per call that bear on a signal (one line each); a call with none is not listed."""
    cassette = json.loads(path.read_text())
    facts: list[str] = []
    created: dict[str, int] = {}
    responses: dict[int, tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = {}
    children: dict[str, int] = {}
    for index, call in enumerate(cassette["calls"], 1):
        body = call["request_body"] if isinstance(call["request_body"], dict) else {}
        final, copies = response_of(call)
        out: list[str] = []
        raw_input = body.get("input")
        inputs = raw_input if isinstance(raw_input, list) else []
        instructions = body.get("instructions") or None
        if body.get("previous_response_id") and body.get("conversation"):
            out.append("BOTH previous_response_id and conversation")
        parent = body.get("previous_response_id")
        pi = created.get(parent) if parent else None
        if parent and pi is None:
            out.append("previous_response_id unknown to this cassette")
        if pi is not None:
            pfinal, pcopies, pbody = responses[pi]
            pstore = pfinal.get("store", pbody.get("store", True))
            out.append(f"continues #{pi} (effective store={pstore})")
            if parent in children:
                out.append(f"SECOND child of #{pi} (first: #{children[parent]})")
            children.setdefault(str(parent), index)
            pins = pbody.get("instructions") or None
            if pins and not instructions:
                out.append(f"parent #{pi} had instructions, this request has none")
            if pins and instructions and pins != instructions:
                out.append(f"instructions differ from parent #{pi}")
            pending = [c for c in (pfinal.get("output") or []) if _is_call(c)]
            answered = {i.get("call_id") for i in inputs if _type(i) in _OUTPUTS}
            for c in pending:
                if c.get("call_id") not in answered:
                    out.append(f"parent #{pi}'s {_type(c)} {c.get('call_id')} gets no output here")
            pids = {c.get("id") for c in pcopies if c.get("id")}
            pcalls = {(c.get("call_id"), _type(c)) for c in pcopies if c.get("call_id")}
            for item in inputs:
                if (item.get("id") and item.get("id") in pids) or ((item.get("call_id"), _type(item)) in pcalls):
                    out.append(f"re-sends {_type(item)} {item.get('id') or item.get('call_id')} of parent #{pi}")
        if body.get("conversation"):
            out.append(f"conversation {body['conversation']}")
        # tool pairing within the input
        calls_at: dict[str, list[int]] = {}
        outputs_at: dict[str, list[int]] = {}
        for pos, item in enumerate(inputs):
            t = _type(item)
            if item.get("call_id") and (t.endswith("_call") or t in ("tool_search_call",)) and t not in _OUTPUTS:
                calls_at.setdefault(item["call_id"], []).append(pos)
            if t in _OUTPUTS and item.get("call_id"):
                outputs_at.setdefault(item["call_id"], []).append(pos)
        for cid, positions in calls_at.items():
            if len(positions) > 1:
                out.append(f"call_id {cid} used by {len(positions)} calls in the input")
        parent_calls = set()
        if pi is not None:
            parent_calls = {c.get("call_id") for c in responses[pi][1] if c.get("call_id")}
        for cid, positions in outputs_at.items():
            if cid not in calls_at and cid not in parent_calls:
                out.append(f"output {cid} has no call in the input" + (" nor in the parent" if pi else ""))
            elif cid in calls_at and min(positions) < min(calls_at[cid]):
                out.append(f"output {cid} placed before its call")
        for item in inputs:
            if _is_call(item) and item.get("call_id") not in outputs_at:
                if _type(item) == "shell_call":
                    out.append(
                        f"input shell_call {item.get('call_id')} without output (check: did the API return one?)"
                    )
                else:
                    out.append(f"input {_type(item)} {item.get('call_id')} has no output")
        # replays of earlier responses
        for earlier, (efinal, ecopies, ebody) in responses.items():
            outputs = efinal.get("output") or []
            if not outputs:
                continue
            carried = []
            carried_pos = []
            for o in outputs:
                for pos, item in enumerate(inputs):
                    same = (item.get("id") and item.get("id") == o.get("id")) or (
                        o.get("call_id") and item.get("call_id") == o.get("call_id") and _type(item) == _type(o)
                    )
                    if not same and _type(o) == "message" and item.get("role") == "assistant":
                        same = bool(_text(o)) and _text(item) == _text(o)
                    if same:
                        carried.append((o, item))
                        carried_pos.append(pos)
                        break
            if not carried:
                continue
            kinds = [f"{_type(o)}" for o, _ in carried]
            missing = [o for o in outputs if all(o is not c for c, _ in carried)]
            out.append(
                f"carries {len(carried)}/{len(outputs)} output items of #{earlier} ({','.join(kinds)})"
                + (
                    f"; NOT carried: {','.join(_type(m) + ' ' + str(m.get('id'))[:14] for m in missing)}"
                    if missing
                    else ""
                )
            )
            for o, item in carried:
                if o.get("phase") and not item.get("phase"):
                    out.append(f"  {_type(o)} {o.get('id')} returned with phase={o['phase']}, replayed without")
                enc = item.get("encrypted_content")
                oenc = o.get("encrypted_content")
                if _type(o) in ("reasoning", "compaction"):
                    copies_enc: list[str] = [
                        str(c["encrypted_content"])
                        for c in ecopies
                        if c.get("id") == o.get("id") and c.get("encrypted_content")
                    ]
                    copies_enc = [e for e in copies_enc if e]
                    if enc and enc in copies_enc:
                        pass
                    elif enc:
                        lens = sorted({len(e) for e in copies_enc})
                        out.append(
                            f"  {_type(o)} {o.get('id')} enc {len(enc)}:{_alphabet(enc)} is none of the returned copies"
                            f" (lengths {lens}, alphabets {sorted({_alphabet(e) for e in copies_enc})})"
                        )
                    elif oenc or copies_enc:
                        out.append(
                            f"  {_type(o)} {o.get('id')} replayed WITHOUT the encrypted_content it was returned with"
                        )
            estore = efinal.get("store", ebody.get("store", True))
            ins_e = ebody.get("instructions") or None
            has_sys = any(i.get("role") in ("system", "developer") for i in inputs)
            if ins_e and not instructions and not has_sys:
                out.append(
                    f"  #{earlier} had instructions; this replay has neither instructions nor system/developer message"
                )
            if ins_e and instructions and ins_e != instructions:
                out.append(f"  instructions differ from #{earlier}'s")

            # history: app messages of the earlier request vs app messages before the first carried item here
            def app_messages(items: Any) -> int:
                if isinstance(items, str):
                    return 1
                return len(
                    {
                        json.dumps(i, sort_keys=True)
                        for i in items or []
                        if (_type(i) == "message" and i.get("role") in ("user", "system", "developer"))
                        or (_type(i) == "message" and i.get("role") == "assistant" and not i.get("id"))
                    }
                )

            before = app_messages(inputs[: min(carried_pos)])
            given = app_messages(ebody.get("input"))
            compaction_here = any(_type(i) == "compaction" for i in inputs)
            if before < given:
                out.append(
                    f"  app messages before the replayed items: {before}; #{earlier} was given {given}"
                    + (" (a compaction item is in the input)" if compaction_here else "")
                )
            out.append(f"  (#{earlier} effective store={estore})")
        if final and not (call["method"] == "GET" and call["path"].startswith("/v1/responses/")):
            store = final.get("store", body.get("store", True))
            if final.get("id") and call["method"] == "POST" and call["path"] == "/v1/responses":
                created[final["id"]] = index
            reasoning = [o for o in final.get("output") or [] if _type(o) == "reasoning"]
            if store is False and any(not r.get("encrypted_content") for r in reasoning):
                out.append("store=false and reasoning returned without encrypted_content")
            if store is False:
                out.append("effective store=false" + (" (requested otherwise)" if body.get("store", True) else ""))
            if final.get("status") == "incomplete":
                out.append(f"response incomplete {final.get('incomplete_details')}")
            if any(_type(o) == "compaction" for o in final.get("output") or []):
                out.append("a compaction item was returned")
            err = final.get("error")
            if isinstance(err, dict) and "encrypted" in json.dumps(err):
                out.append(f"error mentions encrypted: {json.dumps(err)[:200]}")
            if call["path"].endswith("/compact"):
                out.append("responses.compact")
            responses[index] = (final, copies, body)
        if call["method"] == "GET" and call["path"].startswith("/v1/responses/"):
            rid = call["path"].split("/")[3]
            if rid in created:
                ri = created[rid]
                rfinal, _, rbody = responses[ri]
                out.append(f"retrieves #{ri} (effective store={rfinal.get('store', rbody.get('store', True))})")
            else:
                out.append("retrieves a response unknown to this cassette")
        if call["status"] >= 400:
            out.append(f"HTTP {call['status']}")
        if out:
            facts.append(f"#{index}: " + "\n     ".join(out))
    return facts
