"""Replay speed: events/s of `router replay` on the session corpus, against a bare interpreter loop.

Run: python bench/bench_replay.py [--events 10000] [--policy FILE] [--sessions DIR]

The corpus (examples/sessions) is repeated until it holds at least --events rebuilt events
(each copy a session of its own id). The replay is timed end to end on the parsed sessions:
rebuilding the events, normalizing them, evaluating the policy (signals from their fallbacks:
no decision log), carrying the state, tools and model, and the totals. The baseline runs the
same normalized events (those the policy has rules for) through a bare loop of
`router.interpreter.evaluate`, failing pending signals as the replay does. Default policy: the
three packs (`use: [decision, deepseek, cuttle]`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.compile.compiler import compile_files  # noqa: E402
from router.compile.ir import CompiledPolicy  # noqa: E402
from router.engine.decision import SignalOutcome  # noqa: E402
from router.engine.interpreter import evaluate  # noqa: E402
from router.replay import runner  # noqa: E402
from router.replay.prices import read_catalog  # noqa: E402
from router.replay.runner import Replayer  # noqa: E402
from router.replay.session_file import SessionFile, read_session, session_paths  # noqa: E402
from router.replay.summary import summarize  # noqa: E402

PACKS = "version: 1\nuse: [decision, deepseek, cuttle]\n"


def load_policy(path: Path | None) -> CompiledPolicy:
    with tempfile.TemporaryDirectory() as scratch:
        target = path or Path(scratch) / "policy.yaml"
        if path is None:
            target.write_text(PACKS)
        policy, diagnostics = compile_files([("file", target)])
    assert policy is not None, diagnostics
    return policy


def corpus(directory: Path, policy: CompiledPolicy, events: int) -> list[SessionFile]:
    """The corpus's sessions, repeated (with fresh ids) until they rebuild to `events` events."""
    base = [read_session(p) for p in session_paths([directory])]
    probe = Replayer(policy, read_catalog(directory / "models.json"))
    per_round = sum(probe.run(s).events for s in base)
    rounds = -(-events // per_round)
    return [replace(s, id=f"{s.id}-{n}") for n in range(rounds) for s in base]


def timed_replay(policy: CompiledPolicy, sessions: list[SessionFile], models: Path) -> tuple[float, int, int]:
    catalog = read_catalog(models)
    start = time.perf_counter()
    replayer = Replayer(policy, catalog)
    runs = [replayer.run(s) for s in sessions]
    summarize(runs, catalog, catalog.priciest())
    elapsed = time.perf_counter() - start
    return elapsed, sum(r.events for r in runs), sum(r.decisions for r in runs)


def captured_events(policy: CompiledPolicy, sessions: list[SessionFile],
                    models: Path) -> list[dict[str, Any]]:
    """The normalized events the replay evaluates (with the state each saw)."""
    seen: list[dict[str, Any]] = []
    original = runner._Session._decide

    def spy(self: Any, event: dict[str, Any], record: Any) -> Any:
        seen.append({"event": event, "state": self.world.state})
        return original(self, event, record)

    runner._Session._decide = spy  # type: ignore[method-assign]
    try:
        replayer = Replayer(policy, read_catalog(models))
        for session in sessions:
            replayer.run(session)
    finally:
        runner._Session._decide = original  # type: ignore[method-assign]
    return seen


def timed_bare_loop(policy: CompiledPolicy, items: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    for item in items:
        outcomes: dict[str, SignalOutcome] = {}
        while True:
            decision = evaluate(policy, item["event"], state=item["state"], outcomes=outcomes)
            if decision.pending is None:
                break
            outcomes[decision.pending.name] = SignalOutcome(error="not recorded")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--policy", type=Path, default=None)
    parser.add_argument("--sessions", type=Path, default=ROOT / "examples" / "sessions")
    args = parser.parse_args()
    policy = load_policy(args.policy)
    models = args.sessions / "models.json"
    sessions = corpus(args.sessions, policy, args.events)
    replay_s, events, decisions = timed_replay(policy, sessions, models)
    bare_s = timed_bare_loop(policy, captured_events(policy, sessions, models))
    print(f"policy: {args.policy or 'use: [decision, deepseek, cuttle]'}; {len(sessions)} sessions")
    print(f"replay: {events} events ({decisions} evaluated) in {replay_s:.3f} s = "
          f"{events / replay_s:,.0f} events/s")
    print(f"bare interpreter loop: the {decisions} evaluated events in {bare_s:.3f} s = "
          f"{decisions / bare_s:,.0f} evaluations/s")
    print(f"ratio replay / bare loop: {replay_s / bare_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
