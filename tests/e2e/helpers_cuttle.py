"""Shared setup for the `cuttle` pack's end-to-end tests (test_pack_cuttle*.py).

The fake provider plays every part: the local and cloud chat models (provider ``fake``) and the
llama.cpp server whose ``chat-small`` model is the classifier (Pi's own llama-cpp-classify path:
/tokenize, /apply-template, /completion). Label probabilities are scripted per question.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.e2e.fake_chat import Reply
from tests.e2e.helpers_router import RouterRig
from tests.e2e.pi_harness import make_agent_dir, model_entry
from tests.e2e.pi_rpc import RpcPi

JsonDict = dict[str, Any]

CLASSIFIER = "llama.cpp/chat-small"
SMALL = "fake/local-small"  # 8k: capacity 0.25 of the largest local window
BIG = "fake/local-big"  # 32k: capacity 1.0
PRICEY = "fake/cloud-pricey"  # 200k, $3 / $15: capacity 1.0
CHEAP = "fake/cloud-cheap"  # 160k, $1 / $2: capacity 0.8
COMPLEXITY = "standard or complex"  # a substring of the complexity question's instructions
STRUGGLE = "likely to cause the model to struggle"
JUDGE = "satisfy the request"
DELEGATE = "delegated to a subagent"
ROLE = "What role should this turn play"
REASONING = {"supportsReasoningEffort": True, "thinkingFormat": "openai"}


def cuttle_models() -> list[JsonDict]:
    """Two local models (free) and two cloud models (priced, reasoning)."""

    def cost(i: float, o: float) -> dict[str, float]:
        return {"input": i, "output": o, "cacheRead": 0, "cacheWrite": 0}

    return [
        model_entry("local-small", 8000),
        model_entry("local-big", 32000),
        model_entry("cloud-pricey", 200000, reasoning=True, compat=REASONING, cost=cost(3, 15)),
        model_entry("cloud-cheap", 160000, reasoning=True, compat=REASONING, cost=cost(1, 2)),
    ]


def base_config(**overrides: Any) -> JsonDict:
    """A pi-cuttle.json: the llama.cpp classifier, both catalogs, keys of ``overrides`` on top."""
    config: JsonDict = {
        "classifier": {"model": CLASSIFIER, "fallback": "heuristic", "timeoutMs": 3000},
        "catalog": {"local": [SMALL, BIG], "cloud": [PRICEY, CHEAP]},
        "policy": {"mode": "complexity", "threshold": 0.5, "reclassify": "session"},
    }
    config.update(overrides)
    return config


def setup_cuttle(
    rig: RouterRig,
    config: JsonDict | None = None,
    *,
    retry: JsonDict | None = None,
    policy: str = "use: [cuttle]\n",
    models: list[JsonDict] | None = None,
) -> Path:
    """Write models, llama.cpp credential, settings, policy and pi-cuttle.json; return the debug log.

    ``rig.env`` gets ``PI_CUTTLE_DEBUG``. ``retry`` replaces the rig's ``{"enabled": False}``;
    ``models`` replaces cuttle_models().
    """
    make_agent_dir(
        rig.tmp,
        rig.fake,
        models=models if models is not None else cuttle_models(),
        settings={"retry": retry or {"enabled": False}},
        llama_cpp=True,
    )
    rig.policy(policy)
    if config is not None:
        write_config(rig, config)
    debug = rig.tmp / "cuttle-debug.log"
    rig.env["PI_CUTTLE_DEBUG"] = str(debug)
    return debug


def write_config(rig: RouterRig, config: JsonDict) -> Path:
    path = rig.agent / "pi-cuttle.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def read_config(rig: RouterRig) -> JsonDict:
    return json.loads((rig.agent / "pi-cuttle.json").read_text())


def p_complex(rig: RouterRig, p: float) -> None:
    """Script the classifier's p(complex)."""
    rig.fake.llama.probs[COMPLEXITY] = {"complex": p, "standard": round(1 - p, 6)}


def classifier_calls(rig: RouterRig) -> int:
    """How many classify forward passes the fake llama.cpp server answered."""
    return len(rig.fake.requests("/completion"))


def debug_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def route_lines(path: Path) -> list[str]:
    return [line for line in debug_lines(path) if line.startswith("route result ")]


def chat_models(rig: RouterRig) -> list[str]:
    return [c.model for c in rig.fake.chat_requests()]


def cuttle(rig: RouterRig, *args: str, **kwargs: Any) -> RpcPi:
    """An RPC Pi with the bridge, offline (no background refresh of every provider)."""
    return rig.rpc("--offline", *args, **kwargs)


class Concurrency:
    """A Script fn that tracks in-flight chat requests. The first is held until ``release`` is set;
    ``hold_s`` is only an upper bound (``held_too_long`` tells it ran out)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.seen = 0
        self.first = threading.Event()
        self.second = threading.Event()
        self.release = threading.Event()
        self.held_too_long = False

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.now += 1
            self.seen += 1
            self.peak = max(self.peak, self.now)
            number = self.seen
        if number == 1:
            self.first.set()
            self.held_too_long = not self.release.wait(self.hold_s)
        else:
            self.second.set()
        with self.lock:
            self.now -= 1
        return Reply(text="done")
