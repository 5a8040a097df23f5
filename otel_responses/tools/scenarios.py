"""Scripted sessions, each state mode done right and each way a conversation loses context, shared by the
demo and the tests.

Each follows the minimal troubleshooting flow for lost context: turn 1 gives a marker (and the model
privately chooses a code word), turn 2 runs a tool, turn 3 asks for the marker, the tool's result, the
current constraints and the code word. The code word lives in turn 1's reasoning only: every request asks for
`reasoning.context: all_turns`, under which the API renders earlier turns' reasoning back (the model's default,
`current_turn`, would withhold it whatever the app replays).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai import OpenAI

MODEL = "gpt-5.4"  # a reasoning model that returns `phase` (gpt-5.4 and later do)
SWITCHED_MODEL = "gpt-5.5"  # where a switch mid-conversation goes: another reasoning model with `phase`
REASONING: Any = {"context": "all_turns"}  # earlier turns' reasoning rendered back: the code word is turn 1's
INSTRUCTIONS = "Answer briefly. Never reveal internal ids."
TOOL_NAME = "lookup_order"
TOOLS: Any = [  # typed loosely: the SDK's TypedDicts vary across supported releases
    {
        "type": "function",
        "name": TOOL_NAME,
        "description": "Look up an order's status.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]
ENCRYPTED_REASONING = "reasoning.encrypted_content"
STATE_MODES = ("server_chain", "conversation", "client_replay")
FIRST = "Remember this: the marker is {marker}. Now choose a code word."
SECOND = f"Please use {TOOL_NAME} for order 42."
THIRD = "What is the marker, what did the tool return, what are the constraints, and what is the code word?"


@dataclass(frozen=True)
class Scenario:
    """A scripted session: its state mode, the mistake it makes (None when done right), the signals that
    mistake must raise, and what it does in words."""

    name: str
    mode: str
    mistake: str | None
    raises: tuple[str, ...]
    summary: str
    compacted: bool = False  # server-side compaction past a low threshold; the app keeps from its item on


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("server_chain", "server_chain", None, (), "previous_response_id each turn, instructions re-sent"),
    Scenario("conversation", "conversation", None, (), "every turn written to one conversation"),
    Scenario("client_replay", "client_replay", None, (), "store=false, encrypted reasoning, every item replayed"),
    Scenario(
        "client_replay_compacted",
        "client_replay",
        None,
        ("compaction",),
        "as client_replay, compacted past a low threshold, history kept from the compaction item on",
        compacted=True,
    ),
    Scenario(
        "chain_unstored_parent",
        "server_chain",
        "unstored_parent",
        ("unstored_parent",),
        "turn 1 with store=false, then chained to it",
    ),
    Scenario(
        "chain_instructions_dropped",
        "server_chain",
        "instructions_dropped",
        ("instructions_dropped",),
        "instructions sent on turn 1 only",
    ),
    Scenario(
        "chain_tool_output_missing",
        "server_chain",
        "missing_tool_output",
        ("missing_tool_output",),
        "the tool call left unanswered",
    ),
    Scenario(
        "chain_context_duplicated",
        "server_chain",
        "context_duplicated",
        ("context_duplicated",),
        "the tool turn's user message and progress update re-sent beside previous_response_id",
    ),
    Scenario(
        "conversation_and_previous_id",
        "conversation",
        "state_mode_conflict",
        ("state_mode_conflict",),
        "previous_response_id sent with conversation",
    ),
    Scenario(
        "replay_output_text_only",
        "client_replay",
        "output_text_only",
        ("reasoning_dropped", "phase_dropped"),
        "only output_text replayed (tool items kept)",
    ),
    Scenario(
        "replay_reasoning_altered",
        "client_replay",
        "reasoning_altered",
        ("encrypted_content_modified",),
        "encrypted_content cut to 64 characters by storage",
    ),
    Scenario(
        "replay_phase_lost",
        "client_replay",
        "phase_lost",
        ("phase_dropped",),
        "assistant messages replayed without phase",
    ),
    Scenario(
        "replay_tool_pair_broken",
        "client_replay",
        "tool_pair_broken",
        ("orphan_tool_output",),
        "the function_call item dropped, its output kept",
    ),
    Scenario(
        "replay_history_cut",
        "client_replay",
        "history_cut",
        ("history_truncated",),
        "oldest turn cut instead of compacted",
    ),
    Scenario(
        "replay_user_messages_only",
        "client_replay",
        "user_messages_only",
        ("replay_incomplete",),
        "only the user's messages kept (and the tool calls), none of the answers",
    ),
    Scenario(
        "replay_stored_reasoning_dropped",
        "client_replay",
        "stored_reasoning_dropped",
        ("reasoning_pair_broken",),
        "stored turns replayed without their reasoning, the other items under their ids",
    ),
    Scenario(
        "replay_foreign_call_ids",
        "client_replay",
        "foreign_call_ids",
        ("malformed_item_id",),
        "tool calls replayed under ids another provider made",
    ),
    Scenario(
        "replay_model_switched",
        "client_replay",
        "model_switched",
        ("encrypted_content_foreign", "reasoning_withheld"),
        f"the model switched mid-conversation ({MODEL} to {SWITCHED_MODEL}), every item replayed",
    ),
    Scenario(
        "conversation_items_resent",
        "conversation",
        "items_resent",
        ("duplicate_item_id",),
        "the tool turn's output re-sent under its ids beside the conversation",
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}


# The items an app that makes the mistake leaves out of what it replays.
_LEFT_OUT = frozenset({("tool_pair_broken", "function_call"), ("stored_reasoning_dropped", "reasoning")})


def _foreign_id(call_id: str) -> str:
    """The id another provider gives a tool call (Anthropic's `toolu_…`), kept when its history is replayed here."""
    return "toolu_" + call_id.removeprefix("call_")


def run_tool(arguments: str) -> str:
    """The app's tool: deterministic, so the answer can be checked."""
    query = json.loads(arguments or "{}").get("query", "")
    return f"order-status:shipped:{len(query)}"


@dataclass
class Transcript:
    """What a session saw: the final answer, the tool's result, and the error that ended it early."""

    scenario: Scenario
    marker: str
    tool_result: str = ""
    answer: str = ""
    error: str | None = None
    response_ids: list[str] = field(default_factory=list)

    @property
    def remembered(self) -> dict[str, bool]:
        """Which facts the model still knew at the last turn."""
        return {
            "marker": f"marker={self.marker}" in self.answer,
            "tool": bool(self.tool_result) and f"tool={self.tool_result}" in self.answer,
            "constraints": f"constraints={INSTRUCTIONS}" in self.answer,
            "code word": "code_word=CW-" in self.answer,
        }


def _function_call(output: list[Any]) -> Any:
    for item in output:
        if getattr(item, "type", None) == "function_call":
            return item
    raise RuntimeError("the model did not call the tool")


def _tool_output(call: Any, result: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call.call_id, "output": result}


class _Session:
    """Runs the four calls of one scenario; each state mode has its own way of carrying context."""

    def __init__(self, client: OpenAI, scenario: Scenario, t: Transcript) -> None:
        self.client, self.scenario, self.t = client, scenario, t
        self.mistake = scenario.mistake
        self.previous: str | None = None
        self.conversation: str | None = None
        self.history: list[Any] = []

    def create(self, turn: int, new_input: list[Any], **extra: Any) -> Any:
        switched = self.mistake == "model_switched" and turn >= 3  # from the tool turn's second call on
        kwargs: dict[str, Any] = {"model": SWITCHED_MODEL if switched else MODEL, "reasoning": REASONING, **extra}
        if turn == 1 or self.mistake != "instructions_dropped":
            kwargs["instructions"] = INSTRUCTIONS
        mode = self.scenario.mode
        if mode == "server_chain":
            if self.previous is not None:
                kwargs["previous_response_id"] = self.previous
            if turn == 1 and self.mistake == "unstored_parent":
                kwargs["store"] = False
            kwargs["input"] = new_input
        elif mode == "conversation":
            kwargs["conversation"] = self.conversation
            if turn == 2 and self.mistake == "state_mode_conflict":
                kwargs["previous_response_id"] = self.previous
            kwargs["input"] = new_input
        else:
            self.history += new_input
            if turn == 4 and self.mistake == "history_cut":
                self.history = self.history[3:]  # the oldest turn: its user message, reasoning and answer
            kwargs["input"] = list(self.history)
            if self.mistake != "stored_reasoning_dropped":  # that app leaves `store` at its default: stored
                kwargs.update(store=False, include=[ENCRYPTED_REASONING])
            if self.scenario.compacted:  # extra_body: not in the oldest supported SDK's signature
                kwargs["extra_body"] = {"context_management": [{"type": "compaction", "compact_threshold": 40}]}
        response = self.client.responses.create(**kwargs)
        self.previous = response.id
        self.t.response_ids.append(response.id)
        if mode == "client_replay":
            kept = self.replayed(response.output)
            types = [getattr(item, "type", None) for item in kept]
            # After a compaction item, what came before it may be dropped: it stands for all of it.
            self.history = kept[types.index("compaction") :] if "compaction" in types else self.history + kept
        return response

    def replayed(self, output: list[Any]) -> list[Any]:
        """What the app appends to its history: every item as returned, unless it makes a mistake."""
        items: list[Any] = []
        if self.mistake == "user_messages_only":  # and the tool calls, which its tool loop needs
            return [item for item in output if item.type == "function_call"]
        if self.mistake == "output_text_only":
            texts = "".join(p.text for m in output if m.type == "message" for p in m.content if p.type == "output_text")
            if texts:
                items.append({"role": "assistant", "content": texts})
            return items + [m for m in output if m.type == "function_call"]
        for item in output:
            if self.mistake == "phase_lost" and item.type == "message":
                items.append(item.model_dump(exclude={"phase"}, exclude_none=True))
            elif self.mistake == "reasoning_altered" and item.type == "reasoning":
                dumped = item.model_dump(exclude_none=True)
                dumped["encrypted_content"] = dumped["encrypted_content"][:64]
                items.append(dumped)
            elif (self.mistake, item.type) in _LEFT_OUT:
                continue
            elif self.mistake == "foreign_call_ids" and item.type == "function_call":
                items.append({**item.model_dump(exclude_none=True), "id": _foreign_id(item.call_id)})
            else:
                items.append(item)
        return items

    def run(self) -> None:
        if self.scenario.mode == "conversation":
            self.conversation = self.client.conversations.create().id
        self.create(1, [{"role": "user", "content": FIRST.format(marker=self.t.marker)}])
        second = self.create(2, [{"role": "user", "content": SECOND}], tools=TOOLS)
        call = _function_call(second.output)
        self.t.tool_result = run_tool(call.arguments)
        if self.mistake == "missing_tool_output":
            answer: dict[str, Any] = {"role": "user", "content": "Never mind the tool, go on."}
        else:
            answer = _tool_output(call, self.t.tool_result)
        resent: list[Any] = []
        if self.mistake == "context_duplicated":  # as some libraries do: the last turn again, rebuilt as text
            progress = [m for m in second.output if m.type == "message"]
            resent = [{"role": "user", "content": SECOND}]
            resent += [{"role": "assistant", "content": m.content[0].text} for m in progress]
        elif self.mistake == "items_resent":  # the turn's output again, as returned, beside the conversation
            resent = list(second.output)
        self.create(3, [*resent, answer], tools=TOOLS)
        self.t.answer = self.create(4, [{"role": "user", "content": THIRD}]).output_text


def run(client: OpenAI, scenario: Scenario, marker: str) -> Transcript:
    """Run one scenario; an API error (or a strict-mode refusal) ends it early and is kept, not raised."""
    transcript = Transcript(scenario, marker)
    try:
        _Session(client, scenario, transcript).run()
    except Exception as exc:  # the error is the scenario's outcome; the caller reports it
        code = getattr(exc, "code", None)
        transcript.error = f"{type(exc).__name__}: {code}" if isinstance(code, str) else type(exc).__name__
    return transcript
