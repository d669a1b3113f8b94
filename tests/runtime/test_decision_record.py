"""The cost of a live turn in its decision record: priced as `router replay` prices it (the
policy's `provides.prices`, a local model free, the registry's price), with where the price came
from; a model without a price gets no cost (router/runtime/decision_record.py, router/load/prices.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.engine.decision import Decision
from router.load.prices import Catalog, Tokens
from router.runtime.decision_log import LogSettings
from router.runtime.decision_record import build_record, turn_price

POLICY = """\
version: 1
rules:
  - {id: r, on: turn_end, do: [{notify: done}]}
provides:
  prices:
    team/priced: {input: 2, output: 8}          # a model the registry does not price
    fake/cloud: {input: 1, output: 1}           # the policy's price wins over the registry's
    box/qwen: {local: true}                      # served from this machine: free
"""
USAGE = {"input": 1_000_000, "output": 500_000, "cache_read": 0, "cache_write": 0, "cost": 0.42}
MODELS = {
    "fake/cloud": {"provider": "fake", "id": "cloud", "cost": {"input": 3.0, "output": 15.0,
                                                              "cache_read": None, "cache_write": None}},
    "fake/other": {"provider": "fake", "id": "other", "cost": {"input": 3.0, "output": 15.0,
                                                              "cache_read": 0.3, "cache_write": None}},
    "fake/free": {"provider": "fake", "id": "free", "cost": None},  # Pi's all-zero prices
    "ollama/llama3": {"provider": "ollama", "id": "llama3", "cost": None},
}


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> CompiledPolicy:
    path = tmp_path_factory.mktemp("p") / "router.yaml"
    path.write_text(POLICY)
    found, diagnostics = compile_files([("user", path)])[:2]
    assert found is not None, diagnostics
    return found


def record(policy: CompiledPolicy, answered_by: str, usage: dict[str, Any] | None = USAGE,
           prices: Catalog | None = None) -> dict[str, Any]:
    event = {"type": "turn_end", "model": {"ref": "auto/router"}, "answered_by": answered_by,
             "models": MODELS, **({"message_usage": usage} if usage is not None else {})}
    return build_record(policy=policy, event=event, decision=Decision("turn_end", fired=("r",)),
                        session="s", seq=0, latency_ms=1.0, policy_hash="sha256:x",
                        settings=LogSettings(), secrets={}, key=b"k" * 32, prices=prices)


@pytest.mark.parametrize(("model", "cost", "source"), [
    ("fake/other", 3.0 + 7.5, "registry"),  # the registry's price, not Pi's own figure (0.42)
    ("fake/cloud", 1.0 + 0.5, "policy"),  # the policy's price before the registry's
    ("team/priced", 2.0 + 4.0, "policy"),  # a model only the policy prices
    ("box/qwen", 0.0, "local"),  # declared local by the policy: free
    ("ollama/llama3", 0.0, "local"),  # a provider Pi runs locally: free unless priced
])
def test_a_turn_is_priced_from_its_source_and_says_which(policy: CompiledPolicy, model: str, cost: float,
                                                         source: str) -> None:
    found = record(policy, model)
    assert found["model"] == model
    assert found["cost"] == pytest.approx(cost) and found["price_source"] == source


def test_a_model_without_a_price_gets_no_cost_and_no_invented_number(policy: CompiledPolicy) -> None:
    found = record(policy, "fake/free")  # Pi recorded 0.42, but the model has no price
    assert "cost" not in found and "price_source" not in found
    assert found["tokens"] == {"input": 1_000_000, "output": 500_000, "cache_read": 0, "cache_write": 0}
    unknown = record(policy, "elsewhere/model")  # not even in the catalog
    assert "cost" not in unknown and "price_source" not in unknown
    assert "cost" not in record(policy, "fake/other", usage=None)  # no usage: not a turn's record


def test_a_loopback_provider_of_models_json_is_local(policy: CompiledPolicy) -> None:
    catalog = Catalog.of_event({**MODELS, "mine/m": {"provider": "mine", "id": "m", "cost": None}},
                               policy.prices, local_providers={"mine"})
    found = record(policy, "mine/m", prices=catalog)
    assert (found["cost"], found["price_source"]) == (0.0, "local")
    assert "cost" not in record(policy, "mine/m")  # without models.json's word it has no price


def test_live_and_replay_price_a_turn_alike(policy: CompiledPolicy, tmp_path: Path) -> None:
    """The catalog replay reads from models.json and the one of a live event price every model the
    same, from the same source."""
    import json

    from router.load.prices import read_catalog

    (tmp_path / "models.json").write_text(json.dumps({"providers": {
        "fake": {"baseUrl": "https://api.example.invalid/v1", "models": [
            {"id": "cloud", "cost": {"input": 3.0, "output": 15.0}},
            {"id": "other", "cost": {"input": 3.0, "output": 15.0, "cacheRead": 0.3}},
            {"id": "free", "cost": {"input": 0, "output": 0}}]},
        "ollama": {"baseUrl": "http://127.0.0.1:11434/v1", "models": [{"id": "llama3"}]}}}))
    replay = read_catalog(tmp_path / "models.json")
    replay.declare(policy.prices)
    tokens = Tokens(input=1_000_000, output=500_000)
    for model in [*MODELS, "team/priced", "box/qwen", "elsewhere/model"]:
        live = turn_price({"message_usage": USAGE, "answered_by": model, "models": MODELS}, policy)
        assert live == replay.priced(model, tokens), model
