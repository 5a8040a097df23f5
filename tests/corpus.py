"""The leak-fuzzing corpus: real item shapes of the Responses API with a secret planted in every payload and secret
field, the request parameters that carry secrets, canned responses and streams built from them, the Hypothesis
strategies that draw them, the workloads that drive them through the real client, and the detector that looks for
any trace of a planted secret in what left the process. Read by tests/telemetry/test_leaks.py,
tests/report/test_report_leaks.py, tests/ledger/test_redis_ledger.py and the client-library leak tests; nothing here
is a test.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import logging
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from hypothesis import strategies as st
from openai.resources.responses.responses import Responses

from otel_responses.testing import CapturedTelemetry

from .support import HTTPX, sse, usage

MODELS = ("gpt-4.1-mini", "o4-mini", "gpt-5-mini", "gpt-5.4")


# -- sentinels ---------------------------------------------------------------------------------------------

_BASE62 = string.digits + string.ascii_letters
WINDOW = 12


def _base62(data: bytes, length: int) -> str:
    number = int.from_bytes(data, "big")
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def _digests(value: str) -> Iterator[str]:
    raw = value.encode("utf-8", "surrogatepass")
    for digest in (
        hashlib.sha256(raw),
        hashlib.sha1(raw),
        hashlib.md5(raw),
        hashlib.blake2b(raw),
        hashlib.blake2b(raw, digest_size=8),
        hashlib.blake2b(raw, digest_size=16),
        hashlib.blake2s(raw),
    ):
        hexed = digest.hexdigest()
        yield hexed
        yield hexed[:16]


def _b64(value: str) -> Iterator[str]:
    raw = value.encode("utf-8", "surrogatepass")
    yield base64.b64encode(raw).decode().rstrip("=")
    yield base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass
class Secrets:
    """Every value planted in one example, by the field it went into; each has a unique high-entropy core."""

    seed: bytes
    decoration: tuple[str, str] = ("", "")
    planted: dict[str, str] = field(default_factory=dict)  # field -> planted value
    cores: dict[str, str] = field(default_factory=dict)  # field -> random core
    observed: dict[str, str] = field(default_factory=dict)  # secrets the server returned (emulator payloads)

    def core(self, where: str) -> str:
        if where in self.cores:  # the same field of the same example holds the same secret
            return self.cores[where]
        digest = hashlib.sha256(self.seed + where.encode()).digest()
        value = _base62(digest, 22 + digest[0] % 10)
        self.cores[where] = value
        return value

    def text(self, where: str) -> str:
        """Free text: the core between the example's decorations (unicode, quotes, newlines, JSON syntax)."""
        value = self.decoration[0] + self.core(where) + self.decoration[1]
        self.planted[where] = value
        return value

    def token(self, where: str) -> str:
        """A header-safe credential."""
        value = "sk-proj-" + self.core(where)
        self.planted[where] = value
        return value

    def b64(self, where: str) -> str:
        """Base64 of a secret (file data, image bytes)."""
        return base64.b64encode(self.text(where).encode()).decode()

    def data_url(self, where: str) -> str:
        return "data:image/png;base64," + self.b64(where)

    def observe(self, where: str, value: object) -> None:
        """A payload the emulator returned (its encrypted content, its text): as secret as what we planted."""
        if isinstance(value, str) and len(value) >= 16:
            self.observed[f"{where}#{len(self.observed)}"] = value

    def needles(self) -> dict[str, tuple[str, str]]:
        """needle -> (field, how)."""
        found: dict[str, tuple[str, str]] = {}
        for where, core in self.cores.items():
            found.setdefault(core, (where, "verbatim"))
            for start in range(len(core) - WINDOW + 1):
                found.setdefault(core[start : start + WINDOW], (where, "a 12-character piece"))
            for b in _b64(core):
                found.setdefault(b, (where, "base64"))
            for d in _digests(core):
                found.setdefault(d, (where, "hex digest"))
        for where, value in [*self.planted.items(), *self.observed.items()]:
            found.setdefault(value, (where, "verbatim"))
            for b in _b64(value):
                found.setdefault(b, (where, "base64"))
            for d in _digests(value):
                found.setdefault(d, (where, "hex digest"))
        return found


