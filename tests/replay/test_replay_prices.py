"""router.replay.prices: each turn's price and where it comes from (the registry, or being local)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.replay.prices import Catalog, Tokens, read_catalog
from router.replay.summary import Money

PRICED = {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0}
ZERO = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
TOKENS = Tokens(input=1000, output=100)


def catalog(tmp_path: Path) -> Catalog:
    def provider(url: str, *models: tuple[str, dict[str, int]]) -> dict[str, object]:
        return {"baseUrl": url, "models": [{"id": i, "cost": c} for i, c in models]}

    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": {
        "home": provider("http://127.0.0.1:8080/v1", ("small", ZERO), ("priced", PRICED)),
        "cloud": provider("https://api.example.org/v1", ("big", PRICED), ("free-tier", ZERO))}}))
    return read_catalog(path)


@pytest.mark.parametrize(("ref", "source", "cost", "tier"), [
    ("home/small", "local", 0.0, "local"),  # served from this machine, no price: free
    ("home/priced", "registry", 0.0045, "cloud"),  # a local model the registry prices keeps its price
    ("llama.cpp/kev", "local", 0.0, "local"),  # a provider Pi runs locally
    ("cloud/big", "registry", 0.0045, "cloud"),
    ("cloud/free-tier", None, None, "unknown"),  # a cloud model with all-zero prices: unknown, never 0
    ("nowhere/x", None, None, "unknown"),
])
def test_every_turn_is_priced_with_its_source(tmp_path: Path, ref: str, source: str | None,
                                              cost: float | None, tier: str) -> None:
    models = catalog(tmp_path)
    assert models.price_source(ref) == source
    found = models.cost(ref, TOKENS)
    assert found == cost if cost is None else found == pytest.approx(cost)
    assert models.tier(ref) == tier


def test_money_counts_turns_by_source_and_keeps_unknown_apart() -> None:
    money = Money()
    for value, source in ((0.0, "local"), (0.0, "local"), (0.25, "registry"), (None, None)):
        money.add(value, source)
    assert money.to_dict() == {"usd": 0.25, "turns": 3, "unknown_turns": 1,
                               "priced_by": {"local": 2, "registry": 1}}
    assert money.text() == "$0.2500 [2 local (free), 1 registry] (+ 1 turn at unknown prices)"
    registry_only = Money()
    registry_only.add(0.5)
    assert registry_only.text() == "$0.5000"
