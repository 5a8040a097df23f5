"""The Responses and Conversations endpoints as plain functions of JSON in, JSON out.

Kept apart from HTTP so the semantics (validation order, what is stored, what is echoed)
read in one place and the server only routes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from . import model, tokens
from .config import EmulatorConfig
from .context import Context, chain_history, resolve_input, seal_compaction
from .crypto import Sealer
from .errors import bad_request, not_found
from .items import Item, is_user_message, parts_text, text_of
from .state import Conversation, Entry, IdFactory, Store, StoredResponse

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

    def create_response(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/responses: validate, build the context, run the model, persist, answer."""
        model_name = body.get("model")
        if not isinstance(model_name, str) or not model_name:
            raise bad_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
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
        store = body.get("store") is not False
        include = _strings(body.get("include"))
        tools = body.get("tools") if isinstance(body.get("tools"), list) else []
        reasoning_param = body.get("reasoning")
        reasoning = isinstance(reasoning_param, Mapping) or self.config.is_reasoning_model(model_name)
        max_output = body.get("max_output_tokens")
        request = model.Request(
            model=model_name,
            instructions=_instructions_text(body.get("instructions")),
            tools=list(tools or []),
            reasoning=reasoning,
            reasoning_summary=isinstance(reasoning_param, Mapping) and bool(reasoning_param.get("summary")),
            max_output_tokens=max_output if isinstance(max_output, int) and not isinstance(max_output, bool) else None,
        )

        with self.store.lock:
            history: list[Entry] = []
            conversation: Conversation | None = None
            if previous is not None:
                history = chain_history(self.store, previous)
            elif conversation_id is not None:
                conversation = self.store.get_conversation(conversation_id)
                if conversation is None:
                    raise not_found(f"Conversation with id '{conversation_id}' not found.", param="conversation")
                history = list(conversation.items)
            current = resolve_input(body.get("input"), self.store, self.sealer, self.ids.new)
            response_id = self.ids.new("resp")
            context = Context(history=[] if self.config.drop_context else history, current=current)
            turn = model.respond(context, request, response_id=response_id, seed=self.config.seed, new_id=self.ids.new)
            threshold = _compact_threshold(body.get("context_management"))
            if threshold is not None and turn.usage["input_tokens"] > threshold:
                turn.output.insert(0, self._compaction_entry(context.entries))
            now = int(time.time())
            public = self._response_body(body, request, response_id, conversation_id, store, turn, now)
            if store:
                self.store.put_response(StoredResponse(response_id, public, current, turn.output, previous))
            if conversation is not None:
                self.store.append_to_conversation(conversation.id, [*current, *turn.output], persist=store)
        return self._render(public, turn.output, include)

    def _compaction_entry(self, entries: list[Entry]) -> Entry:
        """Server-side compaction: one item standing for the whole context so far; what came before it
        may then be dropped from a replay."""
        compaction_id = self.ids.new("cmp")
        sealed = seal_compaction(entries, self.sealer, compaction_id)
        return Entry({"type": "compaction", "id": compaction_id, "encrypted_content": sealed})

    def compact_response(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/responses/compact: user messages kept, everything else sealed into one compaction item.

        Nothing is stored; replaying the returned `output` as `input` restores the full context.
        """
        model_name = body.get("model")
        if not isinstance(model_name, str) or not model_name:
            raise bad_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        previous = body.get("previous_response_id")
        instructions = _instructions_text(body.get("instructions"))
        with self.store.lock:
            history = chain_history(self.store, previous) if isinstance(previous, str) else []
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
                "encrypted_content": seal_compaction(compacted, self.sealer, compaction_id),
            }
            response_id = self.ids.new("resp")
        input_tokens = sum(tokens.item_tokens(text_of(e.item, e.notes)) for e in entries)
        if instructions:
            input_tokens += tokens.item_tokens(instructions)
        cached = sum(tokens.item_tokens(text_of(e.item, e.notes)) for e in history)
        output_tokens = sum(tokens.count(text_of(e.item, e.notes)) for e in compacted) + tokens.ITEM_OVERHEAD
        return {
            "id": response_id,
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*kept, compaction],
            "usage": tokens.usage(input_tokens, cached, output_tokens, 0),
        }

    def _response_body(
        self,
        body: Mapping[str, Any],
        request: model.Request,
        response_id: str,
        conversation_id: str | None,
        store: bool,
        turn: model.Turn,
        now: int,
    ) -> dict[str, Any]:
        """The response object; `output` is filled in by `_render`."""
        reasoning_param = body.get("reasoning")
        if isinstance(reasoning_param, Mapping):
            reasoning = {"effort": reasoning_param.get("effort", "medium"), "summary": reasoning_param.get("summary")}
        elif request.reasoning:
            reasoning = {"effort": "medium", "summary": None}
        else:
            reasoning = {"effort": None, "summary": None}
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
        }

    def _render(self, public: dict[str, Any], output: list[Entry], include: list[str]) -> dict[str, Any]:
        """The body with its output items; reasoning gets `encrypted_content` only when included."""
        items: list[Item] = []
        for entry in output:
            item = dict(entry.item)
            if item.get("type") == "reasoning" and ENCRYPTED_REASONING in include and entry.notes is not None:
                item["encrypted_content"] = self.sealer.seal(entry.notes, str(item.get("id")))
            items.append(item)
        return {**public, "output": items}

    def _stored(self, response_id: str) -> StoredResponse:
        stored = self.store.get_response(response_id)
        if stored is None:
            raise not_found(f"Response with id '{response_id}' not found.")
        return stored

    def retrieve_response(self, response_id: str, include: list[str]) -> dict[str, Any]:
        """GET /v1/responses/{id}: only `store=true` responses exist."""
        stored = self._stored(response_id)
        return self._render(stored.body, stored.output, include)

    def delete_response(self, response_id: str) -> dict[str, Any]:
        """DELETE /v1/responses/{id}."""
        if not self.store.delete_response(response_id):
            raise not_found(f"Response with id '{response_id}' not found.")
        return {"id": response_id, "object": "response", "deleted": True}

    def list_input_items(self, response_id: str, query: Mapping[str, str]) -> dict[str, Any]:
        """GET /v1/responses/{id}/input_items: this request's own input items, newest first by default."""
        stored = self._stored(response_id)
        return _paginate([dict(e.item) for e in stored.input], query, "desc")

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

    def list_conversation_items(self, conversation_id: str, query: Mapping[str, str]) -> dict[str, Any]:
        """GET /v1/conversations/{id}/items: newest first by default, like the API."""
        with self.store.lock:
            items = [dict(e.item) for e in self._conversation(conversation_id).items]
        return _paginate(items, query, "desc")
