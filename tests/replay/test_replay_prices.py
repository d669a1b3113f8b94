"""Pricing as the replay uses it (router/load/prices.py): each turn's price and its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.load.prices import Catalog, Tokens, read_catalog
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


def test_a_policys_price_comes_first_then_its_local_then_the_registry(tmp_path: Path) -> None:
    models = catalog(tmp_path)
    models.declare({"cloud/big": {"input": 1.0, "output": 5.0, "local": False},  # beats the registry
                    "cloud/free-tier": {"local": True},  # declared local: free, though not on loopback
                    "home/priced": {"local": True},  # declared local beats the registry's price
                    "home/small": {"input": 0.5, "local": True},  # a local model the policy prices
                    "mine/new": {"output": 10.0, "local": False}})  # a model the registry lacks
    expected = {"cloud/big": ("policy", 0.0015, "cloud"), "cloud/free-tier": ("local", 0.0, "local"),
                "home/priced": ("local", 0.0, "local"), "home/small": ("policy", 0.0005, "local"),
                "mine/new": ("policy", 0.001, "cloud")}
    for ref, (source, cost, tier) in expected.items():
        assert (models.price_source(ref), models.cost(ref, TOKENS), models.tier(ref)) == \
            (source, pytest.approx(cost), tier), ref
    assert models.priciest() == "mine/new"  # cloud models only: a priced local one is no baseline
    assert models.copy().declared == models.declared


def test_money_names_the_policy_as_a_source() -> None:
    money = Money()
    for value, source in ((0.01, "policy"), (0.0, "local"), (0.02, "registry")):
        money.add(value, source)
    assert money.to_dict()["priced_by"] == {"local": 1, "policy": 1, "registry": 1}
    assert money.text() == "$0.0300 [1 local (free), 1 policy, 1 registry]"
    policy_only = Money()
    policy_only.add(0.5, "policy")
    assert policy_only.text() == "$0.5000 [1 policy]"
