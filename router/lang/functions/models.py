"""Thinking levels, score tables and the model catalog."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from router.lang.functions.registry import (
    fail,
    function,
    list_arg,
    number_arg,
)

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


# --- thinking levels and scores ---------------------------------------------------------------


def _level_rank(name: str, level: Any) -> int:
    if level in THINKING_LEVELS:
        return THINKING_LEVELS.index(level)
    raise fail(name, f"unknown thinking level {level!r}; expected one of {', '.join(THINKING_LEVELS)}")


@function("cap_level", min_args=2, max_args=2, example="cap_level('medium', 'low') == 'low'")
def cap_level(level: Any, ceiling: Any) -> str | None:
    """The lower of two thinking levels (off < minimal < low < medium < high < xhigh < max)."""
    if level is None:
        return None
    if ceiling is None:
        return str(level)
    return THINKING_LEVELS[min(_level_rank("cap_level", level), _level_rank("cap_level", ceiling))]


@function("map_score", min_args=3, max_args=3,
          example="map_score(0.3, [{'score': 0.2, 'level': 'off'}, {'score': 0.4, 'level': 'low'}], 'high') == 'low'")  # noqa: E501
def map_score(score: Any, table: Any, default: Any) -> Any:
    """First entry, by ascending `score`, whose score is at least the given one; else `default`."""
    value = number_arg("map_score", score)
    rows = list_arg("map_score", table)
    if not all(isinstance(e, Mapping) for e in rows):
        raise fail("map_score", "expected an array of objects with `score`")
    entries = sorted(rows, key=lambda e: number_arg("map_score", e.get("score")))
    for entry in entries:
        if value <= entry["score"]:
            return entry.get("level", entry.get("value"))
    return default


# --- model catalog ----------------------------------------------------------------------------


def _capacity(ref: str, models: Mapping[str, Any], capabilities: Mapping[str, Any], top: float) -> float:
    if ref in capabilities:
        return float(capabilities[ref])
    window = (models.get(ref) or {}).get("context_window") or 0
    return float(window) / top if top else 0.0


def _price(ref: str, models: Mapping[str, Any]) -> float:
    """Input plus output price; infinite without a price (no cost, or all zero as Pi reports none)."""
    cost = (models.get(ref) or {}).get("cost") or {}
    if not cost.get("input") and not cost.get("output"):
        return math.inf
    return float(cost.get("input") or 0) + float(cost.get("output") or 0)


@function("pick_model", min_args=3, max_args=5,
          example="pick_model(['a', 'b'], 'smallest_fitting', {'a': {'context_window': 8000}, 'b': {'context_window': 32000}}, 0.2) == 'a'")  # noqa: E501
def pick_model(refs: Any, strategy: Any, models: Any, score: Any = 0, capabilities: Any = None) -> Any:
    """Pick a model ref from a catalog list by capacity or cost.

    Capacity is the `capabilities` entry, else the context window divided by the largest window
    among the candidates. Strategies: `smallest_fitting` (smallest capacity >= score, else the
    largest), `largest`, `smallest`, `cheapest` (lowest input+output price among those that fit,
    else among all; priced models first, then those without a price (no `cost`, or zero input
    and output prices: Pi's way of saying none) in catalog order; catalog order breaks ties).
    Refs missing from `models` are skipped, even with a `capabilities` entry: Pi cannot route
    to a model it does not know.
    """
    catalog = models if isinstance(models, Mapping) else {}
    if not all(isinstance(v, Mapping) for v in catalog.values()):
        raise fail("pick_model", "expected `models` to map refs to model objects")
    caps = capabilities if isinstance(capabilities, Mapping) else {}
    known = [r for r in list_arg("pick_model", refs) if r in catalog]
    if not known:
        return None
    top = max(float((catalog.get(r) or {}).get("context_window") or 0) for r in known)
    need = float(number_arg("pick_model", score))
    capacity = {r: _capacity(r, catalog, caps, top) for r in known}
    fitting = [r for r in known if capacity[r] >= need]
    if strategy == "smallest_fitting":
        return min(fitting, key=lambda r: capacity[r]) if fitting else max(known, key=lambda r: capacity[r])
    if strategy == "largest":
        return max(known, key=lambda r: capacity[r])
    if strategy == "smallest":
        return min(known, key=lambda r: capacity[r])
    if strategy == "cheapest":
        return min(fitting or known, key=lambda r: _price(r, catalog))
    raise fail("pick_model", f"unknown strategy {strategy!r}; expected cheapest, largest, "
                              "smallest or smallest_fitting")
