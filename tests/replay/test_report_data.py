"""The report's figures (router/replay/report_data.py): turns, not decisions; the model a turn used."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from router.engine.choices import chosen_model
from router.load.prices import Catalog
from router.replay.report_data import from_log, log_turns, project_name
from router.replay.report_svg import nice_ticks

PRICED = Catalog({"cloud/big": {"cost": {"input": 2, "output": 10}}})


def rec(event: str, model: str | None, **extra: Any) -> dict[str, Any]:
    return {"session": "s1", "event": event, "model": model, **extra}


def test_a_turn_on_a_virtual_model_is_the_routed_models_with_the_routes_tier() -> None:
    turns = log_turns([rec("route", "local/small", tier="local"), rec("turn_end", "auto/router", cost=0.0),
                       rec("route", "cloud/big", tier="cloud"), rec("context", "auto/router"),
                       rec("turn_end", "auto/router", cost=0.5),
                       rec("route", "cloud/big"), rec("turn_end", "auto/router", cost=0.1)], PRICED, None)
    assert [(t.number, t.model, t.tier, t.cost, t.source) for t in turns] == [
        (1, "local/small", "local", 0.0, "local"), (2, "cloud/big", "cloud", 0.5, "recorded"),
        (3, "cloud/big", "cloud", 0.1, "recorded")]  # the last tier learned from an earlier decision


def test_context_events_are_decisions_not_turns() -> None:
    figures = from_log([rec("context", "cloud/big")] * 5 + [rec("turn_end", "cloud/big", cost=1.0)], PRICED,
                       None, "t")
    assert len(figures.records) == 6 and len(figures.turns) == 1


def test_the_baseline_prices_the_recorded_tokens_and_a_turn_without_tokens_has_none() -> None:
    turns = log_turns([rec("turn_end", "local/small", cost=0.0, tokens={"input": 1000, "output": 100}),
                       rec("turn_end", "local/small", cost=0.0)], PRICED, "cloud/big")
    assert turns[0].baseline == (1000 * 2 + 100 * 10) / 1e6 and turns[0].tokens == 1100
    assert turns[1].baseline is None and turns[1].tokens is None


def test_an_unpriced_cloud_turn_has_no_cost_and_the_tier_says_unknown_without_a_catalog() -> None:
    turns = log_turns([rec("turn_end", "cloud/big")], Catalog(), None)
    assert (turns[0].cost, turns[0].source, turns[0].tier) == (None, None, "unknown")


def test_blocked_calls_and_fallbacks_come_from_the_records() -> None:
    figures = from_log([rec("tool_call", "m", actions=[{"action": "block", "rule": "no-rm",
                                                         "params": {"reason": "no"}}],
                            signals={"judge": {"source": "error"}}, errors=["RT404 budget"])],
                       PRICED, None, "t")
    assert [(b.rule, b.reason) for b in figures.blocked] == [("no-rm", "no")]
    assert figures.failures == {("signal error", "judge"): 1, ("evaluation error", "RT404"): 1}


def test_a_project_is_a_name_a_mapping_or_a_directory() -> None:
    assert project_name({"name": "alpha", "digest": "sha256:1"}) == "alpha"
    assert project_name("/home/user/project") == "project"
    assert project_name(None) is None and project_name(3) is None


def test_the_turn_end_model_is_the_one_that_answered() -> None:
    event = {"type": "turn_end", "model": {"ref": "auto/router"}, "answered_by": "cloud/big"}
    assert chosen_model(event, []) == "cloud/big"
    assert chosen_model({"model": {"ref": "auto/router"}}, []) == "auto/router"


@given(st.floats(min_value=1e-9, max_value=1e9, allow_nan=False))
def test_ticks_start_at_zero_cover_the_top_in_even_steps(top: float) -> None:
    ticks = nice_ticks(top)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert ticks[0] == 0 and ticks[-1] >= top * (1 - 1e-9) and 3 <= len(ticks) <= 12
    assert max(steps) - min(steps) <= max(steps) * 1e-6
