"""What a turn costs, one pricing for the live decision record, OpenTelemetry and `router replay`:
the models known (Pi's registry as an event carries it, or Pi's models.json) and their prices.

Prices are USD per million tokens, as Pi's models.json gives them. Every turn's price has a
source (PRICE_SOURCES), first found first: a policy's `provides.prices` (`policy`); the policy
declaring the model `local: true` (`local`: free); the registry's price (`registry`); the model
being served from the user's own machine (its provider's base URL on loopback, or a provider Pi
runs locally such as llama.cpp: `local`, free). A cloud model without a price (none given, or
all zeros, which is how Pi reports a missing price) has an unknown cost: estimates count such
turns apart and never add them as 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from router.events.normalize import model_catalog

LOCAL_PROVIDERS = frozenset({"llama.cpp", "ollama", "lmstudio", "local"})
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
PRICE_SOURCES = ("policy", "local", "registry")  # where a turn's price comes from, as figures name them
TOKEN_PRICES = (("input", "input"), ("output", "output"), ("cacheRead", "cache_read"),
                ("cacheWrite", "cache_write"))


@dataclass(frozen=True)
class Tokens:
    """The tokens of one assistant message (Pi's `usage`)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @staticmethod
    def of(usage: Any) -> Tokens:
        usage = usage if isinstance(usage, Mapping) else {}
        return Tokens(*(_count(usage.get(k)) for k, _ in TOKEN_PRICES))

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass
class Catalog:
    """Models by ref: Pi's raw model objects (for event contexts) and their normalized form."""

    raw: dict[str, dict[str, Any]] = field(default_factory=dict)
    local_providers: set[str] = field(default_factory=set)
    source: str | None = None  # the models.json read, if any
    declared: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # a policy's provides.prices

    @classmethod
    def of_event(cls, models: Any, prices: Mapping[str, Mapping[str, Any]] | None = None,
                 local_providers: Iterable[str] = ()) -> Catalog:
        """The catalog of a live event's `models` (normalized: `cost` with `cache_read`, `null`
        when Pi has no price), with a policy's `provides.prices` and the providers models.json
        serves from loopback (what the event does not say)."""
        raw: dict[str, dict[str, Any]] = {}
        for ref, model in (models.items() if isinstance(models, Mapping) else ()):
            if not isinstance(model, Mapping):
                continue
            given = model.get("cost")
            cost: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
            prices_of = {key: cost.get(name) for key, name in TOKEN_PRICES}
            raw[str(ref)] = {"provider": model.get("provider"), "id": model.get("id"),
                             "api": model.get("api"), "cost": prices_of}
        catalog = cls(raw, set(local_providers))
        catalog.declare(prices or {})
        return catalog

    def declare(self, prices: Mapping[str, Mapping[str, Any]]) -> None:
        """Take a policy's `provides.prices` (ref -> {input, output, cache_read, cache_write, local})."""
        self.declared.update(prices)

    def copy(self) -> Catalog:
        """A catalog that can take another policy's prices and virtual models."""
        return Catalog(dict(self.raw), set(self.local_providers), self.source, dict(self.declared))

    @property
    def normalized(self) -> dict[str, Any]:
        return model_catalog(list(self.raw.values()))

    def model(self, ref: str) -> dict[str, Any]:
        """Pi's raw model object for `ref` (provider and id only when the catalog lacks it)."""
        known = self.raw.get(ref)
        if known is not None:
            return known
        provider, _, model_id = ref.partition("/")
        return {"provider": provider, "id": model_id} if model_id else {"provider": "", "id": ref}

    def price(self, ref: str) -> dict[str, float] | None:
        """Prices per million tokens (the policy's, else the registry's), None when it has none."""
        return self._declared_price(ref) or (None if self._declared_local(ref) else self._registry_price(ref))

    def _declared_price(self, ref: str) -> dict[str, float] | None:
        declared = self.declared.get(ref) or {}
        prices = {key: float(declared[name]) for key, name in TOKEN_PRICES if declared.get(name) is not None}
        return prices or None

    def _declared_local(self, ref: str) -> bool:
        return bool((self.declared.get(ref) or {}).get("local"))

    def _registry_price(self, ref: str) -> dict[str, float] | None:
        cost = self.raw.get(ref, {}).get("cost")
        if not isinstance(cost, Mapping):
            return None
        prices = {key: float(cost[key]) for key, _ in TOKEN_PRICES if _price(cost.get(key))}
        return prices if any(prices.values()) else None

    def price_source(self, ref: str | None) -> str | None:
        """Where the price of `ref` comes from (PRICE_SOURCES), None when it has none."""
        if not ref:
            return None
        if self._declared_price(ref) is not None:
            return "policy"
        if self.price(ref) is not None:
            return "registry"
        return "local" if self.is_local(ref) else None

    def is_local(self, ref: str) -> bool:
        """Served from this machine: declared so by the policy, a provider on loopback, or one Pi
        runs locally."""
        provider = ref.partition("/")[0]
        return self._declared_local(ref) or provider in self.local_providers or provider in LOCAL_PROVIDERS

    def cost(self, ref: str | None, tokens: Tokens) -> float | None:
        """The estimated cost of `tokens` on `ref`: 0 on an unpriced local model, None when unknown."""
        prices = self.price(ref) if ref else None
        if prices is None:
            return 0.0 if ref and self.is_local(ref) else None
        return sum(float(getattr(tokens, attr)) * prices.get(key, 0.0) for key, attr in TOKEN_PRICES) / 1e6

    def priced(self, ref: str | None, tokens: Tokens) -> tuple[float | None, str | None]:
        """The cost of `tokens` on `ref` and where its price comes from (PRICE_SOURCES); (None,
        None) when the model should have a price and has none: never an invented number."""
        cost = self.cost(ref, tokens)
        return (cost, self.price_source(ref)) if cost is not None else (None, None)

    def tier(self, ref: str | None) -> str:
        """`local` (declared local by the policy, or a loopback or local provider the registry does
        not price), `cloud` (priced) or `unknown`."""
        source = self.price_source(ref)
        if source == "local" or (ref is not None and self._declared_local(ref)):
            return "local"
        return "cloud" if source is not None else "unknown"

    def priciest(self) -> str | None:
        """The priced cloud model with the highest input + output price (the default baseline)."""
        priced = [(sum((self.price(ref) or {}).get(k, 0.0) for k in ("input", "output")), ref)
                  for ref in {**self.raw, **self.declared} if self.tier(ref) == "cloud"]
        return max(priced)[1] if priced else None


def usd(value: float) -> str:
    """Dollars with 4 decimals, 6 below a cent (fake sessions cost fractions of a cent)."""
    return f"${value:.4f}" if abs(value) >= 0.01 or value == 0 else f"${value:.6f}"


def read_catalog(path: Path) -> Catalog:
    """Pi's models.json (`{providers: {name: {baseUrl, models: [...]}}}`); empty when absent or
    unreadable (prices then stay unknown). Read bounded, a regular file only: a FIFO or a device
    there cannot block the sidecar that prices live turns."""
    from router.diagnostics.errors import SourceError
    from router.load.file_reading import read_text

    try:
        data = json.loads(read_text(path))
    except (SourceError, OSError, ValueError):
        return Catalog()
    catalog = Catalog(source=str(path))
    providers = data.get("providers") if isinstance(data, dict) else None
    for name, provider in (providers.items() if isinstance(providers, dict) else ()):
        if not isinstance(provider, dict):
            continue
        if urlsplit(str(provider.get("baseUrl") or "")).hostname in LOOPBACK:
            catalog.local_providers.add(str(name))
        for model in provider.get("models") or []:
            if isinstance(model, dict) and isinstance(model.get("id"), str):
                catalog.raw[f"{name}/{model['id']}"] = {**model, "provider": str(name),
                                                        "api": model.get("api") or provider.get("api")}
    return catalog


def _price(value: Any) -> bool:
    """A price Pi could mean: a finite number ≥ 0 (a negative or `NaN` one is no price)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and value >= 0


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0
