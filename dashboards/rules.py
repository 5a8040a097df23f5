"""The Prometheus alert rules, as data, and the rule file written from them.

The rules count events the way the panels do (``promql.fresh``), laid out over several lines so the rule file
reads like a hand-written one; their promtool unit tests are ``alerts/otel-responses.rules_test.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from dashboards.names import CALLS, MODEL, SERVICE, SEVERITY, SIGNAL_NAME, SIGNALS
from dashboards.promql import BEFORE, eq, group, matches
from otel_responses.docs_links import DOCS_URL, SIGNALS_PAGE, page_url
from otel_responses.signals import ERROR, WARNING

WINDOW = "10m"
WARNING_RATIO = 0.05


def events(selector: str, window: str = WINDOW) -> str:
    """Events a counter counted in ``window``, a series born inside the window included.

    ``increase()`` never counts a series' first sample, so a counter that first appears already at 1 shows no
    increase: the ``unless ... offset`` term takes a series that did not exist ``window`` ago at its whole value.
    """
    return (
        f"(\n  {selector}\n    unless\n  last_over_time({selector}[{BEFORE}] offset {window})\n)"
        f"\nor\nincrease({selector}[{window}])"
    )


def counted(metric: str, *matchers: str, by: Sequence[str]) -> str:
    selector = f"{metric}{{{', '.join(matchers)}}}" if matchers else metric
    return f"{group(by)}(\n  " + events(selector).replace("\n", "\n  ") + "\n)"


def runbook(anchor: str, docs_url: str = DOCS_URL) -> str:
    """The runbook of ``anchor`` (a signal's name, or a section): the Signals page of the documentation at
    ``docs_url``. Not ``signal_doc_url``: the anchor may be a template (``{{ $labels.… }}``), kept as it is."""
    return page_url(SIGNALS_PAGE, base=docs_url) + f"#{anchor}"


BY_SIGNAL = "{{ $labels." + SIGNAL_NAME + " }}"
JOB = "{{ $labels.job }}"
ON_MODEL = "{{ $labels." + MODEL + " }}"
TIMES = "{{ $value | humanize }}"
RULE_LABELS = (SERVICE, SIGNAL_NAME, MODEL)


def alert_rules(docs_url: str = DOCS_URL) -> dict[str, Any]:
    """The Prometheus rule file, as data; the runbook links lead to the documentation at ``docs_url``."""
    error_signal = counted(SIGNALS, eq(SEVERITY, ERROR), by=RULE_LABELS)
    warning_ratio = (
        f"{counted(SIGNALS, eq(SEVERITY, WARNING), by=(SERVICE,))}\n/\n{counted(CALLS, by=(SERVICE,))}"
        f"\n> {WARNING_RATIO}"
    )
    conflict = counted(SIGNALS, eq(SIGNAL_NAME, "state_mode_conflict"), by=(SERVICE,))
    unstored = counted(SIGNALS, eq(SIGNAL_NAME, "unstored_parent"), by=(SERVICE,))
    rules: list[dict[str, Any]] = [
        {
            "alert": "OpenAIResponsesErrorSignal",
            "expr": f"{error_signal} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"{BY_SIGNAL} raised by {JOB} ({ON_MODEL})",
                "description": (
                    f"{JOB} raised the error-severity signal {BY_SIGNAL} {TIMES} time(s) "
                    f"in the last {WINDOW} on {ON_MODEL}: the API rejects such requests or the model "
                    "certainly lost context. The runbook says why and how to fix it; the Tempo panel of the "
                    "context-health dashboard lists the spans."
                ),
                "runbook_url": runbook(BY_SIGNAL, docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesWarningSignalRatioHigh",
            "expr": warning_ratio,
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }}: {{ $value | humanizePercentage }} warning signals per call",
                "description": (
                    f"Over the last {WINDOW}, {JOB} raised {{{{ $value | humanizePercentage }}}} "
                    f"warning-severity signals per call (threshold {WARNING_RATIO:.0%}): context is being lost "
                    "silently (instructions, reasoning or history not carried over). See which signal in the "
                    "context-health dashboard, then follow its section of the documentation."
                ),
                "runbook_url": runbook("signals", docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesStateModeConflictAndUnstoredParent",
            "expr": f"({conflict} > 0)\nand on ({SERVICE})\n({unstored} > 0)",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.job }} mixes state modes: state_mode_conflict and unstored_parent together",
                "description": (
                    f"In the last {WINDOW} {JOB} both sent conversation with previous_response_id "
                    "(state_mode_conflict) and chained to a store=false response (unstored_parent): different "
                    "code paths or workers pick the state mode each on their own. Choose one state mode per "
                    f"session; see also {runbook('unstored_parent', docs_url)}."
                ),
                "runbook_url": runbook("state_mode_conflict", docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesInstructionsDropped",
            "expr": f"{counted(SIGNALS, eq(SIGNAL_NAME, 'instructions_dropped'), by=(SERVICE, MODEL))} > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }} continues responses without their instructions",
                "description": (
                    f"{JOB} sent {TIMES} request(s) in the last {WINDOW} on "
                    f"{ON_MODEL} that continue a response without the instructions it had: "
                    "instructions are never carried over (not through previous_response_id, a conversation or a "
                    "replay), so the model answers without its system prompt. Send instructions on every request."
                ),
                "runbook_url": runbook("instructions_dropped", docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesContextDuplicated",
            "expr": f"{counted(SIGNALS, eq(SIGNAL_NAME, 'context_duplicated'), by=(SERVICE, MODEL))} > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }} re-sends turns the server already holds",
                "description": (
                    f"{JOB} sent {TIMES} request(s) in the last {WINDOW} on {ON_MODEL} that continue "
                    "previous_response_id or a conversation and also re-send items that state already holds: the "
                    "model reads those turns twice (and may ignore a tool result), and their input tokens are paid "
                    "twice. Send only the new items."
                ),
                "runbook_url": runbook("context_duplicated", docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesDuplicateItemId",
            "expr": f"{counted(SIGNALS, eq(SIGNAL_NAME, 'duplicate_item_id'), by=(SERVICE, MODEL))} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.job }} sends item ids the API refuses as duplicates",
                "description": (
                    f"{JOB} sent {TIMES} request(s) in the last {WINDOW} on {ON_MODEL} with one item id twice, "
                    "or with an id the conversation or chain it continues already holds: the API refuses them with "
                    '400 "Duplicate item found", and the conversation stops until its history is mended. Send each '
                    "item once: only new items beside a conversation or previous_response_id, and no client-made id "
                    "that can collide."
                ),
                "runbook_url": runbook("duplicate_item_id", docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesReasoningDropped",
            "expr": (f"{counted(SIGNALS, matches(SIGNAL_NAME, REASONING_SIGNALS), by=RULE_LABELS)} > 0"),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{JOB} loses reasoning between turns ({BY_SIGNAL})",
                "description": (
                    f"{JOB} raised {BY_SIGNAL} {TIMES} time(s) in the last {WINDOW} on "
                    f"{ON_MODEL}: reasoning items are not carried to the next turn (not replayed, "
                    "or not replayable because encrypted_content was not requested with store=false), so the model "
                    "starts its thinking over: worse answers, more tokens."
                ),
                "runbook_url": runbook(BY_SIGNAL, docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesReasoningAcrossABoundary",
            "expr": (f"{counted(SIGNALS, matches(SIGNAL_NAME, BOUNDARY_SIGNALS), by=RULE_LABELS)} > 0"),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{JOB} replays reasoning across a boundary ({BY_SIGNAL})",
                "description": (
                    f"{JOB} raised {BY_SIGNAL} {TIMES} time(s) in the last {WINDOW} on {ON_MODEL}: replayed "
                    "reasoning or compaction payloads went to another model, organization or end user than they "
                    "were made for (a model switch, a router or fallback model, a gateway's account pool, a changed "
                    "safety_identifier) or after edited items, and the API withholds that reasoning from the model or "
                    "refuses the request. Keep one model and one organization per conversation."
                ),
                "runbook_url": runbook(BY_SIGNAL, docs_url),
            },
        },
        {
            "alert": "OpenAIResponsesToolOutputMissingOrOrphaned",
            "expr": f"{counted(SIGNALS, matches(SIGNAL_NAME, TOOL_OUTPUT_SIGNALS), by=RULE_LABELS)} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"{JOB} sends tool calls and outputs that do not pair up ({BY_SIGNAL})",
                "description": (
                    f"{JOB} raised {BY_SIGNAL} {TIMES} time(s) in the last {WINDOW} on "
                    f"{ON_MODEL}: a tool call went without its output, or an output's call_id "
                    "matches no call. The API rejects the request with a 400 or the model never sees the tool "
                    "result. Replay each call and its output together, matched by call_id."
                ),
                "runbook_url": runbook(BY_SIGNAL, docs_url),
            },
        },
    ]
    return {"groups": [{"name": "otel-responses-context-health", "rules": rules}]}


REASONING_SIGNALS = ("reasoning_dropped", "reasoning_not_replayable")
BOUNDARY_SIGNALS = ("reasoning_withheld", "encrypted_content_foreign")
TOOL_OUTPUT_SIGNALS = ("missing_tool_output", "orphan_tool_output")


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, so the rule file reads like a hand-written one."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def render_rules(docs_url: str = DOCS_URL) -> str:
    header = "# Generated by `python -m dashboards.build` from dashboards/build.py: edit that, not this file.\n"
    body = yaml.dump(alert_rules(docs_url), Dumper=_BlockDumper, sort_keys=False, width=1000, allow_unicode=True)
    return header + body
