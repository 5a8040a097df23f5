"""Several proxy replicas behind one service share what they saw through the shared ledger (``ledger_url`` and
``hash_key``, from the environment or the option table as in-process): a turn answered through one replica is
continued through another, and the second one's span names the loss the first one's turn makes possible — marked as
resting on a shared entry, and never refused on it in strict mode. (The `redis_url` fixture starts a `redis-server`:
without one this skips, and fails in CI.)"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from otel_responses.emulator import Emulator

from .support import KEY, proxied


def _events(span: object) -> list[dict[str, object]]:
    return [dict(e.attributes or {}) for e in getattr(span, "events", ()) if e.name == "openai_responses.signal"]


def test_a_turn_made_through_one_replica_is_known_to_the_other(emulator: Emulator, redis_url: str) -> None:
    options = {"ledger_url": redis_url, "hash_key": KEY}
    with proxied(emulator.base_url, options) as one, proxied(emulator.base_url, {**options, "strict": True}) as two:
        with one.client() as client:
            first = client.responses.create(
                model="gpt-5.4",
                instructions="Be brief.",
                input="Remember this: the marker is R-1.",
                store=False,
                include=["reasoning.encrypted_content"],
            )
            (made,) = one.wait_for_spans(1)
        with two.client() as client:
            with pytest.raises(openai.BadRequestError) as answered:  # the API's own refusal, not strict mode's
                client.responses.create(
                    model="gpt-5.4",
                    instructions="Be brief.",
                    input="What is the marker?",
                    previous_response_id=first.id,
                )
            replay: Any = [
                {"role": "user", "content": "Remember this: the marker is R-1."},
                *[item for item in first.output if item.type != "reasoning"],  # the reasoning dropped
                {"role": "user", "content": "What is the marker?"},
            ]
            replayed = client.responses.create(
                model="gpt-5.4",
                instructions="Be brief.",
                input=replay,
                store=False,
                include=["reasoning.encrypted_content"],
                reasoning={"context": "all_turns"},  # the earlier turn's reasoning would have been read
            )
            chained, replay = two.wait_for_spans(2)
    assert answered.value.code == "previous_response_not_found"
    assert replayed.output_text
    assert dict(made.attributes or {})["openai_responses.signals"] == ()
    assert dict(chained.attributes or {})["openai_responses.signals"] == ("unstored_parent",)
    assert [e["openai_responses.ledger.shared"] for e in _events(chained)] == [True]
    assert dict(replay.attributes or {})["openai_responses.signals"] == ("reasoning_dropped",)
    assert dict(replay.attributes or {})["openai_responses.turn"] == 2
