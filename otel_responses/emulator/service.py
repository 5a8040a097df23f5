"""The Responses and Conversations endpoints as plain functions of JSON in, JSON out.

Kept apart from HTTP so the semantics (validation order, what is stored, what is echoed)
read in one place and the server only routes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import model, prompt_cache, rendering, replay_rules, schema, tokens
from .config import REFUSE, EmulatorConfig
from .context import Context, chain_history, previous_not_found, resolve_input, seal_compaction, seal_reasoning
from .crypto import Sealer
from .errors import bad_request, not_found
from .items import Item, is_user_message, kind, parts_text, text_of
from .state import Caller, ConnectionCache, Conversation, Entry, IdFactory, Minted, Pending, Store, StoredResponse

ENCRYPTED_REASONING = "reasoning.encrypted_content"


def _conversation_id(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
        return str(raw["id"])
    raise bad_request(
        "Invalid type for 'conversation': expected a string or an object with 'id'.", param="conversation"
    )


def _strings(raw: Any) -> list[str]:
    return [value for value in raw if isinstance(value, str)] if isinstance(raw, list) else []


def _instructions_text(raw: Any) -> str | None:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return "\n".join(parts_text(i.get("content")) for i in raw if isinstance(i, Mapping)) or None
    return None


def _compact_threshold(raw: Any) -> int | None:
    """`context_management: [{"type": "compaction", "compact_threshold": N}]` -> N."""
    if not isinstance(raw, list):
        return None
    for entry in raw:
        if isinstance(entry, Mapping) and entry.get("type") == "compaction":
            threshold = entry.get("compact_threshold")
            if isinstance(threshold, int) and not isinstance(threshold, bool):
                return threshold
    return None


def _paginate(items: list[Item], query: Mapping[str, str], default_order: str) -> dict[str, Any]:
    """A list page (`object: "list"`) honouring `order`, `limit` and `after` like the API."""
    order = query.get("order", default_order)
    if order not in ("asc", "desc"):
        raise bad_request(f"Invalid value for 'order': '{order}'.", param="order")
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        raise bad_request("Invalid value for 'limit': expected an integer.", param="limit") from None
    if not 1 <= limit <= 100:
        raise bad_request("Invalid 'limit': expected a value between 1 and 100.", param="limit")
    ordered = items if order == "asc" else list(reversed(items))
    after = query.get("after")
    if after:
        ids = [i.get("id") for i in ordered]
        if after not in ids:
            raise not_found(f"Item with id '{after}' not found.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0].get("id") if page else None,
        "last_id": page[-1].get("id") if page else None,
        "has_more": len(ordered) > limit,
    }


def _end_user(body: Mapping[str, Any]) -> str | None:
    """The end user a request names: `safety_identifier`, else the older `user`."""
    for name in ("safety_identifier", "user"):
        value = body.get(name)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass
class _Prepared:
    """A validated create request, the context it continues and sends, and what its model turn will see of it."""

    request: model.Request
    previous: str | None
    conversation_id: str | None
    conversation: Conversation | None
    store: bool
    history: list[Entry]  # the server-side history before `drop_context` is applied
    context: Context  # as sent: stored and listed so
    caller: Caller
    reasoning_context: str | None  # the effective `reasoning.context` (None: a model that does not reason)
    rendered: rendering.Rendered  # what the model reads: withheld reasoning and truncated items left out


def _list_page(items: list[Item]) -> dict[str, Any]:
    """A one-page list (`has_more: false`) of the given items, in order."""
    return {
        "object": "list",
        "data": items,
        "first_id": items[0].get("id") if items else None,
        "last_id": items[-1].get("id") if items else None,
        "has_more": False,
    }


def _with_reasoning_ids_repeated(output: list[Entry]) -> list[Entry]:
    """Each reasoning item followed by a second one under its id, with notes (so a payload) of its own."""
    repeated: list[Entry] = []
    for entry in output:
        repeated.append(entry)
        if entry.item.get("type") == "reasoning":
            repeated.append(Entry(dict(entry.item), f"{entry.notes or ''} Then checked it again."))
    return repeated


def _mint(output: list[Entry], context: list[Entry], model_name: str, caller: Caller) -> None:
    """Stamp each reasoning item of a turn's output with what it was made for: the model, the caller, and the items
    before it (the context as sent, then the output before it)."""
    if not any(kind(entry.item) == "reasoning" for entry in output):
        return
    prefixes = rendering.prefix_digests([*context, *output])
    for index, entry in enumerate(output, len(context)):
        if kind(entry.item) == "reasoning":
            entry.minted = Minted(model_name, caller, prefixes[index])


class Service:
    """Holds the store, id factory and sealer; each public method is one endpoint."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.store = Store()
        self.ids = IdFactory(config.seed)
        self.sealer = Sealer(config.secret if config.secret is not None else os.urandom(32))

    def reset(self) -> None:
        """Forget all state and restart the id counters."""
        with self.store.lock:
            self.store.clear()
            self.ids.reset()

    # -- responses -------------------------------------------------------------------------

    def _caller(self, caller: Caller | None, body: Mapping[str, Any]) -> Caller:
        """The request's caller: its organization and project (the server reads them from the headers; the key's own
        organization when none is named) and the end user its body names."""
        found = caller if caller is not None else Caller(self.config.organization)
        return replace(found, end_user=_end_user(body))

    def _prepare(
        self,
        body: Mapping[str, Any],
        new_id: Callable[[str], str],
        connection: ConnectionCache | None,
        *,
        count: bool,
        caller: Caller | None = None,
    ) -> _Prepared:
        """Validate a create (or input-token count) and build its context; the caller holds the store lock."""
        who = self._caller(caller, body)
        model_name = body.get("model")
        if not count and (not isinstance(model_name, str) or not model_name):
            raise bad_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        model_name = model_name if isinstance(model_name, str) else ""
        previous = body.get("previous_response_id")
        if previous is not None and not isinstance(previous, str):
            raise bad_request("Invalid type for 'previous_response_id'.", param="previous_response_id")
        conversation_id = _conversation_id(body.get("conversation"))
        if previous is not None and conversation_id is not None:
            raise bad_request(
                "Mutually exclusive parameters: Ensure you are only providing one of: "
                "'previous_response_id' or 'conversation'.",
                param="conversation",
                code="mutually_exclusive_parameters",
            )
        requested_store = body.get("store")
        store = requested_store if isinstance(requested_store, bool) else self.config.store_default
        # Asked not to store, a background response is refused; an organisation default of not storing still keeps
        # it for polling (recorded traffic: `"store": false` in the body, every retrieve answered).
        if not count and body.get("background") is True and requested_store is False:
            raise bad_request(
                "Background responses must be stored: set 'store' to true, or 'background' to false.",
                param="background",
            )
        tools = body.get("tools") if isinstance(body.get("tools"), list) else []
        reasoning_param = body.get("reasoning")
        max_output = body.get("max_output_tokens")
        request = model.Request(
            model=model_name,
            instructions=_instructions_text(body.get("instructions")),
            tools=list(tools or []),
            reasoning=self.config.is_reasoning_model(model_name),
            reasoning_summary=isinstance(reasoning_param, Mapping) and bool(reasoning_param.get("summary")),
            max_output_tokens=max_output if isinstance(max_output, int) and not isinstance(max_output, bool) else None,
            phase=self.config.phase_models(model_name),
            text_format=schema.text_format(body.get("text")),
        )
        history: list[Entry] = []
        conversation: Conversation | None = None
        if previous is not None:
            history = self._previous_history(previous, connection, who)
        elif conversation_id is not None:
            conversation = self.store.get_conversation(conversation_id)
            if conversation is None:
                raise not_found(f"Conversation with id '{conversation_id}' not found.", param="conversation")
            history = list(conversation.items)
        self._check_replayed(body.get("input"), history, chained=previous is not None, caller=who)
        current = resolve_input(body.get("input"), self.store, self.sealer, new_id)
        context = Context(history=[] if self.config.drop_context else history, current=current)
        reasoning_context = rendering.effective_context(body.get("reasoning"), model_name, request.reasoning)
        model.check_tool_pairs(context.entries)
        shown = self._shown(context, request, who, reasoning_context, body.get("truncation") == "auto")
        return _Prepared(
            request, previous, conversation_id, conversation, store, history, context, who, reasoning_context, shown
        )

    def _check_replayed(self, raw: Any, history: list[Entry], *, chained: bool, caller: Caller) -> None:
        """The API's rules on the items a request replays (``replay_rules``), against the state it continues."""
        if not isinstance(raw, list):
            return
        held = frozenset(i for entry in history if isinstance(i := entry.item.get("id"), str))
        items = [item for item in raw if isinstance(item, Mapping)]
        replay_rules.check(
            replay_rules.Replay(
                items,
                conversation_ids=frozenset() if chained else held,
                chain_ids=held if chained else frozenset(),
                store=self.store,
                config=self.config,
                caller=caller,
                sealer=self.sealer,
            )
        )

    def _shown(
        self, context: Context, request: model.Request, caller: Caller, reasoning_context: str | None, auto: bool
    ) -> rendering.Rendered:
        """What the model reads of ``context``: the reasoning the rules withhold (``replay_rules``) left out, then the
        oldest items `truncation: "auto"` drops to fit the context window."""
        entries = context.entries
        reading = replay_rules.Reading(
            request.model,
            caller,
            reasoning_context,
            entries,
            rendering.prefix_digests(entries),
            rendering.turn_start(entries),
        )
        withheld = replay_rules.withheld(reading, refuse=self.config.foreign_reasoning == REFUSE)
        shown = rendering.without(context, withheld)
        return rendering.truncate(shown, self.config.context_window, auto, request.instructions)

    def _previous_history(self, previous: str, connection: ConnectionCache | None, caller: Caller) -> list[Entry]:
        """The context a `previous_response_id` stands for: the connection's cached last response (WebSocket
        mode, also when it was not stored), else the stored chain; an unfinished background parent is a 400, and
        so is one another organization stored (the API finds no such response)."""
        if connection is not None and connection.last_id == previous:
            return list(connection.last_entries)
        parent = self.store.get_response(previous)
        if parent is not None and parent.caller is not None and parent.caller.organization != caller.organization:
            raise previous_not_found(previous)
        if parent is not None and parent.pending is not None:
            raise bad_request(
                f"Previous response with id '{previous}' is still in progress; wait until it has finished.",
                param="previous_response_id",
            )
        return chain_history(self.store, previous)

    def create_response(
        self,
        body: Mapping[str, Any],
        connection: ConnectionCache | None = None,
        generate: bool = True,
        caller: Caller | None = None,
    ) -> dict[str, Any]:
        """POST /v1/responses: validate, build the context, run the model, persist, answer.

        `background: true` (not streamed) answers `queued` at once and stores the finished response as
        pending: retrieves advance it (see `EmulatorConfig.background_polls`). `connection` is the
        WebSocket connection's cache of its most recent response, if the request came over one;
        `generate=False` is its warm-up: the model is not run, the response has no output. `caller`: the organization
        and project the request's headers name.
        """
        include = _strings(body.get("include"))
        with self.store.lock:
            prepared = self._prepare(body, self.ids.new, connection, count=False, caller=caller)
            request, context, shown = prepared.request, prepared.context, prepared.rendered.context
            response_id = self.ids.new("resp")
            if generate:
                turn = model.respond(
                    shown, request, response_id=response_id, seed=self.config.seed, new_id=self.ids.new
                )
            else:
                turn = model.warm_up(shown, request, new_id=self.ids.new)
            if self.config.repeat_reasoning_ids:
                turn.output = _with_reasoning_ids_repeated(turn.output)
            threshold = _compact_threshold(body.get("context_management"))
            if threshold is not None and turn.usage["input_tokens"] > threshold:
                turn.output.insert(0, self._compaction_entry(context.entries, prepared.caller))
            _mint(turn.output, context.entries, request.model, prepared.caller)
            now = int(time.time())
            public = self._response_body(body, prepared, response_id, turn, now)
            current, previous, conversation = context.current, prepared.previous, prepared.conversation
            if connection is not None and turn.status == "failed":
                connection.forget()
            elif connection is not None:
                connection.remember(response_id, [*prepared.history, *current, *turn.output])
            if body.get("background") is True and body.get("stream") is not True:
                queued = {**public, "status": "queued", "completed_at": None, "usage": None}
                queued.update(error=None, incomplete_details=None)
                pending = Pending(public, turn.output, max(0, self.config.background_polls))
                if conversation is not None:
                    pending.conversation_id, pending.conversation_items = conversation.id, [*current, *turn.output]
                stored = StoredResponse(response_id, queued, current, [], previous, pending, prepared.caller)
                self.store.put_response(stored)
                return self._render(queued, [], include)
            if prepared.store:
                stored = StoredResponse(response_id, public, current, turn.output, previous, caller=prepared.caller)
                self.store.put_response(stored)
            if conversation is not None:
                self.store.append_to_conversation(conversation.id, [*current, *turn.output], persist=prepared.store)
        return self._render(public, turn.output, include)

    def count_input_tokens(self, body: Mapping[str, Any], caller: Caller | None = None) -> dict[str, Any]:
        """POST /v1/responses/input_tokens: what `create` would report as `usage.input_tokens`; nothing is
        stored and no id is spent."""
        with self.store.lock:
            prepared = self._prepare(body, lambda prefix: f"{prefix}_uncounted", None, count=True, caller=caller)
            counted = rendering.input_tokens(prepared.rendered.context, prepared.request.instructions)
        return {"object": "response.input_tokens", "input_tokens": counted}

    def _compaction_entry(self, entries: list[Entry], caller: Caller) -> Entry:
        """Server-side compaction: one item standing for the whole context so far; what came before it
        may then be dropped from a replay."""
        compaction_id = self.ids.new("cmp")
        sealed = seal_compaction(entries, self.sealer, caller)
        return Entry({"type": "compaction", "id": compaction_id, "encrypted_content": sealed})

    def compact_response(self, body: Mapping[str, Any], caller: Caller | None = None) -> dict[str, Any]:
        """POST /v1/responses/compact: user messages kept, everything else sealed into one compaction item.

        Nothing is stored; replaying the returned `output` as `input` restores the full context.
        """
        model_name = body.get("model")
        if not isinstance(model_name, str) or not model_name:
            raise bad_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        previous = body.get("previous_response_id")
        if previous is not None and not isinstance(previous, str):
            raise bad_request("Invalid type for 'previous_response_id'.", param="previous_response_id")
        instructions = _instructions_text(body.get("instructions"))
        who = self._caller(caller, body)
        with self.store.lock:
            history = self._previous_history(previous, None, who) if previous is not None else []
            self._check_replayed(body.get("input"), history, chained=previous is not None, caller=who)
            current = resolve_input(body.get("input"), self.store, self.sealer, self.ids.new)
            if self.config.drop_context:
                history = []
            entries = [*history, *current]
            model.check_tool_pairs(entries)
            kept = [e.item for e in entries if is_user_message(e.item)]
            compacted = [e for e in entries if not is_user_message(e.item)]
            compaction_id = self.ids.new("cmp")
            compaction = {
                "type": "compaction",
                "id": compaction_id,
                "encrypted_content": seal_compaction(compacted, self.sealer, who),
            }
            response_id = self.ids.new("resp")
        input_tokens = rendering.input_tokens(Context(current=entries), instructions)
        cached = sum(rendering.entry_tokens(e) for e in history)
        output_tokens = sum(tokens.count(text_of(e.item, e.notes)) for e in compacted) + tokens.ITEM_OVERHEAD
        return {
            "id": response_id,
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*kept, compaction],
            "usage": tokens.usage(input_tokens, cached, output_tokens, 0),
        }

    def _response_body(
        self, body: Mapping[str, Any], prepared: _Prepared, response_id: str, turn: model.Turn, now: int
    ) -> dict[str, Any]:
        """The response object; `output` is filled in by `_render`."""
        request, conversation_id, store = prepared.request, prepared.conversation_id, prepared.store
        reasoning_param = body.get("reasoning")
        reasoning: dict[str, Any] = {"effort": None, "summary": None}
        if request.reasoning:  # the model decides; a non-reasoning model reports no reasoning settings
            asked = reasoning_param if isinstance(reasoning_param, Mapping) else {}
            reasoning = {
                "effort": asked.get("effort") or "medium",
                "summary": asked.get("summary"),
                "context": prepared.reasoning_context,  # the effective one
            }
        extra: dict[str, Any] = {}
        options = body.get("prompt_cache_options")
        if isinstance(options, Mapping):
            extra["prompt_cache_options"] = prompt_cache.options(options)
            extra["prompt_cache_diagnostics"] = prompt_cache.diagnostics(self.store, body, prepared.context)
        return {
            "id": response_id,
            "object": "response",
            "created_at": now,
            "status": turn.status,
            "completed_at": now if turn.status == "completed" else None,
            "background": bool(body.get("background", False)),
            "error": turn.error,
            "incomplete_details": {"reason": turn.incomplete_reason} if turn.incomplete_reason else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": body.get("max_tool_calls"),
            "model": request.model,
            "output": [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "conversation": {"id": conversation_id} if conversation_id is not None else None,
            "reasoning": reasoning,
            "service_tier": body.get("service_tier") or "default",
            "store": store,
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": request.tools,
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": turn.usage,
            "user": body.get("user"),
            "metadata": body.get("metadata") or {},
            "input_transformations": prepared.rendered.transformations(),
            **extra,
        }

    def _render_items(self, entries: list[Entry], include: list[str]) -> list[Item]:
        """Items as the API serialises them: every opaque payload encrypted afresh (same length, other bytes, as
        the real API does each time); reasoning gets `encrypted_content` only when included."""
        items: list[Item] = []
        for entry in entries:
            item = dict(entry.item)
            if item.get("type") == "reasoning":
                item.pop("encrypted_content", None)
                if ENCRYPTED_REASONING in include and entry.notes is not None:
                    item["encrypted_content"] = seal_reasoning(entry.notes, entry.minted, self.sealer)
            elif isinstance(item.get("encrypted_content"), str):
                item["encrypted_content"] = self.sealer.reseal(item["encrypted_content"])
            items.append(item)
        return items

    def reseal(self, item: Item) -> Item:
        """Another serialisation of an item already rendered: its opaque payload encrypted afresh (a stream's
        `output_item.done` and `response.completed` carry different copies of one item)."""
        token = item.get("encrypted_content")
        return {**item, "encrypted_content": self.sealer.reseal(token)} if isinstance(token, str) else item

    def _render(self, public: dict[str, Any], output: list[Entry], include: list[str]) -> dict[str, Any]:
        """The body with its output items."""
        return {**public, "output": self._render_items(output, include)}

    def _stored(self, response_id: str) -> StoredResponse:
        stored = self.store.get_response(response_id)
        if stored is None:
            raise not_found(f"Response with id '{response_id}' not found.")
        return stored

    def retrieve_response(self, response_id: str, include: list[str]) -> dict[str, Any]:
        """GET /v1/responses/{id}: only `store=true` responses exist; each retrieve of an unfinished
        background response advances it (`queued` -> `in_progress` ... -> finished)."""
        with self.store.lock:
            stored = self._stored(response_id)
            pending = stored.pending
            if pending is not None and pending.polls_left > 0:
                pending.polls_left -= 1
                stored.body = {**stored.body, "status": "in_progress"}
            elif pending is not None:
                self.store.finish(stored)
            return self._render(stored.body, stored.output, include)

    def cancel_response(self, response_id: str) -> dict[str, Any]:
        """POST /v1/responses/{id}/cancel: an unfinished background response becomes `cancelled` (its output
        is never produced); a finished one is returned unchanged; a foreground one is a 400."""
        with self.store.lock:
            stored = self._stored(response_id)
            if stored.body.get("background") is not True:
                raise bad_request("Only responses created with background=true can be cancelled.")
            if stored.pending is not None:
                stored.pending = None
                stored.body = {**stored.body, "status": "cancelled"}
            return self._render(stored.body, stored.output, [])

    def delete_response(self, response_id: str) -> dict[str, Any]:
        """DELETE /v1/responses/{id}."""
        if not self.store.delete_response(response_id):
            raise not_found(f"Response with id '{response_id}' not found.")
        return {"id": response_id, "object": "response", "deleted": True}

    def list_input_items(
        self, response_id: str, query: Mapping[str, str], include: list[str] | None = None
    ) -> dict[str, Any]:
        """GET /v1/responses/{id}/input_items: this request's own input items, newest first by default."""
        with self.store.lock:
            stored = self._stored(response_id)
            items = self._render_items(stored.input, include or [])
        return _paginate(items, query, "desc")

    # -- conversations ---------------------------------------------------------------------

    def create_conversation(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/conversations: a conversation seeded with `items`."""
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise bad_request("Invalid type for 'metadata': expected an object.", param="metadata")
        with self.store.lock:
            entries = resolve_input(body.get("items"), self.store, self.sealer, self.ids.new, param="items")
            conversation = Conversation(self.ids.new("conv"), int(time.time()), metadata or {}, entries)
            self.store.put_conversation(conversation)
            return conversation.body()

    def _conversation(self, conversation_id: str) -> Conversation:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            raise not_found(f"Conversation with id '{conversation_id}' not found.")
        return conversation

    def retrieve_conversation(self, conversation_id: str) -> dict[str, Any]:
        """GET /v1/conversations/{id}."""
        return self._conversation(conversation_id).body()

    def delete_conversation(self, conversation_id: str) -> dict[str, Any]:
        """DELETE /v1/conversations/{id}."""
        if not self.store.delete_conversation(conversation_id):
            raise not_found(f"Conversation with id '{conversation_id}' not found.")
        return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}

    def list_conversation_items(
        self, conversation_id: str, query: Mapping[str, str], include: list[str] | None = None
    ) -> dict[str, Any]:
        """GET /v1/conversations/{id}/items: newest first by default, like the API."""
        with self.store.lock:
            items = self._render_items(list(self._conversation(conversation_id).items), include or [])
        return _paginate(items, query, "desc")

    def add_conversation_items(
        self, conversation_id: str, body: Mapping[str, Any], include: list[str]
    ) -> dict[str, Any]:
        """POST /v1/conversations/{id}/items: append items (context of later responses in the conversation);
        answers a list page of the added items, with their ids."""
        raw = body.get("items")
        if raw is None:
            raise bad_request("Missing required parameter: 'items'.", param="items", code="missing_required_parameter")
        if not isinstance(raw, list):
            raise bad_request("Invalid type for 'items': expected an array of items.", param="items")
        with self.store.lock:
            conversation = self._conversation(conversation_id)
            entries = resolve_input(raw, self.store, self.sealer, self.ids.new, param="items")
            self.store.append_to_conversation(conversation.id, entries, persist=True)
        return _list_page(self._render_items(entries, include))

    def retrieve_conversation_item(self, conversation_id: str, item_id: str, include: list[str]) -> dict[str, Any]:
        """GET /v1/conversations/{id}/items/{item_id}."""
        with self.store.lock:
            for entry in self._conversation(conversation_id).items:
                if entry.item.get("id") == item_id:
                    return self._render_items([entry], include)[0]
        raise not_found(f"Item with id '{item_id}' not found.")

    def delete_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any]:
        """DELETE /v1/conversations/{id}/items/{item_id}: answers the conversation."""
        with self.store.lock:
            conversation = self._conversation(conversation_id)
            if not self.store.remove_conversation_item(conversation_id, item_id):
                raise not_found(f"Item with id '{item_id}' not found.")
            return conversation.body()

    def update_conversation(self, conversation_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/conversations/{id}: replace its `metadata`."""
        if "metadata" not in body:
            raise bad_request(
                "Missing required parameter: 'metadata'.", param="metadata", code="missing_required_parameter"
            )
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise bad_request("Invalid type for 'metadata': expected an object.", param="metadata")
        with self.store.lock:
            conversation = self._conversation(conversation_id)
            conversation.metadata = dict(metadata or {})
            return conversation.body()
