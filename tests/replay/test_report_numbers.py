"""A decision log's costs are JSON numbers Python reads as `NaN` and `Infinity` too: the report
is still written (such a cost counts as unknown), and costs that overflow draw no broken axis."""

from __future__ import annotations

import math

import pytest

from router.load.prices import Catalog
from router.replay.report_data import from_log
from router.replay.report_html import render
from router.replay.report_svg import nice_ticks


def _turn(seq: int, cost: float) -> dict[str, object]:
    return {"time": f"2026-12-01T10:0{seq}:00Z", "session": "s1", "event": "turn_end", "seq": seq,
            "model": "a/b", "answered_by": "a/b", "cost": cost}


@pytest.mark.parametrize("costs", [(math.inf, 1.0), (math.nan, 1.0), (1e308, 1e308)])
def test_a_log_with_non_finite_or_overflowing_costs_still_renders(costs: tuple[float, float]) -> None:
    page = render(from_log([_turn(i, c) for i, c in enumerate(costs, 1)], Catalog(), None, "t"))
    assert "</html>" in page


def test_the_ticks_of_an_infinite_top_are_the_default_ones() -> None:
    assert nice_ticks(math.inf) == [0.0, 1.0]
    assert nice_ticks(math.nan) == [0.0, 1.0]
