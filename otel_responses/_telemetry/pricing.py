"""Cost from a price table the user gives: never fetched, never guessed.

A table maps models (and optionally service tiers) to prices per 1M input, cached input and output tokens, in a
currency. It is read and validated once, at ``instrument()``; a call then costs one dictionary lookup (the price
of a model is looked up once per model and service tier, then cached).

Table format (a mapping, or the same in a JSON or TOML file)::

    {
      "currency": "USD",                       # the table's currency (an entry may name its own)
      "models": {
        "gpt-4o": {"input": 2.50, "cached_input": 1.25, "output": 10.00},
        "gpt-5.4": {
          "input": 1.25, "cached_input": 0.125, "output": 10.00,
          "service_tiers": {"flex": {"input": 0.625, "cached_input": 0.0625, "output": 5.00}}
        },
        "ft:gpt-4o-mini*": {"input": 0.30, "cached_input": 0.15, "output": 1.20}
      }
    }

``input`` and ``output`` are required, ``cached_input`` defaults to ``input`` (no discount); a service tier's
entry takes the same keys and defaults to its model's prices and currency.

Matching a model name (the response's ``model``, else the request's) to an entry:

1. the name itself, as configured;
2. the name without a trailing date snapshot suffix (``-2024-08-06``, ``-20240806``, ``-0613``): a dated snapshot
   is priced as its alias (``gpt-4o-2024-08-06`` as ``gpt-4o``) unless configured itself;
3. the longest configured prefix pattern (a key ending in ``*``) the name starts with.

A plain prefix rule is not used: ``gpt-4o`` would price ``gpt-4o-mini`` (a sixteenth of the price) when only
``gpt-4o`` is configured. A name no rule matches records no cost.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from .bounds import MAX_MODEL, MODEL_PATTERN

TOKENS_PER_PRICE: Final = 1_000_000  # prices are per 1M tokens
_ENTRY_KEYS: Final = frozenset({"input", "cached_input", "output", "currency", "service_tiers"})
_TIER_KEYS: Final = frozenset({"input", "cached_input", "output", "currency"})
_TABLE_KEYS: Final = frozenset({"currency", "models"})
_CURRENCY: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")
_TIER: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# `-2024-08-06`, `-20240806` and `-0613` (`gpt-4-0613`, `gpt-3.5-turbo-1106`) at the end of a model name.
_SNAPSHOT: Final = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")
_CACHE_SIZE: Final = 1024


class PriceError(ValueError):
    """The price table cannot be used; the message says where."""


class Price(NamedTuple):
    """Prices of one model (and tier) per 1M tokens, with their currency."""

    input: float
    cached_input: float
    output: float
    currency: str


class Cost(NamedTuple):
    """What one response cost, by token kind, and what its cached input saved."""

    input: float  # uncached input tokens
    cached_input: float
    output: float  # reasoning tokens included
    saved: float
    currency: str


_Entry = tuple[Price, dict[str, Price]]  # a model's prices, and its service tiers' own


class PriceTable:
    """A validated price table; :meth:`price` is cached per model and tier."""

    __slots__ = ("_cache", "_exact", "_prefixes")

    def __init__(self, exact: dict[str, _Entry], prefixes: list[tuple[str, Price, dict[str, Price]]]) -> None:
        self._exact = exact
        self._prefixes = sorted(prefixes, key=lambda entry: len(entry[0]), reverse=True)  # longest first
        self._cache: dict[tuple[str, str | None], Price | None] = {}

    def __len__(self) -> int:
        return len(self._exact) + len(self._prefixes)

    def price(self, model: str | None, tier: str | None = None) -> Price | None:
        """The price of ``model`` at service tier ``tier`` (a tier without an entry of its own: the model's)."""
        if model is None or len(model) > MAX_MODEL:
            return None
        key = (model, tier)
        try:
            return self._cache[key]
        except KeyError:
            pass
        found = self._match(model)
        price = None if found is None else found[1].get(tier, found[0]) if tier is not None else found[0]
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = price
        return price

    def _match(self, model: str) -> _Entry | None:
        found = self._exact.get(model)
        if found is not None:
            return found
        alias = _SNAPSHOT.sub("", model)
        if alias != model:
            found = self._exact.get(alias)
            if found is not None:
                return found
        for stem, price, tiers in self._prefixes:
            if model.startswith(stem):
                return price, tiers
        return None


def cost_of(price: Price, input_tokens: int | None, cached_tokens: int | None, output_tokens: int | None) -> Cost:
    """The cost of a response's usage. ``input_tokens`` includes the cached ones (as the API reports it);
    reasoning tokens are part of ``output_tokens``."""
    total_in = max(input_tokens or 0, 0)
    cached = min(max(cached_tokens or 0, 0), total_in)
    uncached = total_in - cached
    saved = cached * (price.input - price.cached_input) / TOKENS_PER_PRICE
    return Cost(
        uncached * price.input / TOKENS_PER_PRICE,
        cached * price.cached_input / TOKENS_PER_PRICE,
        max(output_tokens or 0, 0) * price.output / TOKENS_PER_PRICE,
        max(saved, 0.0),
        price.currency,
    )


# -- reading and validating -----------------------------------------------------------------------------------


def load_prices(value: object) -> PriceTable:
    """A table from a mapping, or from a ``.json`` or ``.toml`` file at a path; :class:`PriceError` otherwise."""
    if isinstance(value, (str, os.PathLike)):
        return parse_prices(_read_file(Path(value)))
    if isinstance(value, Mapping):
        return parse_prices(value)
    raise PriceError(f"prices must be a mapping or the path of a JSON or TOML file, got {type(value).__name__}")


def _read_file(path: Path) -> Mapping[str, Any]:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise PriceError(f"prices file {str(path)!r} must end in .json or .toml")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PriceError(f"prices file {str(path)!r} cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        parsed = json.loads(data) if suffix == ".json" else _toml().loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise PriceError(f"prices file {str(path)!r} is not valid {suffix[1:].upper()}: {exc}") from None
    if not isinstance(parsed, Mapping):
        raise PriceError(f"prices file {str(path)!r} must hold a table (an object), not {type(parsed).__name__}")
    return parsed


def _toml() -> Any:
    """``tomllib`` (Python 3.11+), else ``tomli`` when installed."""
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    try:
        return importlib.import_module(name)
    except ImportError:
        raise PriceError("a TOML prices file needs Python 3.11 or `pip install tomli`; or give JSON") from None


def parse_prices(table: Mapping[str, Any]) -> PriceTable:
    """Validate a table (see the module's docstring); :class:`PriceError` names the first problem."""
    unknown = sorted(str(k) for k in table if k not in _TABLE_KEYS)
    if unknown:
        raise PriceError(f"prices: unknown key(s) {', '.join(map(repr, unknown))} (known: currency, models)")
    currency = table.get("currency")
    if currency is not None:
        currency = _currency(currency, "prices.currency")
    models = table.get("models")
    if not isinstance(models, Mapping) or not models:
        raise PriceError("prices.models must be a non-empty mapping of model name to prices")
    exact: dict[str, _Entry] = {}
    prefixes: list[tuple[str, Price, dict[str, Price]]] = []
    for name, entry in models.items():
        where = f"prices.models[{_shown(name)}]"
        stem = _model_key(name, where)
        price = _price(entry, where, _ENTRY_KEYS, None, currency)
        tiers: dict[str, Price] = {}
        raw_tiers = entry.get("service_tiers")
        if raw_tiers is not None:
            if not isinstance(raw_tiers, Mapping):
                raise PriceError(f"{where}.service_tiers must be a mapping of tier name to prices")
            for tier, tier_entry in raw_tiers.items():
                tier_where = f"{where}.service_tiers[{_shown(tier)}]"
                if not isinstance(tier, str) or not _TIER.fullmatch(tier):
                    raise PriceError(f"{tier_where}: a service tier is a short lowercase name such as flex or priority")
                tiers[tier] = _price(tier_entry, tier_where, _TIER_KEYS, price, price.currency)
        if name.endswith("*"):
            prefixes.append((stem, price, tiers))
        else:
            exact[stem] = (price, tiers)
    return PriceTable(exact, prefixes)


def _shown(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _model_key(name: object, where: str) -> str:
    if not isinstance(name, str):
        raise PriceError(f"{where}: a model name must be a string")
    stem = name[:-1] if name.endswith("*") else name
    if not stem or len(stem) > MAX_MODEL or not MODEL_PATTERN.fullmatch(stem):
        raise PriceError(
            f"{where}: not a model name (letters, digits and ._:/@+- up to {MAX_MODEL} characters, optionally "
            "ending in * for a prefix)"
        )
    return stem


def _currency(value: object, where: str) -> str:
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise PriceError(f"{where} must be a currency code such as USD or EUR")
    return value


def _price(entry: object, where: str, keys: frozenset[str], base: Price | None, currency: str | None) -> Price:
    if not isinstance(entry, Mapping):
        raise PriceError(f"{where} must be a mapping with input, cached_input and output prices per 1M tokens")
    unknown = sorted(str(k) for k in entry if k not in keys)
    if unknown:
        raise PriceError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(sorted(keys))})")
    if "currency" in entry:
        currency = _currency(entry["currency"], f"{where}.currency")
    if currency is None:
        raise PriceError(f'{where}: no currency: set prices.currency (say "USD") or the entry\'s currency')
    values: dict[str, float] = {}
    for kind in ("input", "output", "cached_input"):
        if kind in entry:
            values[kind] = _amount(entry[kind], f"{where}.{kind}")
        elif base is not None:
            values[kind] = getattr(base, kind)
        elif kind == "cached_input":
            values[kind] = values["input"]
        else:
            raise PriceError(f"{where}: {kind} price missing (per 1M tokens)")
    return Price(values["input"], values["cached_input"], values["output"], currency)


def _amount(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PriceError(f"{where} must be a number (price per 1M tokens), got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise PriceError(f"{where} must be a finite number >= 0, got {value!r}")
    return number