_DECORATION = st.text(st.characters(blacklist_categories=["Cs"]), max_size=6) | st.sampled_from(
    ["", " ", "\n", '"', "\\", "{", "the marker is ", "Remember this: the marker is ", "</s>"]
)


# -- items: every type of openai-responses-items.md, every payload and secret field planted --------------------


def unit_items(unit: str, s: Secrets, n: int) -> list[dict[str, Any]]:
    """The items of one unit (a call comes with its output); ids and call ids unique per example."""
    tag = s.seed.hex()
    cid = f"call_{tag}_{n}"
    iid = f"{tag}x{n}"
    t, k = s.text, s.token
    if unit == "user_message":
        return [{"role": "user", "content": t(f"{unit}{n}.content")}]
    if unit == "user_parts":
        return [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": t(f"{unit}{n}.input_text")},
                    {"type": "input_image", "detail": "auto", "image_url": s.data_url(f"{unit}{n}.image_data_url")},
                    {"type": "input_image", "detail": "low", "image_url": f"https://img.example/{k(f'{unit}{n}.url')}"},
                    {"type": "input_file", "filename": "a.pdf", "file_data": s.b64(f"{unit}{n}.file_data")},
                    {"type": "input_file", "file_url": f"https://files.example/{k(f'{unit}{n}.file_url')}"},
                ],
            }
        ]
    if unit in ("system_message", "developer_message"):
        return [{"type": "message", "role": unit.split("_")[0], "content": t(f"{unit}{n}.content")}]
    if unit == "conversation_message":
        return [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "text", "text": t(f"{unit}{n}.text")},
                    {"type": "computer_screenshot", "image_url": s.data_url(f"{unit}{n}.screenshot")},
                ],
            }
        ]
    if unit == "assistant_message":
        return [
            {
                "type": "message",
                "id": f"msg_{iid}",
                "role": "assistant",
                "status": "completed",
                "phase": "final_answer",
                "content": [
                    {
                        "type": "output_text",
                        "text": t(f"{unit}{n}.output_text"),
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url": f"https://cite.example/{k(f'{unit}{n}.annotation_url')}",
                                "title": t(f"{unit}{n}.annotation_title"),
                                "start_index": 0,
                                "end_index": 1,
                            }
                        ],
                        "logprobs": [
                            {"token": t(f"{unit}{n}.logprob"), "logprob": -0.1, "bytes": [], "top_logprobs": []}
                        ],
                    },
                    {"type": "refusal", "refusal": t(f"{unit}{n}.refusal")},
                ],
            }
        ]
    if unit == "reasoning":
        return [
            {
                "type": "reasoning",
                "id": f"rs_{iid}",
                "summary": [{"type": "summary_text", "text": t(f"{unit}{n}.summary")}],
                "content": [{"type": "reasoning_text", "text": t(f"{unit}{n}.reasoning_text")}],
                "encrypted_content": k(f"{unit}{n}.encrypted_content"),
            }
        ]
    if unit == "function_call":
        return [
            {
                "type": "function_call",
                "id": f"fc_{iid}",
                "call_id": cid,
                "name": "lookup",
                "arguments": json.dumps({"q": t(f"{unit}{n}.arguments")}),
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": cid, "output": t(f"{unit}{n}.output")},
        ]
    if unit == "function_call_output_parts":
        return [
            {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": t(f"{unit}{n}.arguments")},
            {
                "type": "function_call_output",
                "call_id": cid,
                "output": [
                    {"type": "input_text", "text": t(f"{unit}{n}.output_text")},
                    {"type": "input_image", "image_url": s.data_url(f"{unit}{n}.output_image")},
                    {"type": "input_file", "filename": "r.bin", "file_data": s.b64(f"{unit}{n}.output_file")},
                ],
            },
        ]
    if unit == "orphan_function_call_output":
        return [{"type": "function_call_output", "call_id": cid, "output": t(f"{unit}{n}.output")}]
    if unit == "custom_tool_call":
        return [
            {"type": "custom_tool_call", "call_id": cid, "name": "grammar", "input": t(f"{unit}{n}.input")},
            {"type": "custom_tool_call_output", "call_id": cid, "output": t(f"{unit}{n}.output")},
        ]
    if unit == "computer_call":
        return [
            {
                "type": "computer_call",
                "id": f"cu_{iid}",
                "call_id": cid,
                "status": "completed",
                "action": {"type": "type", "text": t(f"{unit}{n}.typed_text")},
                "pending_safety_checks": [{"id": "sc_1", "code": "c", "message": t(f"{unit}{n}.safety")}],
            },
            {
                "type": "computer_call_output",
                "call_id": cid,
                "output": {"type": "computer_screenshot", "image_url": s.data_url(f"{unit}{n}.screenshot")},
                "acknowledged_safety_checks": [{"id": "sc_1", "code": "c", "message": t(f"{unit}{n}.ack")}],
            },
        ]
    if unit == "shell_call":
        return [
            {
                "type": "shell_call",
                "call_id": cid,
                "status": "completed",
                "action": {"commands": [t(f"{unit}{n}.command")], "timeout_ms": 1000, "max_output_length": 100},
            },
            {
                "type": "shell_call_output",
                "call_id": cid,
                "max_output_length": 100,
                "output": [
                    {
                        "stdout": t(f"{unit}{n}.stdout"),
                        "stderr": t(f"{unit}{n}.stderr"),
                        "outcome": {"type": "exit", "exit_code": 0},
                    }
                ],
            },
        ]
    if unit == "apply_patch_call":
        return [
            {
                "type": "apply_patch_call",
                "call_id": cid,
                "status": "completed",
                "operation": {
                    "type": "update_file",
                    "path": f"src/{k(f'{unit}{n}.path')}.py",
                    "diff": t(f"{unit}{n}.diff"),
                },
            },
            {"type": "apply_patch_call_output", "call_id": cid, "status": "completed", "output": t(f"{unit}{n}.out")},
        ]
    if unit == "local_shell_call":
        return [
            {
                "type": "local_shell_call",
                "id": f"lsh_{iid}",
                "call_id": cid,
                "status": "completed",
                "action": {
                    "type": "exec",
                    "command": [t(f"{unit}{n}.command")],
                    "env": {"API_TOKEN": k(f"{unit}{n}.env")},
                    "working_directory": f"/home/{k(f'{unit}{n}.cwd')}",
                    "user": k(f"{unit}{n}.user"),
                    "timeout_ms": 1000,
                },
            },
            {"type": "local_shell_call_output", "id": cid, "output": t(f"{unit}{n}.output")},
        ]
    if unit == "compaction":
        return [{"type": "compaction", "id": f"cmp_{iid}", "encrypted_content": k(f"{unit}{n}.encrypted_content")}]
    if unit == "compaction_trigger":
        return [{"type": "compaction_trigger"}]
    if unit == "item_reference":
        return [{"type": "item_reference", "id": f"msg_ref{iid}"}]
    if unit == "configuration_update":
        schema = {"type": "object", "description": t(f"{unit}{n}.schema")}
        return [
            {
                "type": "configuration_update",
                "reasoning": {"effort": "low"},
                "text": {"format": {"type": "json_schema", "name": "cfg", "schema": schema}},
            }
        ]
    if unit == "web_search_call":
        return [
            {
                "type": "web_search_call",
                "id": f"ws_{iid}",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": t(f"{unit}{n}.query"),
                    "queries": [t(f"{unit}{n}.queries")],
                    "sources": [{"type": "url", "url": f"https://{k(f'{unit}{n}.source')}.example"}],
                },
            }
        ]
    if unit == "file_search_call":
        return [
            {
                "type": "file_search_call",
                "id": f"fs_{iid}",
                "status": "completed",
                "queries": [t(f"{unit}{n}.query")],
                "results": [
                    {
                        "text": t(f"{unit}{n}.result"),
                        "filename": f"{k(f'{unit}{n}.filename')}.txt",
                        "file_id": "file_1",
                        "score": 0.5,
                        "attributes": {"k": t(f"{unit}{n}.attribute")},
                    }
                ],
            }
        ]
    if unit == "code_interpreter_call":
        return [
            {
                "type": "code_interpreter_call",
                "id": f"ci_{iid}",
                "status": "completed",
                "container_id": "cntr_1",
                "code": t(f"{unit}{n}.code"),
                "outputs": [
                    {"type": "logs", "logs": t(f"{unit}{n}.logs")},
                    {"type": "image", "url": s.data_url(f"{unit}{n}.image")},
                ],
            }
        ]
    if unit == "image_generation_call":
        return [
            {
                "type": "image_generation_call",
                "id": f"ig_{iid}",
                "status": "completed",
                "result": s.b64(f"{unit}{n}.result"),
                "revised_prompt": t(f"{unit}{n}.revised_prompt"),
            }
        ]
    if unit == "mcp":
        return [
            {
                "type": "mcp_list_tools",
                "id": f"mcpl_{iid}",
                "server_label": "lbl",
                "tools": [{"name": "t", "description": t(f"{unit}{n}.tool_description"), "input_schema": {}}],
                "error": t(f"{unit}{n}.list_error"),
            },
            {
                "type": "mcp_approval_request",
                "id": f"mcpr_{iid}",
                "name": "t",
                "server_label": "lbl",
                "arguments": t(f"{unit}{n}.approval_arguments"),
            },
            {
                "type": "mcp_approval_response",
                "approval_request_id": f"mcpr_{iid}",
                "approve": True,
                "reason": t(f"{unit}{n}.reason"),
            },
            {
                "type": "mcp_call",
                "id": f"mcp_{iid}",
                "name": "t",
                "server_label": "lbl",
                "arguments": json.dumps({"a": t(f"{unit}{n}.arguments")}),
                "output": t(f"{unit}{n}.output"),
                "error": t(f"{unit}{n}.error"),
            },
        ]
    if unit == "tool_search":
        return [
            {
                "type": "tool_search_call",
                "call_id": cid,
                "status": "completed",
                "execution": "client",
                "arguments": {"q": t(f"{unit}{n}.arguments")},
            },
            {
                "type": "tool_search_output",
                "call_id": cid,
                "status": "completed",
                "execution": "client",
                "tools": [{"type": "function", "name": "f", "description": t(f"{unit}{n}.tools"), "parameters": {}}],
            },
        ]
    if unit == "additional_tools":
        return [
            {
                "type": "additional_tools",
                "id": f"at_{iid}",
                "tools": [{"type": "function", "name": "f", "description": t(f"{unit}{n}.tools"), "parameters": {}}],
            }
        ]
    if unit == "program":
        return [
            {
                "type": "program",
                "id": f"pg_{iid}",
                "call_id": cid,
                "code": t(f"{unit}{n}.code"),
                "fingerprint": k(f"{unit}{n}.fp"),
            },
            {
                "type": "program_output",
                "id": f"pgo_{iid}",
                "call_id": cid,
                "status": "completed",
                "result": t(f"{unit}{n}.result"),
            },
        ]
    if unit == "multi_agent":
        return [
            {
                "type": "agent_message",
                "id": f"am_{iid}",
                "author": "a",
                "recipient": "b",
                "content": t(f"{unit}{n}.content"),
            },
            {
                "type": "multi_agent_call",
                "id": f"mac_{iid}",
                "call_id": cid,
                "action": "send_message",
                "arguments": t(f"{unit}{n}.a"),
            },
            {
                "type": "multi_agent_call_output",
                "call_id": cid,
                "action": "send_message",
                "output": [{"type": "output_text", "text": t(f"{unit}{n}.output")}],
            },
        ]
    assert unit == "unknown_item", unit
    return [
        {
            "type": "brand_new_item",
            "id": f"new_{iid}",
            "payload": t(f"{unit}{n}.payload"),
            "encrypted_content": k(f"{unit}{n}.enc"),
        }
    ]


UNITS = (
    "user_message",
    "user_parts",
    "system_message",
    "developer_message",
    "conversation_message",
    "assistant_message",
    "reasoning",
    "function_call",
    "function_call_output_parts",
    "orphan_function_call_output",
    "custom_tool_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
    "local_shell_call",
    "compaction",
    "compaction_trigger",
    "item_reference",
    "configuration_update",
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp",
    "tool_search",
    "additional_tools",
    "program",
    "multi_agent",
    "unknown_item",
)
# Units the emulator accepts as they are (no fabricated encrypted content, no dangling reference or tool output).
EMULATOR_SAFE_UNITS = tuple(
    u for u in UNITS if u not in ("reasoning", "compaction", "item_reference", "orphan_function_call_output")
)


def items_of(units: Iterable[str], s: Secrets) -> list[dict[str, Any]]:
    return [item for n, unit in enumerate(units) for item in unit_items(unit, s, n)]


def mcp_tool(s: Secrets, where: str) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "lbl",
        "server_url": f"https://user:{s.token(where + '.server_url_password')}@mcp.example/sse",
        "authorization": s.token(where + ".authorization"),
        "headers": {
            "Authorization": f"Bearer {s.token(where + '.headers_bearer')}",
            "X-Key": s.token(where + ".header"),
        },
        "require_approval": "never",
    }


