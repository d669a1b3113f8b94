"""Bridge and sidecar costs inside and around a real Pi 1.6.0 (figures printed, nothing asserted).

Run: python bench/bench_bridge.py [--only a1,a2,b,c] [--calls 200] [--batch 10] [--events 2000]

(a1) tool_call overhead inside Pi: a scripted provider makes the model call `read` on a tiny
     file `--calls` times (`--batch` calls per assistant message). Per call, the time from the
     RPC event `tool_execution_start` to `tool_execution_end` (as the RPC client receives them)
     is compared across: no bridge, the bridge with a policy that has no tool_call rule (the
     event is not forwarded), and the bridge with 100 tool_call rules of which none matches.
(a2) sidecar round trip from Node 22 (the bridge's runtime), no Pi: spawn `python -m router
     serve`, say hello, then `--events` sequential `event` requests of type tool_call against the
     same 100-rule policy (and against a policy without tool_call rules: the protocol floor).
     Targets: p50 <= 0.3 ms, p99 <= 1 ms.
(b)  sidecar ready time: spawn -> hello answered, median of 10, for this interpreter's real path
     (sys.executable) and for the `python3` found on PATH (a pyenv shim here).
     Target: <= 150 ms.
(c)  added wall time per turn: `pi -p` with 3 prompts against the fake provider, with and
     without the bridge (default policy only), median of 5 after a warm-up each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.fake_provider import FakeProvider, Reply  # noqa: E402
from tests.e2e.helpers_router import BRIDGE, SERVE_ARGV, router_env, write_policy  # noqa: E402
from tests.e2e.pi_harness import PiInstall, ensure_pi, make_agent_dir, run_print  # noqa: E402
from tests.e2e.pi_rpc import RpcPi  # noqa: E402

RULES_100 = "rules:\n" + "".join(
    f"  - id: never-{i}\n    on: tool_call\n    match: \"tool.name == 'never-{i}'\"\n"
    f"    do:\n      - block: 'rule {i}'\n"
    for i in range(100)
)
NO_TOOL_CALL_RULES = "rules:\n  - {id: quiet, on: input, do: [{log: x}]}\n"

NODE_CLIENT = r"""
import { spawn } from "node:child_process";

const [mode, argvJson, cwd, agentDir, countText] = process.argv.slice(2);
const argv = JSON.parse(argvJson);
const count = Number(countText);

function connect() {
  const proc = spawn(argv[0], [...argv.slice(1), "--cwd", cwd, "--agent-dir", agentDir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const pending = new Map();
  let buffer = "";
  let nextId = 1;
  proc.stdout.on("data", (chunk) => {
    buffer += chunk.toString("utf8");
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      const done = pending.get(message.id);
      if (done) { pending.delete(message.id); done(message); }
    }
  });
  const call = (method, params) => new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    proc.stdin.write(JSON.stringify({ id, method, params }) + "\n");
  });
  const close = () => new Promise((resolve) => { proc.on("exit", resolve); proc.stdin.end(); });
  return { call, close };
}

const hello = { protocol: 1, cwd, trusted: false, mode: "rpc", hasUI: true, state: null,
  models: [{ provider: "fake", id: "fake-local", contextWindow: 32000, maxTokens: 4096, reasoning: false,
             input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }] };
const ctx = { cwd, mode: "rpc", hasUI: true, sessionId: "bench", sessionFile: null,
  model: hello.models[0], thinkingLevel: "off", activeTools: ["read", "bash", "edit", "write"],
  allTools: ["read", "bash", "edit", "write"], usage: { tokens: 1200, contextWindow: 32000, percent: 3.75 } };

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1],
           mean: sorted.reduce((a, b) => a + b, 0) / sorted.length };
}

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

