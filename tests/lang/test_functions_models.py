"""lang.functions: the number, score, thinking-level and model-catalog helpers."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.helpers import fails, run


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        (1.7, 0, 1, 1),
        (-3, 0, 1, 0),
        (0.5, 0, 1, 0.5),
        (math.inf, 0, 1, 0),
        (-math.inf, 0, 1, 0),
        (math.nan, 0.2, 1, 0.2),
        (5, 5, 5, 5),
    ],
)
def test_clamp_limits_and_non_finite_becomes_low(
    value: float, low: float, high: float, expected: float
) -> None:
    assert run("clamp(v, lo, hi)", v=value, lo=low, hi=high) == expected


@pytest.mark.parametrize("value", ["0.5", None, True, [1]])
def test_clamp_non_number_rt402(value: Any) -> None:
    assert fails("clamp(v, 0, 1)", v=value).code == "RT402"


CATALOG = {
    "a": {"context_window": 8000, "cost": {"input": 1, "output": 1}},
    "b": {"context_window": 32000, "cost": {"input": 0.5, "output": 0.5}},
    "c": {"context_window": 32000, "cost": {"input": 0.25, "output": 0.75}},
    "d": {"context_window": 16000},
    "z": {"context_window": 32000, "cost": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}},
}


@pytest.mark.parametrize(
    ("refs", "strategy", "score", "expected"),
    [
        (["a", "b", "c"], "smallest_fitting", 0.2, "a"),
        (["a", "b", "c"], "smallest_fitting", 0.5, "b"),
        (["c", "b", "a"], "smallest_fitting", 0.5, "c"),
        (["a", "b", "c"], "smallest_fitting", 2, "b"),
        (["a", "b", "c"], "largest", 0, "b"),
        (["c", "b", "a"], "largest", 0, "c"),
        (["a", "b", "c"], "smallest", 0, "a"),
        (["a", "b", "c"], "cheapest", 0, "b"),
        (["c", "b", "a"], "cheapest", 0, "c"),
        (["a", "d"], "cheapest", 0, "a"),
        (["a", "b"], "cheapest", 0.9, "b"),
        (["a", "d"], "cheapest", 2, "a"),
        (["z", "a"], "cheapest", 0, "a"),  # zero prices are Pi's "no price": after the priced ones
        (["z", "d"], "cheapest", 0, "z"),  # among models without a price, catalog order
        (["d", "z"], "cheapest", 0, "d"),
        (["a", "z"], "cheapest", 0.5, "z"),  # fitting first: a (0.25) does not fit 0.5
        (["zz", "a"], "largest", 0, "a"),
        (["zz"], "largest", 0, None),
        ([], "cheapest", 0, None),
    ],
)
def test_pick_model_strategies_and_catalog_order_ties(
    refs: list[str], strategy: str, score: float, expected: str | None
) -> None:
    assert run("pick_model(r, s, m, x)", r=refs, s=strategy, m=CATALOG, x=score) == expected


def test_pick_model_capabilities_override_window() -> None:
    caps = {"a": 0.9, "b": 0.3}
    assert run("pick_model(['a', 'b'], 'smallest_fitting', m, 0.5, c)", m=CATALOG, c=caps) == "a"
    assert run("pick_model(['a', 'b'], 'largest', m, 0, c)", m=CATALOG, c=caps) == "a"


def test_pick_model_capabilities_entry_alone_is_not_a_known_model() -> None:
    caps = {"zz": 1.0, "a": 0.3}
    assert run("pick_model(['zz', 'a'], 'largest', m, 0, c)", m=CATALOG, c=caps) == "a"
    assert run("pick_model(['zz'], 'smallest_fitting', m, 0.5, c)", m=CATALOG, c=caps) is None


def test_pick_model_unknown_strategy_rt402() -> None:
    error = fails("pick_model(['a'], 'best', m, 0)", m=CATALOG)
    assert error.code == "RT402" and "cheapest" in error.message


def test_pick_model_non_object_entry_rt402() -> None:
    assert fails("pick_model(['a'], 'cheapest', m, 0)", m={"a": "oops"}).code == "RT402"


TABLE = [{"score": 0.7, "level": "medium"}, {"score": 0.2, "level": "off"}, {"score": 0.4, "level": "low"}]


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (-1, "off"),
        (0, "off"),
        (0.2, "off"),
        (0.2000001, "low"),
        (0.4, "low"),
        (0.7, "medium"),
        (0.71, "high"),
        (1, "high"),
    ],
)
def test_map_score_boundaries_inclusive_upper(score: float, level: str) -> None:
    assert run("map_score(s, t, 'high')", s=score, t=TABLE) == level


def test_map_score_value_key_and_empty_table() -> None:
    assert run("map_score(0.1, [{'score': 0.5, 'value': 7}], 0)") == 7
    assert run("map_score(0.1, [], 'dflt')") == "dflt"


@pytest.mark.parametrize(
    ("score", "table"), [("x", TABLE), (None, TABLE), (0.5, [{"level": "off"}]), (0.5, "t")]
)
def test_map_score_bad_input_rt402(score: Any, table: Any) -> None:
    assert fails("map_score(s, t, 'high')", s=score, t=table).code == "RT402"


def test_map_score_non_object_entry_rt402() -> None:
    assert fails("map_score(0.5, [1], 'high')").code == "RT402"


@pytest.mark.parametrize(
    ("level", "ceiling", "expected"),
    [
        ("medium", "low", "low"),
        ("low", "medium", "low"),
        ("max", "xhigh", "xhigh"),
        ("off", "max", "off"),
        ("high", None, "high"),
    ],
)
def test_cap_level_lower_of_two(level: str, ceiling: str | None, expected: str) -> None:
    assert run("cap_level(l, c)", l=level, c=ceiling) == expected


@pytest.mark.parametrize(("level", "ceiling"), [("huge", "low"), ("low", "huge")])
def test_cap_level_unknown_level_rt402(level: Any, ceiling: Any) -> None:
    assert fails("cap_level(l, c)", l=level, c=ceiling).code == "RT402"


def test_cap_level_null_level_without_ceiling_stays_null() -> None:
    assert run("cap_level(null, null)") is None
