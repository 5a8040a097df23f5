"""Write the reference parts of the documentation from the code, so they cannot drift from it.

    python docs/generate.py           # rewrite the generated blocks of docs/*.md
    python docs/generate.py --check   # exit 1 when a committed page differs from what the code gives

A generated block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` in a page; the
text around it is written by hand. ``options``: every setting of ``otel_responses.config.OPTIONS``; ``names``:
every attribute, event and metric name of ``otel_responses.attributes`` (its ``MEANINGS``); ``ledger-fields``: the
key of every field of a shared-ledger entry (``otel_responses.ledger._codec.FIELDS``); ``replay_rules``: the
emulator's table of the API's rules on replayed items (``otel_responses.emulator.replay_rules.RULES``).
tests/project/test_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from otel_responses import attributes, config
from otel_responses.emulator import replay_rules
from otel_responses.ledger import Entry
from otel_responses.ledger._codec import FIELDS

DOCS = Path(__file__).resolve().parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def options_table() -> str:
    """Every setting: keyword, environment variable, default, meaning, and what an unusable variable gives."""
    rows = [
        "| keyword | environment variable | default | meaning | an unusable environment value gives |",
        "|---|---|---|---|---|",
    ]
    for option in config.OPTIONS:
        variable = f"`{option.variable}`" if option.variable else "— (keyword only)"
        instead = option.instead if option.variable else "—"
        keyword = f"`{option.name}`" if option.keyword else "— (environment only)"
        rows.append(
            f"| {keyword} | {variable} | {_cell(option.default_text)} | {_cell(option.meaning)} | {_cell(instead)} |"
        )
    return "\n".join(rows)


def names() -> list[tuple[str, str, str, str, str]]:
    """(name, where it is recorded, type, meaning, constant) for every telemetry name of attributes.py, in the
    file's order, from its ``MEANINGS``; a constant without an entry there is an error. Its dialect:
    ``attributes.dialect_of(constant)``."""
    found = []
    for constant, value in vars(attributes).items():
        if not constant.isupper() or not isinstance(value, str) or constant == "PREFIX":
            continue
        if constant not in attributes.MEANINGS:
            raise ValueError(f"otel_responses/attributes.py: {constant} has no entry in MEANINGS")
        where, kind, meaning = attributes.MEANINGS[constant]
        found.append((value, where, kind, meaning, constant))
    return found


def names_table() -> str:
    """Every name but the values of other names, then those values; each with the dialect that emits it (``both``,
    ``default``, ``latest``: see the page's Dialects section)."""
    rows = ["| name | recorded as | type | dialect | meaning |", "|---|---|---|---|---|"]
    every = names()
    for value, where, kind, meaning, constant in every:
        if where != "value":
            rows.append(f"| `{value}` | {where} | {kind} | {attributes.dialect_of(constant)} | {_cell(meaning)} |")
    rows += ["", "| value | dialect | meaning |", "|---|---|---|"]
    for value, where, _, meaning, constant in every:
        if where == "value":
            rows.append(f"| `{value}` | {attributes.dialect_of(constant)} | {_cell(meaning)} |")
    return "\n".join(rows)


def replay_rules_table() -> str:
    """The API's rules on replayed items as the emulator keeps them, in the order they are checked: each with the
    API's answer (a refusal, or the reasoning withheld) and where that answer is known from."""
    rows = ["| rule | the API's answer | known from |", "|---|---|---|"]
    for rule in replay_rules.RULES:
        code = f"`{rule.code}`" if rule.code else "`null`"
        param = f"`{rule.param}`" if rule.param else "`null`"
        refusal = f"{rule.status} `{rule.type}`, code {code}, param {param}: {rule.message}"
        if rule.withholds is None:
            answer = refusal
        else:
            answer = f"withheld from the model, in `input_transformations` as `{rule.name}`"
            if rule.message:
                answer += f' (with `foreign_reasoning="refuse"`: {refusal})'
        rows.append(f"| `{rule.name}` | {_cell(answer)} | {_cell(rule.source)} |")
    return "\n".join(rows)


def ledger_fields_table() -> str:
    """Every shared field of an entry: its key, the ``Entry`` field, and its default as JSON (a writer leaves the key
    out then; a reader that misses the key gives the field that value)."""
    defaults = {field.name: field.default for field in dataclasses.fields(Entry)}
    rows = ["| key | field of `Entry` | default (the key left out) |", "|---|---|---|"]
    for row in FIELDS:
        default = defaults[row.name]
        if default is dataclasses.MISSING:
            shown = "— (required)"
        else:
            shown = f"`{json.dumps(None if default is None else row.write(default))}`"
        rows.append(f"| `{row.key}` | `{row.name}` | {shown} |")
    return "\n".join(rows)


BLOCKS: dict[str, dict[str, Callable[[], str]]] = {
    "configuration.md": {"options": options_table},
    "ledger.md": {"ledger-fields": ledger_fields_table},
    "records.md": {"names": names_table},
    "emulator.md": {"replay_rules": replay_rules_table},
}


def _fill(pattern: re.Pattern[str], content: str, text: str) -> str:
    return pattern.sub(lambda m: m.group(1) + content + m.group(2), text)


def render(page: str, text: str) -> str:
    """``text`` with each generated block of ``page`` rewritten; a missing block is an error."""
    for name, build in BLOCKS[page].items():
        pattern = re.compile(
            rf"(<!-- generated: {name} \(python docs/generate.py\) -->\n).*?(<!-- end generated: {name} -->)", re.S
        )
        if not pattern.search(text):
            raise ValueError(f"docs/{page}: no generated block {name!r}")
        text = _fill(pattern, build() + "\n", text)
    return text


def stale() -> list[str]:
    """The pages whose committed text differs from what the code gives."""
    return [page for page in BLOCKS if (DOCS / page).read_text() != render(page, (DOCS / page).read_text())]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/generate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a committed page differs from the code")
    args = parser.parse_args(argv)
    if args.check:
        for page in stale():
            print(f"docs/{page} is out of date: run python docs/generate.py", file=sys.stderr)
        return 1 if stale() else 0
    for page in stale():
        path = DOCS / page
        path.write_text(render(page, path.read_text()))
        print(f"wrote docs/{page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