if (mode === "ready") {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const side = connect();
    await side.call("hello", hello);
    samples.push(ms(start));
    await side.close();
  }
  console.log(JSON.stringify({ ...stats(samples), samples }));
} else {
  const side = connect();
  await side.call("hello", hello);
  const event = (i) => ({ type: "tool_call", ctx,
    payload: { toolName: "read", toolCallId: `call_${i}`, input: { path: "notes.txt" } } });
  for (let i = 0; i < 200; i++) await side.call("event", event(i));
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const answer = await side.call("event", event(i));
    samples.push(ms(start));
    if (answer.error) throw new Error(JSON.stringify(answer.error));
  }
  await side.close();
  console.log(JSON.stringify(stats(samples)));
}
"""


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fmt(values: dict[str, float], keys: tuple[str, ...] = ("p50", "p99", "max")) -> str:
    return "  ".join(f"{k} {values[k]:8.3f} ms" for k in keys)


class TimedRpc(RpcPi):
    """RpcPi that stamps each record with its arrival time (perf_counter, seconds)."""

    def _on_line(self, line: bytes) -> None:
        stamp = time.perf_counter()
        super()._on_line(line)
        with self._cond:
            self.records[-1]["_t"] = stamp


# -- (a1) ---------------------------------------------------------------------------------------


def tool_call_run(install: PiInstall, base: Path, label: str, policy: str | None, bridge: bool,
                  calls: int, batch: int) -> list[float]:
    """Per-call tool_execution_start -> end (ms) for one RPC run of `calls` read calls."""
    run_dir = base / label
    run_dir.mkdir()
    work = run_dir / "work"
    work.mkdir()
    (work / "tiny.txt").write_text("tiny\n")
    with FakeProvider() as fake:
        agent = make_agent_dir(run_dir, fake, settings={"retry": {"enabled": False}})
        if policy is not None:
            write_policy(agent / "router.yaml", policy)
        batches = [min(batch, calls - i) for i in range(0, calls, batch)]
        for size in batches:
            fake.script.push(Reply(text="", tool_calls=[
                {"name": "read", "arguments": {"path": "tiny.txt"}} for _ in range(size)]))
        fake.script.push(Reply(text="done"))
        args = (["-e", str(BRIDGE)] if bridge else []) + ["--no-session"]
        rpc = TimedRpc(install, args, cwd=work, env=router_env(agent, install),
                       stderr_path=run_dir / "stderr", timeout=300)
        rpc.start()
        try:
            rpc.prompt_and_wait("read the tiny file many times")
            starts = {r["toolCallId"]: r["_t"] for r in rpc.events(type_="tool_execution_start")}
            ends = {r["toolCallId"]: r["_t"] for r in rpc.events(type_="tool_execution_end")}
        finally:
            rpc.close()
    if len(ends) != calls:
        raise RuntimeError(f"{label}: expected {calls} tool calls, saw {len(ends)}")
    return [(ends[k] - starts[k]) * 1000 for k in ends]


def bench_a1(install: PiInstall, calls: int, batch: int) -> None:
    print(f"(a1) tool_execution_start -> tool_execution_end inside Pi, {calls} read calls, "
          f"{batch} per message")
    configs = [("no bridge", None, False), ("bridge, no tool_call rules", NO_TOOL_CALL_RULES, True),
               ("bridge, 100 tool_call rules", RULES_100, True)]
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-a1-") as tmp:
        for label, policy, bridge in configs:
            slug = label.replace(" ", "-").replace(",", "")
            results[label] = tool_call_run(install, Path(tmp), slug, policy, bridge, calls, batch)
    base = results["no bridge"]
    for label, samples in results.items():
        line = f"  {label:30s} p50 {pct(samples, 0.5):7.2f} ms  p99 {pct(samples, 0.99):7.2f} ms"
        if label != "no bridge":
            line += (f"   added: p50 {pct(samples, 0.5) - pct(base, 0.5):+7.2f} ms"
                     f"  p99 {pct(samples, 0.99) - pct(base, 0.99):+7.2f} ms")
        print(line)


# -- (a2), (b) ----------------------------------------------------------------------------------


def node_client(install: PiInstall, script: Path, mode: str, argv: list[str], agent: Path,
                count: int) -> dict[str, Any]:
    done = subprocess.run(
        [str(install.node), str(script), mode, json.dumps(argv), str(agent.parent), str(agent),
         str(count)],
        capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"node client failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_a2_b(install: PiInstall, events: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-a2-") as tmp:
        base = Path(tmp)
        script = base / "client.mjs"
        script.write_text(NODE_CLIENT)
        rich = base / "rich" / "agent"
        write_policy(rich / "router.yaml", RULES_100)
        floor = base / "floor" / "agent"
        write_policy(floor / "router.yaml", NO_TOOL_CALL_RULES)

        print(f"(a2) sidecar round trip from Node 22, {events} sequential tool_call events "
              "(after 200 warm-up); targets p50 <= 0.3 ms, p99 <= 1 ms")
        for label, agent in (("100 tool_call rules, none match", rich),
                             ("no tool_call rules (floor)", floor)):
            print(f"  {label:34s} {fmt(node_client(install, script, 'roundtrip', SERVE_ARGV, agent, events))}")

        print("(b)  sidecar ready time: spawn -> hello answered, 10 spawns (100-rule policy); "
              "target <= 150 ms")
        shim = shutil.which("python3")
        variants = [("sys.executable", [sys.executable, "-m", "router", "serve"])]
        if shim:
            variants.append((f"python3 on PATH ({shim})", [shim, "-m", "router", "serve"]))
        router_cli = shutil.which("router")
        if router_cli:
            variants.append((f"router console script ({router_cli})", [router_cli, "serve"]))
        for label, argv in variants:
            result = node_client(install, script, "ready", argv, rich, 10)
            print(f"  {label:60s} median {statistics.median(result['samples']):7.1f} ms  "
                  f"min {min(result['samples']):7.1f}  max {max(result['samples']):7.1f}")


# -- (c) ----------------------------------------------------------------------------------------


def bench_c(install: PiInstall, repeat: int) -> None:
    prompts = ["first prompt", "second prompt", "third prompt"]
    with tempfile.TemporaryDirectory(prefix="bench-c-") as tmp, FakeProvider() as fake:
        base = Path(tmp)
        agent = make_agent_dir(base, fake, settings={"retry": {"enabled": False}})
        work = base / "work"
        work.mkdir()
        env = router_env(agent, install)
        times: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(repeat + 1):
            for bridge in (False, True):
                args = (["-e", str(BRIDGE)] if bridge else []) + ["--no-session", *prompts]
                started = time.perf_counter()
                done = run_print(args, cwd=work, env=env, install=install, timeout=120)
                elapsed = (time.perf_counter() - started) * 1000
                if done.returncode != 0:
                    raise RuntimeError(done.stderr[-2000:])
                if round_ > 0:  # round 0 warms caches (jiti, Python bytecode)
                    times[bridge].append(elapsed)
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(f"(c)  pi -p with 3 prompts (fake provider), median of {repeat}")
    print(f"  without the bridge {without:8.1f} ms   with the bridge (default policy) {with_:8.1f} ms")
    print(f"  added {with_ - without:+8.1f} ms per run ({(with_ - without) / 3:+.1f} ms per turn), "
          f"ratio {with_ / without:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--only", default="a1,a2,b,c", help="comma-separated parts to run")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    parts = set(args.only.split(","))
    install = ensure_pi()
    print(f"Pi {install.cli.parent.parent.parent.name} on {install.node}; python {sys.executable}")
    if "a1" in parts:
        bench_a1(install, args.calls, args.batch)
    if parts & {"a2", "b"}:
        bench_a2_b(install, args.events)
    if "c" in parts:
        bench_c(install, args.repeat)


if __name__ == "__main__":
    main()
