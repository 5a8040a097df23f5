"""The report page: conversations as HTML, every string escaped, one inline style and one inline script.

Everything shown comes from span attributes and events (ids, types, counts, hashes), never from a payload: a span
holds none. Strings are still hostile input: a model name, an id or a service name is escaped wherever it goes,
cut to ``MAX_SHOWN`` characters, and shown with invisible or direction-changing characters spelled out.

The markup is lean on purpose (a page of 10,000 spans is a few megabytes): ``<code>`` for ids, ``<small>`` for
secondary text, ``<span class="c …">`` for a chip; classes are explained in ``assets.CSS``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Final
from urllib.parse import quote

from ... import attributes as a
from ...signals import CATALOGUE, ERROR, INFO, WARNING, Signal
from ...version import __version__
from .assets import CONTENT_SECURITY_POLICY, CSS, SCRIPT
from .model import CHANGED, CONTINUES, DROPPED, LINEAGE, SEVERITIES, TRACE, Call, Conversation, Gap, conversations
from .records import SpanRecord, Value
from .urls import (
    DOCS_URL,
    SPAN_ID,
    TRACE_ID,
    BadTemplate,
    check_docs_url,
    check_trace_url,
    signal_link,
    signals_page,
)

__all__ = ["DOCS_URL", "BadTemplate", "Options", "check_docs_url", "check_trace_url", "render", "render_conversations"]

MAX_SHOWN: Final = 300  # characters of one string on the page; this package's spans cap theirs at 256
MAX_PROBLEMS: Final = 50
SUMMARY_CHUNK: Final = 100
DASH: Final = "&#8211;"  # HTML entities: the source stays ASCII
TIMES: Final = "&#215;"
COLUMNS: Final = (
    "turn",
    "time · duration",
    "operation · model",
    "state · store",
    "instructions",
    "items in → out",
    "tool calls",
    "reasoning · compaction",
    "tokens",
)
_SEVERITY_CLASS: Final = {ERROR: "se", WARNING: "sw", INFO: "si"}
_SAFE = re.compile(r"[\w .,:;/@+=#%()\[\]{}~*?!$|^-]*", re.ASCII)  # nothing to escape or spell out
# Shown spelled out (\u202e): control characters, invisible ones, those that change the text's direction, and lone
# surrogates (valid JSON, not encodable as UTF-8).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
_HELP: Final = (
    (
        "turn",
        "1 for a first call, the continued turn's + 1: turns count responses, so a tool round trip (the call, then "
        "its output sent back) is a turn of its own; a striped row is a turn missing from the input",
    ),
    ("state · store", "how the call carried its context; the effective store flag (and what was asked, if other)"),
    ("instructions", "a short hash of the instructions sent (never their text), marked where it changes or is gone"),
    ("items in → out", "item types sent and returned, in order; a run of one type is one chip with its count"),
    ("tool calls", "ok, none, pending (calls awaiting outputs), or the first failing tool-call signal"),
    (
        "reasoning",
        "encrypted reasoning asked for, sent back (in) and returned (out); the reasoning context the response used, "
        "and the replayed reasoning the API withheld from the model, with its reasons (turn_boundary: an earlier "
        "turn's, by design); compaction when it happened",
    ),
    ("signals", "each named context loss with its severity, metadata (counts, types, ids) and the fix"),
)


@dataclass(frozen=True)
class Options:
    """What the page says besides the spans: where they came from and where its links go."""

    title: str = "otel-responses report"
    trace_url: str | None = None  # e.g. http://127.0.0.1:16686/trace/{trace_id}?uiFind={span_id} (Jaeger)
    docs_url: str = DOCS_URL  # the documentation site's root (a team's own copy, say)
    sources: Sequence[str] = ()
    problems: Sequence[str] = ()
    other_spans: int = 0  # spans of other instrumentations in the input, left out
    notes: Sequence[str] = ()  # what was skipped without being a problem (the app's own output)
    labels: Mapping[str, str] = field(default_factory=dict)  # conversation key -> a caption (the demo's scenarios)
    written: datetime | None = None  # default: now


def render(spans: Iterable[SpanRecord], options: Options | None = None) -> str:
    """The whole page for ``spans`` (this package's; see ``records``)."""
    options = options or Options()
    return render_conversations(conversations(spans, options.labels), options)


def render_conversations(found: list[Conversation], options: Options | None = None) -> str:
    """The whole page for conversations already built (``model.conversations``)."""
    options = options or Options()
    if options.trace_url is not None:
        check_trace_url(options.trace_url)
    check_docs_url(options.docs_url)
    return _Page(options).document(found)


def _t(value: object, limit: int = MAX_SHOWN) -> str:
    """Text for HTML (content or a quoted attribute): cut, invisible characters spelled out, escaped."""
    text = value if isinstance(value, str) else _plain(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    elif _SAFE.fullmatch(text):
        return text
    text = _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


def _value(text: str) -> str:
    """A filter's value, as the script compares it with the conversations' tokens: whole, only escaped."""
    return html.escape(text.encode("utf-8", "replace").decode(), quote=True)


def _token(text: str) -> str:
    """A conversation's filter token: percent-encoded UTF-8 (no space, nothing to escape), decoded by the script."""
    return quote(text, safe="", errors="replace")


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(_plain(v) for v in value)
    if value is None:
        return ""
    return str(value)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _number(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def _time(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / 1e9, tz=timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _date(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(nanos: int) -> str:
    ms = nanos / 1e6
    if ms < 1000:
        return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"
    return f"{ms / 1000:.2f} s"


def _type_class(item_type: str) -> str:
    if item_type == "message":
        return "tm"
    if item_type == "reasoning":
        return "tr"
    if item_type.startswith("compaction"):
        return "tk"
    if item_type.startswith("...("):  # the head and the tail of a long list, the middle counted
        return "tn"
    if item_type.endswith("_output"):
        return "to"
    if item_type.endswith(("_call", "_request")):
        return "tc"
    return "tx"


def _chips(types: Sequence[str]) -> str:
    """Item types as chips, a run of one type as one chip with its count."""
    out: list[str] = []
    i = 0
    while i < len(types):
        j = i
        while j < len(types) and types[j] == types[i]:
            j += 1
        run = f" {TIMES}{j - i}" if j - i > 1 else ""
        out.append(f'<span class="c {_type_class(types[i])}">{_t(types[i], 80)}{run}</span>')
        i = j
    return "".join(out)


def _hash_class(value: str) -> str:
    try:
        return f"h{int(value[:6], 16) % 12}"
    except ValueError:
        return "h0"


def _sev(severity: str) -> str:
    """A severity's class: only the catalogue's three (anything else a file says is ``su``, unknown)."""
    return _SEVERITY_CLASS.get(severity, "su")


def _severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def _worst(conversation: Conversation) -> str | None:
    return next((s for s in SEVERITIES if conversation.count(s)), None)


class _Page:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.columns = len(COLUMNS)
        self.head = "".join(f"<th>{h}</th>" for h in COLUMNS)

    def document(self, found: list[Conversation]) -> str:
        o = self.options
        written = o.written or datetime.now(timezone.utc)
        calls = sum(len(c.calls) for c in found)
        parts = [
            "<!DOCTYPE html>\n",
            '<html lang="en" data-ready="0">\n<head>\n<meta charset="utf-8">\n',
            f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n',
            '<meta name="referrer" content="no-referrer">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{_t(o.title)}: {_plural(len(found), 'conversation')}</title>\n",
            f"<style>{CSS}</style>\n</head>\n<body>\n<header>\n<h1>{_t(o.title)}</h1>\n",
            f'<p class="meta">{_plural(len(found), "conversation")}, {_plural(calls, "call")}',
        ]
        if o.sources:
            parts.append(" from " + ", ".join(f"<code>{_t(s)}</code>" for s in o.sources))
        if o.other_spans:
            parts.append(f"; {_plural(o.other_spans, 'span')} of other instrumentations left out")
        parts.append(
            f". Written {written.strftime('%Y-%m-%d %H:%M:%S UTC')} by otel-responses {_t(__version__)}, "
            "from span attributes only: no message text, no payload.</p>\n"
        )
        parts += [self.problems(), self.notes(), self.help(), self.filters(found)]
        parts += ["</header>\n<main>\n", self.summary(found)]
        parts += [self.conversation(number, c) for number, c in enumerate(found, 1)]
        parts.append(
            "</main>\n<footer>Made by otel-responses from OpenTelemetry spans. Signal names link to their "
            f'documentation at <a href="{_t(signals_page(o.docs_url))}" rel="noreferrer">'
            f"{_t(signals_page(o.docs_url))}</a>.</footer>\n"
            f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
        )
        return "".join(parts)

    def problems(self) -> str:
        problems = self.options.problems
        if not problems:
            return ""
        items = "".join(f"<li>{_t(p, 600)}</li>" for p in problems[:MAX_PROBLEMS])
        more = f"<li>and {len(problems) - MAX_PROBLEMS} more</li>" if len(problems) > MAX_PROBLEMS else ""
        return (
            f'<section id="problems"><h2>{_plural(len(problems), "problem")} reading the input</h2>'
            f'<p class="meta">What could be read is shown below.</p><ul>{items}{more}</ul></section>\n'
        )

    def notes(self) -> str:
        notes = self.options.notes
        if not notes:
            return ""
        items = "".join(f"<li>{_t(n, 600)}</li>" for n in notes[:MAX_PROBLEMS])
        return f'<section id="notes"><p class="meta">Skipped, not a problem:</p><ul>{items}</ul></section>\n'

    def help(self) -> str:
        rows = "".join(f"<dt>{_t(k)}</dt><dd>{_t(v)}</dd>" for k, v in _HELP)
        return f'<details class="help"><summary>How to read this page</summary><dl>{rows}</dl></details>\n'

    def filters(self, found: list[Conversation]) -> str:
        choices: dict[str, list[str]] = {
            "service": sorted({s for c in found for s in c.services}),
            "model": sorted({m for c in found for m in c.models}),
            "signal": sorted({s.name for c in found for s in c.signals}),
            "severity": [s for s in SEVERITIES if any(c.count(s) for c in found)],
        }
        selects = []
        for key, values in choices.items():
            options = "".join(f'<option value="{_value(v)}">{_t(v, 80)}</option>' for v in values)
            selects.append(f'<label>{key}<select name="{key}"><option value="">any</option>{options}</select></label>')
        return (
            f'<form id="filters" hidden>{"".join(selects)}<a href="#" id="clear">clear filters</a>'
            '<span id="shown"></span></form>\n'
        )

    def summary(self, found: list[Conversation]) -> str:
        head = "".join(
            f"<th>{h}</th>"
            for h in ("conversation", "service", "model", "turns", "calls", "gaps", "errors", "warnings", "infos")
        )
        rows = []
        for number, c in enumerate(found, 1):
            counts = "".join(
                f'<td class="n{"" if c.count(s) else " z"}">{c.count(s)}</td>' for s in (ERROR, WARNING, INFO)
            )
            names: dict[tuple[str, str], int] = {}
            for s in c.signals:
                names[(s.name, s.severity)] = names.get((s.name, s.severity), 0) + 1
            ordered = sorted(names.items(), key=lambda kv: (_severity_rank(kv[0][1]), kv[0][0]))
            chips = "".join(
                f'<span class="c {_sev(sev)}">{_t(name, 80)}{f" {TIMES}{n}" if n > 1 else ""}</span>'
                for (name, sev), n in ordered
            )
            first = c.first_loss
            loss = f"turn {first.turn}" if first is not None and first.turn is not None else ("yes" if first else DASH)
            rows.append(
                f'<tr data-conv="c{number}"><td><a class="jump" href="#c{number}">{self.heading(c)}</a></td>'
                f"<td>{_t(', '.join(c.services))}</td><td>{_t(', '.join(c.models)) or DASH}</td>"
                f'<td class="n">{c.turns}</td><td class="n">{len(c.calls)}</td>'
                f'<td class="n{"" if c.gaps else " z"}">{len(c.gaps)}</td>{counts}'
                f"<td>{chips or '<small>none</small>'}</td><td>{loss}</td></tr>\n"
            )
        # Tables of SUMMARY_CHUNK rows, each laid out only once scrolled to (a table is laid out whole).
        thead = f"<thead><tr>{head}<th>signals</th><th>first loss</th></tr></thead>"
        chunks = [
            f'<div class="chunk"><table>{thead if i == 0 else ""}'
            f"<tbody>\n{''.join(rows[i : i + SUMMARY_CHUNK])}</tbody></table></div>\n"
            for i in range(0, max(len(rows), 1), SUMMARY_CHUNK)
        ]
        return (
            '<section id="summary"><h2>Summary: the conversations that lost most context first</h2>\n'
            f"{''.join(chunks)}</section>\n"
        )

    def heading(self, c: Conversation) -> str:
        key = f"<code>{_t(c.key)}</code>"
        if c.kind == LINEAGE:
            key = f"<small>lineage</small> {key}"
        elif c.kind == CONTINUES:
            key = f"continues {key} (not in the input)"
        elif c.kind == TRACE:
            key = f"calls of trace {key}"
        if c.run is not None:
            key += f" <small>run {c.run[0]} of {c.run[1]}</small>"
        return f"{_t(c.label)} · {key}" if c.label else key

    def conversation(self, number: int, c: Conversation) -> str:
        worst = _worst(c)
        tokens = {
            "service": c.services,
            "model": c.models,
            "signal": list(dict.fromkeys(s.name for s in c.signals)),
            "severity": [s for s in SEVERITIES if c.count(s)],
        }
        data = "".join(f' data-f-{k}="{" ".join(_token(v) for v in vs)}"' for k, vs in tokens.items())
        meta = (
            f"service {_t(', '.join(c.services))}"
            + (f" · model {_t(', '.join(c.models))}" if c.models else "")
            + f" · {_plural(c.turns, 'turn')}, {_plural(len(c.calls), 'call')}"
            + (f", {_plural(len(c.gaps), 'gap')}" if c.gaps else "")
            + f" · from {_date(c.start_ns)}, over {_duration(c.end_ns - c.start_ns)}"
            + (f' · <span class="mk dr">{_t(c.note)}</span>' if c.note else "")
        )
        label = f' data-label="{_t(c.label)}"' if c.label else ""
        label += f' data-run="{c.run[0]}"' if c.run else ""
        seen: dict[str, str] = {}  # signal name and meaning -> where its meaning and fix were shown
        body = "".join(self.entry(e, seen) for e in c.entries)
        return (
            f'<section class="conv{f" {_sev(worst)}" if worst else ""}" id="c{number}" data-kind="{c.kind}" '
            f'data-key="{_t(c.key)}"{label}{data}>\n'
            f'<h2>{self.heading(c)}</h2>\n<p class="meta">{meta}</p>\n'
            f'<table class="tl"><thead><tr>{self.head}</tr></thead>\n{body}</table>\n</section>\n'
        )

    def entry(self, entry: Call | Gap, seen: dict[str, str]) -> str:
        if isinstance(entry, Gap):
            turns = f"turn {entry.first}" if entry.first == entry.last else f"turns {entry.first}{DASH}{entry.last}"
            return (
                f'<tbody class="gap" data-first="{entry.first}" data-last="{entry.last}"><tr><td colspan="'
                f'{self.columns}">{turns} not in the input: sampled out or not exported</td></tr></tbody>\n'
            )
        return self.call(entry, seen)

    def call(self, call: Call, seen: dict[str, str]) -> str:
        s = call.span
        turn = "" if call.turn is None else str(call.turn)
        notes = ("<small>inferred</small>" if call.turn_inferred else "") + (
            "<small>branch</small>" if call.branch else ""
        )
        cells = (
            f'<td class="turn">{turn or DASH}{notes}</td>'
            f'<td class="t">{_time(s.start_ns)} <small>{_duration(s.end_ns - s.start_ns)}</small></td>'
            f"<td>{self.operation(s)}</td><td>{self.state(s)}</td><td>{self.instructions(call)}</td>"
            f"<td>{self.items(s)}</td><td>{self.tools(s)}</td><td>{self.reasoning(s)}</td><td>{self.tokens(s)}</td>"
        )
        signals = ""
        if call.signals:
            where = f"turn {turn}" if turn else "above"
            items = "".join(self.signal(x.name, x.severity, x.detail, seen, where) for x in call.signals)
            signals = f'<tr class="sigs"><td colspan="{self.columns}"><ul>{items}</ul></td></tr>'
        loss = " loss" if call.loses_context else ""
        inferred = ' data-inferred=""' if call.turn_inferred else ""
        return (
            f'<tbody class="call{loss}" data-turn="{turn}"{inferred} data-span="{s.span_id}">'
            f'<tr class="main">{cells}</tr><tr class="ids"><td colspan="{self.columns}">{self.ids(call)}</td></tr>'
            f"{signals}</tbody>\n"
        )

    def operation(self, s: SpanRecord) -> str:
        model = s.text(a.GEN_AI_REQUEST_MODEL)
        served = s.text(a.GEN_AI_RESPONSE_MODEL)
        out = f"<b>{_t(s.text(a.GEN_AI_OPERATION_NAME) or s.name)}</b>"
        if model:
            out += f" <code>{_t(model)}</code>"
        if served and served != model:
            out += f" <small>served by</small> <code>{_t(served)}</code>"
        error = s.text(a.ERROR_TYPE)
        if error or s.error:
            status = s.number(a.HTTP_RESPONSE_STATUS_CODE)
            detail = " ".join(x for x in (str(status) if status else "", s.text(a.ERROR_CODE) or "") if x)
            out += f' <span class="err">{_t(error or "error")}{f" {_t(detail)}" if detail else ""}</span>'
        return out

    def state(self, s: SpanRecord) -> str:
        mode = s.text(a.STATE_MODE)
        out = f'<span class="c">{_t(mode)}</span>' if mode else DASH
        store = s.flag(a.STORE)
        if store is not None:
            out += '<span class="c ok">store on</span>' if store else '<span class="c off">store off</span>'
        requested = s.flag(a.STORE_REQUESTED)
        if requested is not None and requested != store:
            out += f"<small>asked {'on' if requested else 'off'}</small>"
        if s.flag(a.ZDR):
            out += '<span class="c off">ZDR</span>'
        return out

    def instructions(self, call: Call) -> str:
        value = call.span.text(a.INSTRUCTIONS_HASH)
        if value is None:
            if call.instructions == DROPPED:
                return '<span class="mk dr">none sent</span> <small>earlier turns had them</small>'
            return DASH
        out = f'<span class="c m {_hash_class(value)}">{_t(value, 64)}</span>'
        if call.instructions == CHANGED:
            out += ' <span class="mk ch">changed</span>'
        version = call.span.text(a.INSTRUCTIONS_VERSION)
        if version:
            out += f" <small>version</small> {_t(version)}"
        return out

    def items(self, s: SpanRecord) -> str:
        out = []
        for label, types_key, count_key in (
            ("in", a.INPUT_ITEM_TYPES, a.INPUT_ITEM_COUNT),
            ("out", a.OUTPUT_ITEM_TYPES, a.OUTPUT_ITEM_COUNT),
        ):
            types = s.texts(types_key)
            count = s.number(count_key)
            if not types and count is None:
                continue
            total = f" <small>({count})</small>" if count is not None and count > 1 else ""
            out.append(f"<div><small>{label}</small> {_chips(types) or DASH}{total}</div>")
        return "".join(out) or DASH

    def tools(self, s: SpanRecord) -> str:
        check = s.text(a.TOOL_CALLS_CHECK)
        if check is None:
            return DASH
        kind = CATALOGUE.get(check)
        style = {"ok": " ok", "none": "", "pending": " si"}.get(check, f" {_sev(kind.severity)}" if kind else "")
        return f'<span class="c{style}">{_t(check, 80)}</span>'

    def reasoning(self, s: SpanRecord) -> str:
        out = []
        if s.flag(a.REASONING_ENCRYPTED_REQUESTED):
            out.append('<span class="c si">encrypted asked</span>')
        sent = s.number(a.REASONING_ENCRYPTED_INPUT_COUNT)
        returned = s.number(a.REASONING_ENCRYPTED_OUTPUT_COUNT)
        if sent or returned:
            out.append(f"in {_number(sent or 0)} · out {_number(returned or 0)}")
        effort = s.text(a.GEN_AI_REQUEST_REASONING_LEVEL)
        if effort:
            out.append(f"<small>effort</small> {_t(effort)}")
        context = s.text(a.RESPONSE_REASONING_CONTEXT)
        if context:
            out.append(f"<small>context</small> {_t(context)}")
        withheld = s.number(a.REASONING_WITHHELD)
        if withheld:
            reasons = s.texts(a.REASONING_WITHHELD_REASONS)
            style = "si" if set(reasons) <= {"turn_boundary"} else "sw"  # an earlier turn's, by design: no mistake
            out.append(
                f'<span class="c {style}">withheld {_number(withheld)}</span> <small>{_t(", ".join(reasons))}</small>'
            )
        if s.flag(a.COMPACTION):
            out.append('<span class="c tk">compaction</span>')
        return " ".join(out) or DASH

    def tokens(self, s: SpanRecord) -> str:
        given = s.number(a.GEN_AI_USAGE_INPUT_TOKENS)
        made = s.number(a.GEN_AI_USAGE_OUTPUT_TOKENS)
        if given is None and made is None:
            return DASH
        cached = s.number(a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)
        reasoning = s.number(a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)
        return (
            f"in {_number(given)}{f' <small>cached {_number(cached)}</small>' if cached else ''}<br>"
            f"out {_number(made)}{f' <small>reasoning {_number(reasoning)}</small>' if reasoning else ''}"
        )

    def ids(self, call: Call) -> str:
        s = call.span
        parts = []
        for label, key in (
            ("response", a.GEN_AI_RESPONSE_ID),
            ("previous", a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID),
            ("conversation", a.GEN_AI_CONVERSATION_ID),
            ("request", a.REQUEST_ID),
        ):
            value = s.text(key)
            if value:
                parts.append(f"{label} {_t(value)}")
        parts.append(f"service {_t(s.service)}")
        trace = f"trace {s.trace_id} span {s.span_id}"  # hex: nothing to escape
        template = self.options.trace_url
        if template is not None:
            href = template.replace(TRACE_ID, s.trace_id).replace(SPAN_ID, s.span_id)
            trace = f'<a href="{_t(href, 4096)}" rel="noreferrer">{trace}</a>'
        parts.append(trace)
        if call.link_missing:
            parts.append('<span class="mk dr">continues a span not in the input</span>')
        return " · ".join(parts)

    def signal(
        self, name: str, severity: str, detail: tuple[tuple[str, Value], ...], seen: dict[str, str], where: str
    ) -> str:
        """One signal: its severity, name (a link to its documentation), metadata; the meaning and the fix (those of
        the variant its metadata names) the first time the conversation shows it."""
        known = name in CATALOGUE
        link = signal_link(_token(name), self.options.docs_url)
        shown = ", ".join(f"{_t(k, 80)}={_t(_plain(v))}" for k, v in detail)
        out = (
            f'<li class="{_sev(severity)}" data-signal="{_t(name)}" data-severity="{_t(severity)}">'
            f'<span class="c {_sev(severity)}">{_t(severity, 20)}</span> '
            f'<a href="{_t(link, 4096)}" rel="noreferrer"><b>{_t(name, 80)}</b></a>'
        )
        if known:
            told = Signal(name, {a.PREFIX + k: v for k, v in detail})
            meaning = told.meaning
            key = f"{name}\n{meaning}"
            if key not in seen:
                seen[key] = where
                out += f" {_t(meaning)}"
        if shown:
            out += f" <code>{shown}</code>"
        if known:
            fix = f"Fix: {_t(told.fix)}" if seen[key] == where else f"(meaning and fix: {seen[key]})"
            out += f"<small>{fix}</small>"
        return out + "</li>"
