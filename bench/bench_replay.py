"""Replay speed: events/s of `router replay` over a corpus, against a pass that only parses it.

Run: python bench/bench_replay.py [--events 100000] [--jobs 1,2] [--policy FILE] [--sessions DIR] [--vary]

The corpus (examples/sessions) is copied, each copy a session file of its own id, into a scratch
directory until it holds at least --events rebuilt events. With `--vary` each copy's content differs
too: its prompt texts, tool call arguments and tool outputs end with the copy's number, so only the
events that repeat within a copy (or that read none of these) are decided from the decision memo.
Each pass reads that directory from the start, as `router replay DIR` does:

- parse only: read every session file and `json.loads` every line;
- replay with N jobs (`router replay --jobs N`): read and parse the files, rebuild the events,
  normalize and evaluate them (signals from their fallbacks: no decision log), carry the state,
  tools and model, total the cost. The policy is compiled before the clock starts.

Printed per pass: wall time, CPU time (this process and its workers), events/s by wall time and
per core (by CPU time), and the ratio of its wall time to the parse-only pass's. The totals of
every replay pass are checked to be the same. Default policy: the three packs
(`use: [decision, deepseek, cuttle]`). `--bare` also times a bare loop of
`router.engine.interpreter.evaluate` over the evaluated events. `--memo` also times the runner
alone (the sessions already read) without and with its signal memo (router/engine/signal_memo.py),
three alternating passes each, and prints the best CPU time of each and their ratio; the decision
records of both are checked to be the same. `--answers` also times the runner (memo on) deciding
each event as the live executor does, evaluating again after each external signal it asks for
(`_Session._decide_stepwise`), against answering the signals where they are read (`_decide`),
three alternating passes each; the best CPU time of each, their ratio, and the records checked.
`--decisions` also times the runner alone without and with its decision memo
(router/engine/decision_memo.py; the signal memo on in both), the same way, with the memo's hits.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.compile.compiler import compile_files  # noqa: E402
from router.compile.ir import CompiledPolicy  # noqa: E402
from router.engine.decision import SignalOutcome  # noqa: E402
from router.engine.interpreter import evaluate  # noqa: E402
from router.load.prices import read_catalog  # noqa: E402
from router.replay import runner  # noqa: E402
from router.replay.runner import Replayer  # noqa: E402
from router.replay.session_file import read_session, session_paths  # noqa: E402
from router.replay.sources import gather, replay_all  # noqa: E402
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


def write_corpus(source: Path, target: Path, policy: CompiledPolicy, events: int, *,
                 vary: bool = False) -> int:
    """Copies of the session files of `source` (each with a new id; with `vary`, prompts, tool
    arguments and outputs marked with the copy's number) in `target` until they rebuild to `events`
    events; the number of copies of the corpus written."""
    files = list(session_paths([source]))
    probe = Replayer(policy, read_catalog(source / "models.json"))
    per_round = sum(probe.run(read_session(p)).events for p in files)
    rounds = -(-events // per_round)
    texts = [p.read_text().splitlines() for p in files]
    for n in range(rounds):
        for path, lines in zip(files, texts, strict=True):
            text = "".join(_renamed(line, n, vary) + "\n" for line in lines)
            (target / f"{path.stem}-{n:05d}.jsonl").write_text(text)
    shutil.copy(source / "models.json", target / "models.json")
    return rounds


def _renamed(line: str, n: int, vary: bool = False) -> str:
    entry = json.loads(line) if line.strip() else None
    if isinstance(entry, dict) and entry.get("type") == "session":
        return json.dumps({**entry, "id": f"{entry.get('id')}-{n:05d}"})
    if vary and isinstance(entry, dict) and entry.get("type") == "message":
        return json.dumps({**entry, "message": _varied(entry.get("message"), f" #{n}")})
    return line


def _varied(message: Any, mark: str) -> Any:
    """A user prompt's, a tool call's and a tool result's text with `mark` appended."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    role = message.get("role")
    parts = []
    for part in message["content"]:
        if isinstance(part, dict) and part.get("type") == "text" and role in ("user", "toolResult"):
            part = {**part, "text": f"{part.get('text')}{mark}"}
        elif isinstance(part, dict) and part.get("type") == "toolCall" \
                and isinstance(part.get("arguments"), dict):
            part = {**part, "arguments": {k: f"{v}{mark}" if isinstance(v, str) else v
                                          for k, v in part["arguments"].items()}}
        parts.append(part)
    return {**message, "content": parts}


def cpu() -> float:
    """CPU seconds of this process and of its children that ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    start_cpu, start = cpu(), time.perf_counter()
    result = work()
    return time.perf_counter() - start, cpu() - start_cpu, result


def parse_only(directory: Path) -> int:
    lines = 0
    for path in session_paths([directory]):
        for line in path.read_text().split("\n"):
            if line.strip():
                json.loads(line)
                lines += 1
    return lines


def replay(policy: CompiledPolicy, directory: Path, jobs: int) -> dict[str, Any]:
    inputs = gather([directory], log=directory / "nolog", agent=directory / "agent")
    runs = replay_all(policy, inputs, progress=False, jobs=jobs)
    assert not any(r.error for r in runs), [r.error for r in runs if r.error][:3]
    return summarize(runs, inputs.catalog, inputs.catalog.priciest()).to_dict()


def bare_loop(policy: CompiledPolicy, directory: Path) -> tuple[float, int]:
    """Seconds of a bare `evaluate` loop over the events the replay evaluates, and their number."""
    seen: list[dict[str, Any]] = []
    original = runner._Session._decide

    def spy(self: Any, event: dict[str, Any], record: Any) -> Any:
        seen.append({"event": event, "state": self.world.state})
        return original(self, event, record)

    runner._Session._decide = spy  # type: ignore[method-assign]
    try:
        replay(policy, directory, 1)
    finally:
        runner._Session._decide = original  # type: ignore[method-assign]
    start = time.perf_counter()
    for item in seen:
        outcomes: dict[str, SignalOutcome] = {}
        while (decision := evaluate(policy, item["event"], state=item["state"], outcomes=outcomes)).pending:
            outcomes[decision.pending.name] = SignalOutcome(error="not recorded")
    return time.perf_counter() - start, len(seen)


def memo_passes(policy: CompiledPolicy, directory: Path, option: str,
                rounds: int = 3) -> tuple[dict[bool, list[float]], tuple[int, int]]:
    """CPU seconds of `Replayer.run` over the corpus's sessions with the Replayer's `option` (`memo`:
    the signal memo, `decision_memo`) off and on, alternating, the records checked to be the same;
    with the decision memo's (hits, misses) of the last pass that had it."""
    sessions = [read_session(p) for p in session_paths([directory])]
    seconds: dict[bool, list[float]] = {False: [], True: []}
    records: dict[bool, list[Any]] = {}
    counts = (0, 0)
    for _ in range(rounds):
        for on in (False, True):
            replayer = Replayer(policy, read_catalog(directory / "models.json"), **{option: on})
            start = time.process_time()
            runs = [replayer.run(s) for s in sessions]
            seconds[on].append(time.process_time() - start)
            records[on] = [json.dumps({k: v for k, v in r.items() if k != "latency_ms"}) for run in runs
                           for r in run.records]
            if replayer.decision_memo is not None:
                counts = (replayer.decision_memo.hits, replayer.decision_memo.misses)
    assert records[False] == records[True], f"{option} changed a decision record"
    return seconds, counts


def answer_passes(policy: CompiledPolicy, directory: Path, rounds: int = 3) -> dict[bool, list[float]]:
    """CPU seconds of `Replayer.run` over the corpus's sessions, deciding stepwise (False) and with
    the signals answered where they are read (True), alternating."""
    sessions = [read_session(p) for p in session_paths([directory])]
    seconds: dict[bool, list[float]] = {False: [], True: []}
    records: dict[bool, list[Any]] = {}
    answered = runner._Session._decide
    try:
        for _ in range(rounds):
            for answers in (False, True):
                runner._Session._decide = answered if answers else runner._Session._decide_stepwise  # type: ignore[method-assign]
                replayer = Replayer(policy, read_catalog(directory / "models.json"))
                start = time.process_time()
                runs = [replayer.run(s) for s in sessions]
                seconds[answers].append(time.process_time() - start)
                records[answers] = [{k: v for k, v in r.items() if k != "latency_ms"} for run in runs
                                    for r in run.records]
    finally:
        runner._Session._decide = answered  # type: ignore[method-assign]
    assert records[False] == records[True], "answering signals where they are read changed a decision"
    return seconds


def print_pair(passes: dict[bool, list[float]], events: int, off: str, on: str, ratio: str) -> None:
    """The CPU times of the runner's alternating passes without (False) and with (True) a change,
    the best of each in events per CPU second, and the ratio of the two best."""
    best = {flag: min(times) for flag, times in passes.items()}
    for flag, times in passes.items():
        print(f"runner alone, {on if flag else off}: CPU s {', '.join(f'{t:.3f}' for t in times)}; "
              f"best {events / best[flag]:,.0f} events per CPU second")
    print(f"ratio of the best CPU times, {ratio}: {best[False] / best[True]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--jobs", default="1,2", help="comma-separated job counts, one pass each")
    parser.add_argument("--policy", type=Path, default=None)
    parser.add_argument("--sessions", type=Path, default=ROOT / "examples" / "sessions")
    parser.add_argument("--bare", action="store_true", help="also time a bare interpreter loop")
    parser.add_argument("--memo", action="store_true",
                        help="also time the runner without and with its signal memo")
    parser.add_argument("--vary", action="store_true",
                        help="mark each copy's prompts, tool arguments and outputs with its number")
    parser.add_argument("--decisions", action="store_true",
                        help="also time the runner without and with its decision memo")
    parser.add_argument("--answers", action="store_true",
                        help="also time the runner deciding stepwise and with signals answered as read")
    args = parser.parse_args()
    policy = load_policy(args.policy)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as scratch:
        directory = Path(scratch)
        rounds = write_corpus(args.sessions, directory, policy, args.events, vary=args.vary)
        parse_s, parse_cpu, lines = timed(lambda: parse_only(directory))
        marked = ", each copy's prompts, tool arguments and outputs marked" if args.vary else ""
        print(f"policy: {args.policy or 'use: [decision, deepseek, cuttle]'}; corpus: {args.sessions} "
              f"x {rounds}{marked}")
        print(f"parse only (json.loads of every line): {lines} lines in {parse_s:.3f} s "
              f"({parse_cpu:.3f} s CPU)")
        totals: dict[str, Any] | None = None
        for jobs in (int(j) for j in args.jobs.split(",")):
            wall, used, total = timed(lambda jobs=jobs: replay(policy, directory, jobs))  # type: ignore[misc]
            assert totals is None or total == totals, "a replay with more jobs gave other totals"
            totals = total
            events = total["events"]
            print(f"replay, {jobs} job{'s' if jobs > 1 else ''}: {events} events "
                  f"({total['decisions']} evaluated, {total['sessions']} sessions) in {wall:.3f} s "
                  f"({used:.3f} s CPU) = {events / wall:,.0f} events/s, {events / used:,.0f} per CPU "
                  f"second; ratio to parse only {wall / parse_s:.1f}")
        events = totals["events"] if totals else 0
        if args.memo:
            print_pair(memo_passes(policy, directory, "memo")[0], events, "signal memo off", "signal memo on",
                       "memo off / on")
        if args.decisions:
            passes, (hits, misses) = memo_passes(policy, directory, "decision_memo")
            print_pair(passes, events, "decision memo off", "decision memo on", "memo off / on")
            print(f"decision memo: {hits} events decided from it, {misses} evaluated and kept")
        if args.answers:
            print_pair(answer_passes(policy, directory), events, "stepwise", "signals answered as read",
                       "stepwise / answered")
        if args.bare:
            bare_s, evaluated = bare_loop(policy, directory)
            print(f"bare interpreter loop: {evaluated} evaluations in {bare_s:.3f} s = "
                  f"{evaluated / bare_s:,.0f} evaluations/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
