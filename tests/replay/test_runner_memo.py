"""router.replay.runner with and without its signal memo (router/engine/signal_memo.py) and its
decision memo (router/engine/decision_memo.py): the replay of examples/sessions, with their decision
logs and without, gives the same decisions (byte for byte), turns and totals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from router.compile.compiler import compile_files
from router.replay.runner import Replayer, SessionRun
from router.replay.sources import gather
from router.replay.summary import summarize

SESSIONS = Path(__file__).resolve().parents[2] / "examples" / "sessions"


def _replay(tmp_path: Path, *, memo: bool, decisions: bool | None = None,
            logged: bool = True) -> tuple[list[SessionRun], dict[str, Any], Replayer]:
    path = tmp_path / "packs.yaml"
    path.write_text("version: 1\nuse: [decision, deepseek, cuttle]\n")
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    inputs = gather([SESSIONS], log=tmp_path / "nolog", agent=tmp_path / "agent")  # the corpus's logs
    replayer = Replayer(policy, inputs.catalog, inputs.log if logged else None, memo=memo,
                        decision_memo=decisions)
    runs = [replayer.run(session) for session in inputs.sessions] * 2  # each session twice: from the memo
    runs += [replayer.run(session) for session in inputs.sessions]
    return runs, summarize(runs, inputs.catalog, inputs.catalog.priciest()).to_dict(), replayer


def _outcomes(run: SessionRun) -> dict[str, Any]:
    return {"turns": {n: (t.outcome(), t.fired, t.estimated_cost) for n, t in run.turns.items()},
            "records": [{k: v for k, v in r.items() if k != "latency_ms"} for r in run.records],
            "counts": (run.events, run.decisions, run.rules, run.shadow, run.signals, run.errors)}


def test_the_memo_changes_no_decision_turn_or_total(tmp_path: Path) -> None:
    plain, plain_totals, without = _replay(tmp_path, memo=False)
    memoized, totals, replayer = _replay(tmp_path, memo=True)
    assert without.signal_memo is None and replayer.signal_memo is not None
    assert replayer.signal_memo.hits > replayer.signal_memo.misses > 0
    assert plain_totals["decisions"] > 0 and plain_totals["sessions"] == 3 * 3
    assert [_outcomes(r) for r in memoized] == [_outcomes(r) for r in plain]
    assert totals == plain_totals


def _records(runs: list[SessionRun]) -> list[str]:
    """Every decision record as `router replay --json` writes it (the latency apart)."""
    return [json.dumps({k: v for k, v in r.items() if k != "latency_ms"})
            for run in runs for r in run.records]


def test_the_decision_memo_changes_no_record_byte_turn_or_total(tmp_path: Path) -> None:
    for logged in (True, False):
        plain, plain_totals, _ = _replay(tmp_path, memo=True, decisions=False, logged=logged)
        memoized, totals, replayer = _replay(tmp_path, memo=True, decisions=True, logged=logged)
        memo = replayer.decision_memo
        assert memo is not None and memo.hits > memo.misses > 0 and memo.unkeyed == 0
        assert _records(memoized) == _records(plain) and len(_records(plain)) > 100
        assert [_outcomes(r) for r in memoized] == [_outcomes(r) for r in plain]
        assert totals == plain_totals
        asked = memo.hits + memo.misses
        evaluated = sum(r.decisions for r in {id(r): r for r in memoized}.values())  # each run once
        # with the decision log, the events it has a record of are evaluated, never memoized
        assert (asked < evaluated) if logged else (asked == evaluated), (logged, asked, evaluated)
    _, _, without = _replay(tmp_path, memo=False)
    assert without.decision_memo is None  # memo=False: the reference, nothing remembered
