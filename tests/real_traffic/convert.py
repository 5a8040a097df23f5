"""Convert VCR cassettes (YAML, as recorded by public projects' test suites) into this suite's own format.

Not run by the tests: it documents how every file under ``cassettes/`` was made, and remakes them from local
copies of the source repositories (``python -m tests.real_traffic.convert SOURCE_ROOT``, where SOURCE_ROOT holds
``<source>/<commit>/<path in repository>`` files). See README.md for the format, the scrubbing and provenance.

Kept: only Responses API interactions (``/v1/responses...``, ``/v1/conversations...`` on api.openai.com).
Dropped (and listed in the file's ``dropped``): every other interaction (files, vector stores, other providers).
Request headers are all dropped; response headers keep ``content-type`` and ``x-request-id`` only.
Bodies are kept value for value (JSON) or byte for byte (SSE text), except strings longer than
``_BIG`` characters outside ``encrypted_content``/``fingerprint`` (base64 images, files), replaced with a short
placeholder of the same kind (see ``_placeholder``), the same placeholder for the same original everywhere in
the cassette, so a replayed copy still equals the returned one.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

HERE = Path(__file__).parent
_BIG = 4096
_OPAQUE_KEYS = {"encrypted_content", "fingerprint"}
_KEEP_HEADERS = ("content-type", "x-request-id")
_API_PREFIXES = ("/v1/responses", "/v1/conversations")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")

SOURCES = {
    # source name: (repository, license)
    "pydantic-ai": ("pydantic/pydantic-ai", "MIT"),
    "opentelemetry-python-contrib": ("open-telemetry/opentelemetry-python-contrib", "Apache-2.0"),
    "openinference": ("Arize-ai/openinference", "Apache-2.0"),
    "openllmetry": ("traceloop/openllmetry", "Apache-2.0"),
    "dd-trace-py": ("DataDog/dd-trace-py", "Apache-2.0 OR BSD-3-Clause"),
}


def _placeholder(original: str) -> str:
    """A short stand-in of the same kind: a ``data:`` URL stays a ``data:`` URL of the same media type, base64
    stays base64 (a hex digest is base64 alphabet); the digest keeps distinct originals distinct."""
    digest = hashlib.sha256(original.encode()).hexdigest()[:24]
    if original.startswith("data:") and "," in original:
        head = original.split(",", 1)[0]
        return f"{head},UExBQ0VIT0xERVI{digest}"  # "PLACEHOLDER" in base64, then the digest
    return f"UExBQ0VIT0xERVI{digest}"


def _big_strings(value: Any, found: set[str], key: str | None = None) -> None:
    if isinstance(value, str):
        if len(value) > _BIG and key not in _OPAQUE_KEYS and (value.startswith("data:") or _looks_b64(value)):
            found.add(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _big_strings(v, found, k)
    elif isinstance(value, list):
        for v in value:
            _big_strings(v, found, key)


def _looks_b64(value: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9+/=_-]+", value[:2000]) is not None


def _replace(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, dict):
        return {k: _replace(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, mapping) for v in value]
    return value


def _body(part: dict[str, Any]) -> tuple[Any, str | None]:
    """(parsed JSON or None, raw text or None) of a VCR request/response part."""
    if "parsed_body" in part:
        return part["parsed_body"], None
    body = part.get("body", part.get("content"))  # vcrpy's httpx form keeps the response text in "content"
    text = body.get("string") if isinstance(body, dict) else body
    if text is None or text == "":
        return None, None
    if isinstance(text, bytes):
        text = _decode(text, part.get("headers") or {})
    try:
        return json.loads(text), None
    except ValueError:
        return None, text


def _decode(raw: bytes, headers: dict[str, Any]) -> str:
    """Bodies some recorders kept compressed, as the server sent them (``content-encoding``)."""
    encoding = {k.lower(): v for k, v in headers.items()}.get("content-encoding", [""])
    encoding = encoding[0] if isinstance(encoding, list) else encoding
    if encoding == "gzip":
        raw = gzip.decompress(raw)
    elif encoding == "br":
        import brotli  # type: ignore[import-not-found]  # only for remaking cassettes: pip install brotli

        raw = brotli.decompress(raw)
    return raw.decode("utf-8")


def _headers(headers: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if name.lower() in _KEEP_HEADERS:
            out[name.lower()] = value[0] if isinstance(value, list) else value
    return out


def convert(source: str, commit: str, path: str, text: str) -> dict[str, Any]:
    data = yaml.load(text, Loader=yaml.CSafeLoader)
    calls: list[dict[str, Any]] = []
    dropped: list[str] = []
    for interaction in data["interactions"]:
        request, response = interaction["request"], interaction["response"]
        url = urlsplit(request["uri"])
        if url.hostname != "api.openai.com" or not url.path.startswith(_API_PREFIXES):
            dropped.append(f"{request['method']} {url.hostname}{url.path}")
            continue
        request_body, request_text = _body(request)
        response_body, response_text = _body(response)
        call: dict[str, Any] = {
            "method": request["method"],
            "path": url.path,
            "query": dict(parse_qsl(url.query)),
            "request_body": request_body if request_text is None else request_text,
            "status": response["status"]["code"] if "status" in response else response["status_code"],
            "response_headers": _headers(response.get("headers")),
        }
        if response_text is not None:
            call["response_sse"] = response_text
        else:
            call["response_body"] = response_body
        calls.append(call)
    big: set[str] = set()
    for call in calls:
        _big_strings(call["request_body"], big)
        _big_strings(call.get("response_body"), big)
        if "response_sse" in call:
            for line in call["response_sse"].splitlines():
                if line.startswith("data: "):
                    with contextlib.suppress(ValueError):
                        _big_strings(json.loads(line[6:]), big)
    mapping = {original: _placeholder(original) for original in big}
    for call in calls:
        call["request_body"] = _replace(call["request_body"], mapping)
        if "response_body" in call:
            call["response_body"] = _replace(call["response_body"], mapping)
        else:
            sse = call["response_sse"]
            for original, short in mapping.items():
                sse = sse.replace(original, short)
            call["response_sse"] = sse
    repository, license_ = SOURCES[source]
    return {
        "source": {"repository": repository, "path": path, "commit": commit, "license": license_},
        "dropped": dropped,
        "placeholders": len(mapping),
        "calls": calls,
    }


def out_name(source: str, path: str) -> Path:
    p = Path(path)
    return HERE / "cassettes" / source / p.parent.name / (p.stem + ".json")


def main(root: str, only: list[str] | None = None) -> None:
    for file in sorted(Path(root).glob("*/*/**/*")):
        if not file.is_file() or file.suffix not in (".yaml", ".yml"):
            continue
        rel = file.relative_to(root)
        source, commit, path = rel.parts[0], rel.parts[1], "/".join(rel.parts[2:])
        if only is not None and path not in only:
            continue
        converted = convert(source, commit, path, file.read_text())
        if not converted["calls"]:
            continue
        blob = json.dumps(converted, indent=1, ensure_ascii=False)
        if _EMAIL.search(blob):
            print("check personal data:", rel, sorted(set(_EMAIL.findall(blob)))[:5])
        target = out_name(source, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(blob + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or None)
