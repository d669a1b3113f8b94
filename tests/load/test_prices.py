"""router/load/prices.py: the one pricing of a turn, from a live event's models (the replay's
models.json reading is tests/replay/test_replay_prices.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from router.events.normalize import model_catalog
from router.load.prices import PRICE_SOURCES, Catalog, Tokens, read_catalog, usd

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**9)
                    | st.floats(-1e12, 1e12) | st.sampled_from([math.nan, math.inf, -math.inf])
                    | st.text(max_size=8), lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


def test_an_events_models_are_priced_as_pi_gives_them_and_all_zeros_is_no_price() -> None:
    models = model_catalog([
        {"provider": "c", "id": "big", "cost": {"input": 2, "output": 10, "cacheRead": 0.5}},
        {"provider": "c", "id": "zero", "cost": {"input": 0, "output": 0}},
        {"provider": "c", "id": "odd", "cost": {"input": -3, "output": float("nan")}},  # no price
        {"provider": "ollama", "id": "q", "cost": {"input": 0, "output": 0}}])
    catalog = Catalog.of_event(models, {"c/zero": {"output": 1.0}})
    tokens = Tokens(input=1_000_000, output=1_000_000, cache_read=2_000_000)
    assert catalog.priced("c/big", tokens) == (2 + 10 + 1.0, "registry")
    assert catalog.priced("c/zero", tokens) == (1.0, "policy")
    assert catalog.priced("ollama/q", tokens) == (0.0, "local")
    assert catalog.priced("c/odd", tokens) == (None, None)
    assert catalog.priced("c/other", tokens) == (None, None) and catalog.priced(None, tokens) == (None, None)


@given(models=st.dictionaries(st.text(max_size=12), JSON, max_size=6), ref=st.text(max_size=12),
       counts=st.tuples(*(st.integers(0, 10**9),) * 4))
def test_any_event_catalog_prices_a_turn_or_says_it_cannot(models: dict[str, Any], ref: str,
                                                          counts: tuple[int, int, int, int]) -> None:
    catalog = Catalog.of_event(models, {}, local_providers={"mine"})
    for name in [ref, *models]:
        cost, source = catalog.priced(name, Tokens(*counts))
        assert (cost is None) == (source is None)
        if cost is not None:
            assert source in PRICE_SOURCES and isinstance(cost, float)
            assert math.isfinite(cost) and cost >= 0  # never a negative or NaN figure


def test_usd_shows_fractions_of_a_cent() -> None:
    assert (usd(0.0), usd(1.23456), usd(0.0042)) == ("$0.0000", "$1.2346", "$0.004200")


def test_a_models_json_that_is_a_fifo_or_too_large_is_no_catalog_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "models.json"
    os.mkfifo(fifo)  # nobody writes: an unbounded read would wait for ever
    assert read_catalog(fifo).local_providers == set() and read_catalog(fifo).source is None
    big = tmp_path / "big.json"
    big.write_text('{"providers": {}, "pad": "' + "x" * (5 * 1024 * 1024) + '"}')
    assert read_catalog(big).source is None
