"""Decision latency of the `decision` pack inside a real Pi 1.6.0 (figures printed, nothing asserted).

Run: python bench/bench_decision.py [--n 10] [--paths child,registry,fallback]

For each path a fresh `pi --mode rpc` with the bridge and a user policy `use: [decision]` runs one
prompt in which the scripted model calls `decision_request` (two questions) N + 1 times, one
call per assistant message; the first call is a warm-up and is dropped. Per call, the time from the
RPC event `tool_execution_start` to `tool_execution_end` (as the RPC client receives them) is the
decision latency: Pi -> bridge -> sidecar -> delegate -> validation -> audit -> tool result.

  child     PI_DECISION_ROUTER_VIA=child (default): a tool-less `pi --print ...` child process per
            decision, answered by the fake provider.
  registry  PI_DECISION_ROUTER_VIA=registry: the same prompt through Pi's model registry in-process
            (a `complete` request from the sidecar to the bridge), same fake provider.
  fallback  PI_DECISION_ROUTER_CHILD=0: no delegate at all (the fallback heuristic only), the floor
            of the bridge + sidecar + audit path.

The fake provider answers the delegate at once with a valid JSON answer, so the figures are the
router's and Pi's own cost, not a model's. Times are stamped when the RPC client reads the records;
Pi may write the two records of a very fast call in one burst, so sub-millisecond figures (the
fallback path) are at the resolution of that stream.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.fake_chat import content_text  # noqa: E402
from tests.e2e.fake_provider import FakeProvider, Reply  # noqa: E402
from tests.e2e.helpers_router import BRIDGE, router_env, write_policy  # noqa: E402
from tests.e2e.pi_harness import PI_VERSION, PiInstall, ensure_pi, make_agent_dir  # noqa: E402
from tests.e2e.pi_rpc import TimedRpc  # noqa: E402

DELEGATE_MARK = "You are the decision delegate"
QUESTIONS = {"questions": [
    {"id": "scope", "prompt": "Scope?",
     "options": [{"value": "full", "label": "Full"}, {"value": "mvp", "label": "MVP (Recommended)"}]},
    {"id": "db", "prompt": "Database?", "options": ["Postgres", "SQLite (default)"]}]}
PATHS = {
    "child": {"PI_DECISION_ROUTER_VIA": "child"},
    "registry": {"PI_DECISION_ROUTER_VIA": "registry"},
    "fallback": {"PI_DECISION_ROUTER_CHILD": "0"},
}


def provider_script(calls: int) -> Any:
    """Parent: `calls` decision_request calls, one per message, then "done"; delegate: a valid answer."""
    left = [calls]

    def answer(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if messages and DELEGATE_MARK in content_text(messages[0].get("content")):
            prompt = json.loads(content_text(messages[-1]["content"]))
            return Reply(text=json.dumps({"answers": [
                {"id": q["id"], "value": q["options"][0]["value"], "reason": "bench"}
                for q in prompt["questions"]]}))
        if left[0] > 0:
            left[0] -= 1
            return Reply(text="", tool_calls=[{"name": "decision_request", "arguments": QUESTIONS}])
        return Reply(text="done")

    return answer


def run_path(install: PiInstall, base: Path, name: str, n: int) -> tuple[list[float], list[str]]:
    """Per-decision latency (ms) of N decisions (after one warm-up) and the audit sources seen."""
    run_dir = base / name
    work = run_dir / "work"
    work.mkdir(parents=True)
    audit = run_dir / "audit.jsonl"
    with FakeProvider() as fake:
        fake.script.fn = provider_script(n + 1)
        agent = make_agent_dir(run_dir, fake, settings={"retry": {"enabled": False}})
        write_policy(agent / "router.yaml", "use: [decision]\n")
        env = router_env(agent, install, PI_DECISION_ROUTER_AUDIT_LOG=str(audit), **PATHS[name])
        rpc = TimedRpc(install, ["-e", str(BRIDGE), "--no-session"], cwd=work, env=env,
                       stderr_path=run_dir / "stderr", timeout=600)
        rpc.start()
        try:
            rpc.prompt_and_wait("make the routine decisions")
            starts = {r["toolCallId"]: r["_t"] for r in rpc.events(type_="tool_execution_start")}
            ends = [(r["toolCallId"], r["_t"]) for r in rpc.events(type_="tool_execution_end")]
        finally:
            rpc.close()
    if len(ends) != n + 1:
        raise RuntimeError(f"{name}: expected {n + 1} decisions, saw {len(ends)}")
    samples = [(end - starts[call_id]) * 1000 for call_id, end in ends][1:]
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    sources = sorted({a["source"] for r in records for a in r["answers"]})
    return samples, sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--n", type=int, default=10, help="decisions measured per path (after 1 warm-up)")
    parser.add_argument("--paths", default="child,registry,fallback",
                        help="comma-separated, of: " + ",".join(PATHS))
    args = parser.parse_args()
    install = ensure_pi()
    print(f"Pi {PI_VERSION} on {install.node}; python {sys.executable}")
    print(f"decision latency (tool_execution_start -> end), 2 questions per call, median of {args.n} "
          "after 1 warm-up")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-decision-") as tmp:
        for name in args.paths.split(","):
            samples, sources = run_path(install, Path(tmp), name, args.n)
            results[name] = samples
            ordered = sorted(samples)
            p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
            print(f"  {name:9s} median {statistics.median(samples):8.1f} ms   min {ordered[0]:8.1f}   "
                  f"p90 {p90:8.1f}   max {ordered[-1]:8.1f}   answers from: {', '.join(sources)}")
    if "child" in results and "registry" in results:
        child, registry = statistics.median(results["child"]), statistics.median(results["registry"])
        print(f"  registry saves {child - registry:+.1f} ms per decision (x{child / registry:.1f} faster)")


if __name__ == "__main__":
    main()