FUNCTION_TOOL: Any = {
    "type": "function",
    "name": "lookup",
    "description": "Look something up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "strict": False,
}

# Request parameters with a secret or end-user value; each example passes a subset.
PARAMS = ("instructions", "metadata", "user", "safety_identifier", "prompt_cache_key", "mcp", "extra_headers", "prompt")
CREATE_PARAMS = frozenset(inspect.signature(Responses.create).parameters)
STREAM_PARAMS = frozenset(inspect.signature(Responses.stream).parameters)


def request_kwargs(
    s: Secrets, params: Iterable[str], where: str, accepted: frozenset[str] = CREATE_PARAMS
) -> dict[str, Any]:
    """The drawn request parameters; those the installed SDK's method lacks go in `extra_body`."""
    kwargs: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    for param in params:
        if param == "instructions":
            kwargs["instructions"] = s.text(f"{where}.instructions")
        elif param == "metadata":
            kwargs["metadata"] = {
                "tenant": s.text(f"{where}.metadata.tenant"),
                "email": s.token(f"{where}.metadata.email"),
            }
        elif param in ("user", "safety_identifier", "prompt_cache_key"):
            value = s.token(f"{where}.{param}")
            if param in accepted:
                kwargs[param] = value
            else:
                extra_body[param] = value
        elif param == "mcp":
            kwargs["tools"] = [FUNCTION_TOOL, mcp_tool(s, f"{where}.mcp")]
        elif param == "extra_headers":
            kwargs["extra_headers"] = {
                "X-Secret-Header": s.token(f"{where}.extra_header"),
                "Cookie": f"session={s.token(f'{where}.cookie')}",
            }
        elif param == "prompt":
            extra_body["prompt"] = {"id": "pmpt_fuzz", "variables": {"name": s.text(f"{where}.prompt.variable")}}
    if extra_body:
        kwargs["extra_body"] = extra_body
    return kwargs


def client_kwargs(s: Secrets) -> dict[str, Any]:
    return {
        "api_key": s.token("client.api_key"),
        "organization": "org-" + s.core("client.organization"),
        "project": "proj_" + s.core("client.project"),
        "default_headers": {"X-Default-Secret": s.token("client.default_header")},
    }


# -- what was exported ---------------------------------------------------------------------------------------


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    else:
        yield str(value)


def _attributes(where: str, attributes: Any) -> Iterator[tuple[str, str]]:
    for key, value in dict(attributes or {}).items():
        yield where + " key", str(key)
        for text in _strings(value):
            yield f"{where} {key}", text


class Exports:
    """Everything that leaves the process (spans, metrics, OpenTelemetry log events) and every `otel_responses`
    log record."""

    def __init__(self, captured: CapturedTelemetry, caplog: pytest.LogCaptureFixture) -> None:
        self.captured = captured
        self.caplog = caplog
        self._format = logging.Formatter()

    def reset(self) -> None:
        self.captured.clear()
        self.caplog.clear()

    def haystack(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for span in self.captured.spans():
            found.append(("span name", span.name))
            found.append(("status description", span.status.description or ""))
            found.extend(_attributes(f"span {span.name!r}", span.attributes))
            for event in span.events:
                found.append(("event name", event.name))
                found.extend(_attributes(f"event {event.name!r}", event.attributes))
            for link in span.links:
                found.extend(_attributes("link", link.attributes))
        data = self.captured.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found.append(("metric name", metric.name))
                    for point in metric.data.data_points:
                        found.extend(_attributes(f"metric {metric.name}", point.attributes))
                        for exemplar in getattr(point, "exemplars", None) or ():
                            found.extend(_attributes(f"exemplar {metric.name}", exemplar.filtered_attributes))
        for event_record in self.captured.events():
            name = event_record.event_name
            found.append(("log event name", name or ""))
            found.append(("log event body", "" if event_record.body is None else str(event_record.body)))
            found.extend(_attributes(f"log event {name!r}", event_record.attributes))
        for record in self.caplog.records:
            if record.name == "otel_responses" or record.name.startswith("otel_responses."):
                found.append((f"log {record.name}", record.getMessage()))
                if record.exc_info:
                    found.append((f"log {record.name} exception", self._format.formatException(record.exc_info)))
                if record.stack_info:
                    found.append((f"log {record.name} stack", record.stack_info))
        return found

    def assert_clean(self, s: Secrets) -> None:
        haystack = self.haystack()
        joined = "\x00".join(text for _, text in haystack)
        grams = {joined[i : i + WINDOW] for i in range(len(joined) - WINDOW + 1)}
        needles = s.needles()
        # Every needle is at least a window long: only those whose first window occurs need a full search.
        leaks = [needle for needle in needles if needle[:WINDOW] in grams and needle in joined]
        if leaks:
            details = []
            for needle in leaks[:10]:
                where, how = needles[needle]
                places = [place for place, text in haystack if needle in text]
                details.append(f"{where} ({how}: {needle!r}) in {places[:3]}")
            raise AssertionError("secret exported:\n" + "\n".join(details))
        assert self.captured.spans(), "no span: the instrumentation was not on"


@dataclass
class Canned:
    """What the transport answers: a response over the drawn output items, or an error."""

    s: Secrets
    units: list[str]
    status: str = "completed"
    error_status: int | None = None
    error_shape: str = "json"
    terminal: str = "response.completed"
    calls: int = 0

    def response(self, response_id: str = "resp_fuzz") -> dict[str, Any]:
        s = self.s
        body: dict[str, Any] = {
            "id": f"{response_id}_{s.seed.hex()}",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": "gpt-4.1-mini",
            "status": self.status,
            "instructions": s.text("response.instructions"),
            "metadata": {"tenant": s.text("response.metadata")},
            "user": s.token("response.user"),
            "safety_identifier": s.token("response.safety_identifier"),
            "prompt_cache_key": s.token("response.prompt_cache_key"),
            "tools": [FUNCTION_TOOL, mcp_tool(s, "response.tools")],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "output": items_of(self.units, s),
            "usage": usage(),
            "error": None,
            "incomplete_details": None,
            "conversation": {"id": "conv_fuzz"},
            "text": {"format": {"type": "text"}},
        }
        if self.status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        if self.status == "failed":
            body["error"] = {"code": "server_error", "message": s.text("response.error.message")}
        return body

    def headers(self) -> dict[str, str]:
        return {
            "x-request-id": f"req_{self.s.seed.hex()}",
            "set-cookie": f"session={self.s.token('response_header.set_cookie')}",
            "x-echo": self.s.token("response_header.echo"),
        }

    def error(self) -> Any:
        assert self.error_status is not None
        message = self.s.text("error.message")
        if self.error_shape == "json":
            body = {"error": {"message": message, "type": "invalid_request_error", "param": "input", "code": "bad"}}
            return HTTPX.Response(self.error_status, json=body, headers=self.headers())
        if self.error_shape == "flat":
            return HTTPX.Response(
                self.error_status, json={"message": message, "detail": message}, headers=self.headers()
            )
        return HTTPX.Response(self.error_status, text=message, headers=self.headers())

    def events(self) -> list[dict[str, Any]]:
        s = self.s
        final = self.response()
        start = {**final, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": start},
            {"type": "response.in_progress", "response": start},
        ]
        for index, item in enumerate(final["output"]):
            events.append({"type": "response.output_item.added", "output_index": index, "item": item})
            if item.get("type") == "message":
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item.get("id", "msg"),
                        "output_index": index,
                        "content_index": 0,
                        "delta": s.text("stream.output_text.delta"),
                        "logprobs": [],
                    }
                )
            if item.get("type") == "function_call":
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item.get("id", "fc"),
                        "output_index": index,
                        "delta": s.text("stream.arguments.delta"),
                    }
                )
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.brand_new_event", "payload": s.text("stream.unknown_event")})
        if self.terminal == "error":
            events.append({"type": "error", "code": "server_error", "message": s.text("stream.error"), "param": None})
        elif self.terminal == "api_error":
            events.append({"error": {"message": s.text("stream.api_error"), "type": "server_error", "code": "boom"}})
        elif self.terminal == "response.failed":
            events.append(
                {
                    "type": "response.failed",
                    "response": {
                        **final,
                        "status": "failed",
                        "error": {"code": "server_error", "message": s.text("stream.failed")},
                    },
                }
            )
        elif self.terminal == "response.incomplete":
            incomplete = {**final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
            events.append({"type": "response.incomplete", "response": incomplete})
        else:
            events.append({"type": self.terminal, "response": final})
        return events

    def __call__(self, request: Any) -> Any:
        self.calls += 1
        if self.error_status is not None:
            return self.error()
        path = request.url.path
        method = request.method
        body = json.loads(request.content) if request.content else {}
        if method == "POST" and path.endswith("/responses") and body.get("stream"):
            headers = {**self.headers(), "content-type": "text/event-stream"}
            return HTTPX.Response(200, content=sse(self.events()), headers=headers)
        if path.endswith("/responses/compact"):
            compacted = {"id": f"cmp_{self.s.seed.hex()}", "object": "response.compaction", "created_at": 1}
            compacted["output"] = items_of(["compaction", *self.units], self.s)
            return HTTPX.Response(200, json={**compacted, "usage": usage()}, headers=self.headers())
        if path.endswith("/input_tokens"):
            return HTTPX.Response(
                200, json={"object": "response.input_tokens", "input_tokens": 5}, headers=self.headers()
            )
        if path.endswith("/input_items") or (path.endswith("/items") and method == "GET"):
            page = {
                "object": "list",
                "data": items_of(self.units, self.s),
                "has_more": False,
                "first_id": None,
                "last_id": None,
            }
            return HTTPX.Response(200, json=page, headers=self.headers())
        if path.endswith("/items"):
            page = {
                "object": "list",
                "data": items_of(self.units, self.s),
                "has_more": False,
                "first_id": None,
                "last_id": None,
            }
            return HTTPX.Response(200, json=page, headers=self.headers())
        if path.endswith("/conversations"):
            conversation = {
                "id": "conv_fuzz",
                "object": "conversation",
                "created_at": 1,
                "metadata": {"k": self.s.text("conversation.metadata")},
            }
            return HTTPX.Response(200, json=conversation, headers=self.headers())
        return HTTPX.Response(200, json=self.response(), headers=self.headers())


# -- strategies --------------------------------------------------------------------------------------------

seeds = st.binary(min_size=8, max_size=8)
decorations = st.tuples(_DECORATION, _DECORATION)
param_sets = st.sets(st.sampled_from(PARAMS))
any_units = st.lists(st.sampled_from(UNITS), max_size=8)
all_units = st.permutations(UNITS)
output_units = st.one_of(any_units, any_units, any_units, all_units)  # every type at once in a quarter
# Request-side items are fuzzed against the emulator too; the SDK's transform of a long input costs ~100 ms.
input_units = st.lists(st.sampled_from(UNITS), max_size=3)
safe_units = st.lists(st.sampled_from(EMULATOR_SAFE_UNITS), max_size=6)


def ignore_api_errors(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except openai.APIError:
        return None


# -- workloads ---------------------------------------------------------------------------------------------


def observe_output(s: Secrets, response: Any) -> None:
    for item in getattr(response, "output", None) or ():
        s.observe("emulator.encrypted_content", getattr(item, "encrypted_content", None))
        s.observe("emulator.arguments", getattr(item, "arguments", None))


def answers(response: Any, s: Secrets) -> list[dict[str, Any]]:
    """Tool outputs for every function call the emulator made."""
    return [
        {"type": "function_call_output", "call_id": item.call_id, "output": s.text("emulator_session.tool_output")}
        for item in getattr(response, "output", None) or ()
        if getattr(item, "type", None) == "function_call"
    ]


def emulator_session(
    client: openai.OpenAI, s: Secrets, model: str, store: bool, params: set[str], units: list[str]
) -> None:
    """Three turns: a planted first turn, a full replay plus the drawn items, and a server-chained turn."""
    include: Any = ["reasoning.encrypted_content"]
    kwargs = request_kwargs(s, params, "turn1")
    kwargs.setdefault("tools", [FUNCTION_TOOL])
    text = f"Remember this: the marker is {s.token('emulator_session.marker')}. Please use lookup."
    history: list[Any] = [{"role": "user", "content": text}, *items_of(["user_parts"], s)]
    first = ignore_api_errors(
        lambda: client.responses.create(model=model, input=history, store=store, include=include, **kwargs)
    )
    if first is None:
        return
    observe_output(s, first)
    history += [*first.output, *answers(first, s), *items_of(units, s)]
    kwargs = request_kwargs(s, params, "turn2")
    second = ignore_api_errors(
        lambda: client.responses.create(model=model, input=history, store=store, include=include, **kwargs)
    )
    observe_output(s, second)
    if store:
        kwargs = request_kwargs(s, params, "turn3")
        answer: Any = [
            *answers(first, s),
            {"role": "user", "content": s.text("turn3.question") + " What is the marker?"},
        ]
        third = ignore_api_errors(
            lambda: client.responses.create(model=model, previous_response_id=first.id, input=answer, **kwargs)
        )
        observe_output(s, third)


HAS_COMPACT = hasattr(Responses, "compact")
HAS_INPUT_TOKENS = hasattr(openai.OpenAI(api_key="x").responses, "input_tokens")


def every_method_sync(client: openai.OpenAI, s: Secrets, sent: list[str], params: set[str]) -> None:
    responses = client.responses
    kwargs = request_kwargs(s, params, "mock")
    items: Any = items_of(sent, s)
    responses.create(model="gpt-4.1-mini", input=items, include=["reasoning.encrypted_content"], **kwargs)
    responses.create(
        model="gpt-4.1-mini", previous_response_id=f"resp_fuzz_{s.seed.hex()}", input=items, store=False, **kwargs
    )
    responses.retrieve(f"resp_fuzz_{s.seed.hex()}")
    list(responses.input_items.list(f"resp_fuzz_{s.seed.hex()}"))
    if HAS_COMPACT:
        responses.compact(model="gpt-4.1-mini", input=items)
    if HAS_INPUT_TOKENS:
        responses.input_tokens.count(model="gpt-4.1-mini", input=items, instructions=s.text("count.instructions"))
    client.conversations.create(items=items, metadata={"k": s.text("conversation.create.metadata")})
    client.conversations.items.create("conv_fuzz", items=items)
    list(client.conversations.items.list("conv_fuzz"))
