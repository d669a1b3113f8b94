"""Bridge and sidecar costs inside and around a real Pi 1.6.0 (figures printed, nothing asserted).

Run: python bench/bench_bridge.py [--only a1,a2,b,c,d] [--calls 200] [--batches 1,10] [--events 2000]
     [--repeat 5]

(a1) tool_call overhead inside Pi: a scripted provider makes the model call `read` on a tiny
     file `--calls` times (1 and 10 calls per assistant message by default). Per call, the time
     from the RPC event `tool_execution_start` to `tool_execution_end` (as the RPC client receives
     them; Pi's records carry no timestamps) is compared across: no bridge, the bridge with a
     policy that has no tool_call rule (the event is not forwarded), and the bridge with 100
     tool_call rules of which none matches. With 10 parallel calls per message a call's span also
     holds the tool_call hooks of its batch-mates (Pi runs them one after another), so the
     per-event cost is about the added time / 10; with 1 call per message it is the added time.
(a2) sidecar round trip from Node 22 (the bridge's runtime), no Pi: spawn `python -m router
     serve`, say hello, then `--events` sequential `event` requests of type tool_call against the
     same 100-rule policy (and against a policy without tool_call rules: the protocol floor).
     Targets: p50 <= 0.3 ms, p99 <= 1 ms.
(b)  sidecar ready time: spawn -> hello answered, median of 10 (the policy cached after the
     first), for this interpreter's real path (sys.executable) and for the `python3` found on
     PATH (a pyenv shim here); the sidecar's resident memory (VmRSS from /proc) after hello and
     after 200 events; `-X importtime` of a real `router serve` against an import budget, with
     the modules it should not load (pydantic, ruamel, typer, click, _ssl, asyncio).
     Targets: ready <= 60 ms, RSS <= 40 MB.
(c)  added wall time per turn: `pi -p` with 3 prompts against the fake provider, with and
     without the bridge (default policy only), median of --repeat after a warm-up each
     (interleaved); the same with 1 prompt separates the one-off start-up cost (sidecar spawn)
     from the per-turn cost; and 1 prompt with the declarations cache removed before each run
     (the bridge waits for the sidecar's hello, as before the cache); and 1 prompt with jiti's
     file cache off (JITI_FS_CACHE=false: a first run, CI, a private /tmp), which costs a .ts
     extension its transpile and the bridge's .mjs modules nothing. Target: ratio <= 1.03.
(d)  where that start-up time goes: `pi -p` with 1 prompt and stand-ins that each take one cost
     away (an empty extension, the bridge with no sidecar, an instant fake sidecar, the real one
     with no rule on an event of the run, the real one at nice 19), median of --repeat.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
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
from tests.e2e.pi_harness import PI_VERSION, PiInstall, ensure_pi, make_agent_dir, run_print  # noqa: E402
from tests.e2e.pi_rpc import TimedRpc  # noqa: E402

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


def bench_a1(install: PiInstall, calls: int, batches: list[int]) -> None:
    configs = [("no bridge", None, False), ("bridge, no tool_call rules", NO_TOOL_CALL_RULES, True),
               ("bridge, 100 tool_call rules", RULES_100, True)]
    for batch in batches:
        print(f"(a1) tool_execution_start -> tool_execution_end inside Pi, {calls} read calls, "
              f"{batch} per message")
        results: dict[str, list[float]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-a1-") as tmp:
            for label, policy, bridge in configs:
                slug = label.replace(" ", "-").replace(",", "")
                results[label] = tool_call_run(install, Path(tmp), slug, policy, bridge, calls, batch)
        base = results["no bridge"]
        for label, samples in results.items():
            line = f"  {label:30s} p50 {pct(samples, 0.5):7.2f} ms  p99 {pct(samples, 0.99):7.2f} ms"
            if label != "no bridge":
                added50 = pct(samples, 0.5) - pct(base, 0.5)
                added99 = pct(samples, 0.99) - pct(base, 0.99)
                line += (f"   added: p50 {added50:+7.2f} ms  p99 {added99:+7.2f} ms"
                         f"  (per event ~{added50 / batch:+.2f} ms)")
            print(line)


def python3_candidates() -> list[str]:
    """Each distinct `python3` on PATH (shims such as pyenv's included) that has the router."""
    found: list[str] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(entry or ".") / "python3"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)) or str(candidate) in found:
            continue
        probe = subprocess.run([str(candidate), "-c", "import router.commands.cli"], capture_output=True,
                               timeout=60, check=False, cwd="/")
        if probe.returncode == 0:
            found.append(str(candidate))
    return found[:3]


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


def bench_a2_b(install: PiInstall, events: int, parts: set[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-a2-") as tmp:
        base = Path(tmp)
        script = base / "client.mjs"
        script.write_text(NODE_CLIENT)
        rich = base / "rich" / "agent"
        write_policy(rich / "router.yaml", RULES_100)
        floor = base / "floor" / "agent"
        write_policy(floor / "router.yaml", NO_TOOL_CALL_RULES)
        unlogged = base / "unlogged" / "agent"
        write_policy(unlogged / "router.yaml", "decision_log: {enabled: false}\n" + RULES_100)

        if "a2" in parts:
            print(f"(a2) sidecar round trip from Node 22, {events} sequential tool_call events "
                  "(after 200 warm-up); targets p50 <= 0.3 ms, p99 <= 1 ms")
            for label, agent in (("100 tool_call rules, none match", rich),
                                 ("the same, decision log off", unlogged),
                                 ("no tool_call rules (floor)", floor)):
                result = node_client(install, script, "roundtrip", SERVE_ARGV, agent, events)
                print(f"  {label:34s} {fmt(result)}")
        if "b" not in parts:
            return

        print("(b)  sidecar ready time: spawn -> hello answered, 10 spawns (100-rule policy); "
              "target <= 60 ms")
        variants = [("sys.executable", [sys.executable, "-m", "router", "serve"])]
        for shim in python3_candidates():
            variants.append((f"python3 on PATH: {shim}", [shim, "-m", "router", "serve"]))
        router_cli = shutil.which("router")
        if router_cli:
            variants.append((f"router console script: {router_cli}", [router_cli, "serve"]))
        empty = base / "empty" / "agent"  # no user policy: the default pack only
        empty.mkdir(parents=True)
        runs = [(label, argv, rich) for label, argv in variants]
        runs.append(("sys.executable, default pack only (no router.yaml)", variants[0][1], empty))
        for label, argv, agent in runs:
            try:
                result = node_client(install, script, "ready", argv, agent, 10)
            except RuntimeError as exc:
                print(f"  {label:60s} skipped: {str(exc).strip().splitlines()[-1][:80]}")
                continue
            print(f"  {label:60s} median {statistics.median(result['samples']):7.1f} ms  "
                  f"min {min(result['samples']):7.1f}  max {max(result['samples']):7.1f}")
        warm_samples, warm_rss = warm_ready(rich, 10)
        print(f"  {'a sidecar forked by the warm sidecar (connect -> hello answered)':60s} median "
              f"{statistics.median(warm_samples):7.1f} ms  min {min(warm_samples):7.1f}  "
              f"max {max(warm_samples):7.1f}; the warm server's resident memory {warm_rss:.1f} MB")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import router.runtime.server"], check=True)
        print(f"  for scale: `{Path(sys.executable).name} -c 'import router.runtime.server'` alone took "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
        for label, agent in (("100-rule policy", rich), ("default pack only", empty)):
            after_hello, after_events = sidecar_rss(agent, events=200)
            print(f"  sidecar resident memory ({label}): {after_hello:.1f} MB after hello, "
                  f"{after_events:.1f} MB after 200 events; target <= 40 MB")
        import_budget(rich)


def warm_ready(agent: Path, count: int) -> tuple[list[float], float]:
    """Milliseconds from connecting to the warm sidecar to the forked sidecar's hello answer, for
    `count` connections (from Python, not Node), and the warm server's VmRSS (MB)."""
    directory = Path(tempfile.mkdtemp(prefix="bw-"))
    path = directory / "s.sock"
    server = subprocess.Popen([*SERVE_ARGV, "--warm", str(path)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    samples: list[float] = []
    try:
        lock = Path(f"{path}.lock")
        deadline = time.monotonic() + 30
        while not (path.exists() and lock.exists() and lock.read_text().strip() == str(server.pid)):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the warm sidecar did not start")
            time.sleep(0.01)
        request = {"warm": 1, "argv": ["--cwd", str(agent.parent), "--agent-dir", str(agent)],
                   "env": dict(os.environ), "cwd": str(agent)}
        hello = {"id": 1, "method": "hello", "params": {"protocol": 1, "cwd": str(agent.parent)}}
        for _ in range(count + 1):
            started = time.perf_counter()
            with socket.socket(socket.AF_UNIX) as client, client.makefile("rb") as reader:
                client.connect(str(path))
                client.sendall(json.dumps(request).encode() + b"\n")
                assert json.loads(reader.readline())["warm"] == "ok"
                client.sendall(json.dumps(hello).encode() + b"\n")
                while json.loads(reader.readline()).get("id") != 1:
                    pass
                samples.append((time.perf_counter() - started) * 1000)
        rss = rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)
    return samples[1:], rss


def sidecar_rss(agent: Path, events: int) -> tuple[float, float]:
    """VmRSS (MB, from /proc) of a real sidecar after its hello and after `events` tool_call events."""
    proc = subprocess.Popen([*SERVE_ARGV, "--cwd", str(agent.parent), "--agent-dir", str(agent)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def call(request_id: int, method: str, params: dict[str, Any]) -> None:
            assert proc.stdin is not None and proc.stdout is not None
            message = {"id": request_id, "method": method, "params": params}
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            while json.loads(proc.stdout.readline()).get("id") != request_id:
                pass

        call(0, "hello", {"protocol": 1, "cwd": str(agent.parent)})
        after_hello = rss_mb(proc.pid)
        for i in range(events):
            call(i + 1, "event", {"type": "tool_call", "ctx": {}, "payload": {
                "toolName": "read", "toolCallId": f"c{i}", "input": {"path": "notes.txt"}}})
        return after_hello, rss_mb(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


IMPORT_BUDGET_MS = 45.0
UNWANTED = ("pydantic", "ruamel", "typer", "click", "_ssl", "asyncio")


def import_budget(agent: Path) -> None:
    """`python -X importtime` of a real `router serve` on a cached policy: the total against the
    budget, the heaviest imports, and which unwanted modules it loads."""
    hello = json.dumps({"id": 1, "method": "hello", "params": {"protocol": 1, "cwd": str(agent.parent)}})
    done = subprocess.run([sys.executable, "-X", "importtime", *SERVE_ARGV[1:], "--cwd", str(agent.parent),
                           "--agent-dir", str(agent)], input=hello + "\n", capture_output=True, text=True,
                          timeout=60, check=True, cwd="/")
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")
            and "self [us]" not in line]
    timed = [(int(r[0].split(":")[1]), int(r[1]), r[2].strip()) for r in rows]
    total = sum(own for own, _, _ in timed) / 1000
    engine = max((cumulative for _, cumulative, name in timed if name == "router.runtime.server"),
                 default=0) / 1000
    loaded = {name for _, _, name in timed}
    unwanted = [name for name in UNWANTED if any(m == name or m.startswith(name + ".") for m in loaded)
                and not (name == "_ssl" and "_ssl" not in loaded)]
    verdict = "within" if engine <= IMPORT_BUDGET_MS else "OVER"
    print(f"  -X importtime of `router serve` (cached policy): router.runtime.server {engine:.1f} ms "
          f"(all imports {total:.1f} ms), {verdict} the budget of {IMPORT_BUDGET_MS:.0f} ms; "
          f"unwanted modules loaded: {', '.join(unwanted) or 'none'}")
    heaviest = sorted(timed, reverse=True)[:5]
    print("    heaviest (self): " + ", ".join(f"{name} {own / 1000:.1f}" for own, _, name in heaviest))


# -- (c) ----------------------------------------------------------------------------------------


def bench_c(install: PiInstall, repeat: int) -> None:
    warm_dir = Path(tempfile.mkdtemp(prefix="bw-"))  # short: a socket path is at most 107 bytes
    try:
        with tempfile.TemporaryDirectory(prefix="bench-c-") as tmp, FakeProvider() as fake:
            base = Path(tmp)
            agent = make_agent_dir(base, fake, settings={"retry": {"enabled": False}})
            work = base / "work"
            work.mkdir()
            cold = router_env(agent, install)  # ROUTER_WARM=0: every run spawns its sidecar
            warm = {**cold, "ROUTER_WARM": "1", "ROUTER_WARM_DIR": str(warm_dir)}
            configs = {(prompts, kind): env for prompts in (1, 3)
                       for kind, env in (("none", cold), ("warm", warm), ("spawned", cold))}
            configs[(0, "spawned")] = cold  # 1 prompt, no declarations cache: every run a first run
            configs[(1, "uncached")] = {**warm, "JITI_FS_CACHE": "false"}  # jiti's file cache off: cold
            times: dict[tuple[int, str], list[float]] = {key: [] for key in configs}
            for round_ in range(repeat + 1):
                for (prompts, kind), env in configs.items():
                    if prompts == 0:
                        shutil.rmtree(agent / "router" / "declarations", ignore_errors=True)
                    args = (["-e", str(BRIDGE)] if kind != "none" else []) + ["--no-session"]
                    args += [f"prompt number {i + 1}" for i in range(max(prompts, 1))]
                    started = time.perf_counter()
                    done = run_print(args, cwd=work, env=env, install=install, timeout=120)
                    elapsed = (time.perf_counter() - started) * 1000
                    if done.returncode != 0:
                        raise RuntimeError(done.stderr[-2000:])
                    if round_ > 0:  # round 0 warms caches (jiti, Python bytecode) and starts the warm server
                        times[(prompts, kind)].append(elapsed)
            forked = (agent / "router" / "router.log").read_text().count("forked by the warm sidecar")
    finally:
        stop_warm(warm_dir)
    med = {key: statistics.median(values) for key, values in times.items()}
    print(f"(c)  pi -p against the fake provider, median of {repeat} (interleaved, after a warm-up); "
          f"target: added <= +10 ms, ratio <= 1.03")
    for prompts in (3, 1):
        without = med[(prompts, "none")]
        print(f"  {prompts} prompt(s), without the bridge {without:7.1f} ms")
        for kind, label in (("warm", "the bridge, its sidecar forked warm (the default)"),
                            ("spawned", "the bridge, its sidecar spawned (ROUTER_WARM=0)")):
            with_ = med[(prompts, kind)]
            print(f"    {label:54s} {with_:7.1f} ms: added {with_ - without:+7.1f} ms, "
                  f"ratio {with_ / without:.2f}")
    for kind, label in (("uncached", "forked warm, jiti's cache empty (JITI_FS_CACHE=false)"),):
        with_ = med[(1, kind)]
        print(f"    {label:54s} {with_:7.1f} ms: added {with_ - med[(1, 'none')]:+7.1f} ms, "
              f"ratio {with_ / med[(1, 'none')]:.2f}")
    first = med[(0, "spawned")]
    print(f"  1 prompt, spawned, without its declarations cache (every run a first run): {first:7.1f} ms: "
          f"added {first - med[(1, 'none')]:+7.1f} ms, ratio {first / med[(1, 'none')]:.2f}")
    for kind in ("warm", "spawned"):
        added3 = med[(3, kind)] - med[(3, "none")]
        added1 = med[(1, kind)] - med[(1, "none")]
        print(f"  {kind}: per extra turn (3-prompt minus 1-prompt added, / 2): "
              f"{(added3 - added1) / 2:+.1f} ms")
    print(f"  runs served by a forked sidecar: {forked} (of {4 * (repeat + 1)} warm runs; "
          "the first starts it)")


def stop_warm(directory: Path) -> None:
    """Stop the warm servers whose lock files are in `directory` (SIGTERM), then remove it."""
    for lock in directory.glob("*.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGTERM)
    shutil.rmtree(directory, ignore_errors=True)


# -- (d) ----------------------------------------------------------------------------------------

INSTANT_SIDECAR = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method = message["method"]
    hello = {"protocol": 1, "events": ["command"], "commands": [], "tools": [], "virtual_models": [],
             "skills": [], "warnings": []}
    result = hello if method == "hello" else {"actions": []} if method == "event" else {}
    sys.stdout.write(json.dumps({"id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
    if method == "shutdown":
        break
"""
QUIET_POLICY = "version: 1\ndisable: [default-warn-context-full, default-rearm-context-warning]\n"


def bench_d(install: PiInstall, repeat: int) -> None:
    """Where the start-up time goes: `pi -p` (1 prompt) with stand-ins that remove one cost each."""
    with tempfile.TemporaryDirectory(prefix="bench-d-") as tmp, FakeProvider() as fake:
        base = Path(tmp)
        agent = make_agent_dir(base, fake, settings={"retry": {"enabled": False}})
        quiet = make_agent_dir(base / "quiet", fake, settings={"retry": {"enabled": False}})
        (quiet / "router.yaml").write_text(QUIET_POLICY)
        work = base / "work"
        work.mkdir()
        (base / "instant.py").write_text(INSTANT_SIDECAR)
        (base / "empty.ts").write_text("export default function (): void {}\n")
        env, quiet_env = router_env(agent, install), router_env(quiet, install)
        niced = json.dumps(["nice", "-n", "19", *SERVE_ARGV])
        bridge = ["-e", str(BRIDGE)]
        configs: dict[str, tuple[list[str], dict[str, str]]] = {
            "no extension": ([], env),
            "an empty extension (Pi's cost of any extension)": (["-e", str(base / "empty.ts")], env),
            "the bridge, its sidecar missing (module loading)": (
                bridge, {**env, "ROUTER_SERVE": '["/nonexistent"]'}),
            "the bridge, an instant stand-in sidecar": (bridge, {**env, "ROUTER_SERVE": json.dumps(
                [sys.executable, "-S", "-I", str(base / "instant.py")])}),
            "the bridge, the real sidecar (default pack)": (bridge, env),
            "the same, no turn_end rules (nothing waits for it)": (bridge, quiet_env),
            "the same, its sidecar at nice 19 (no CPU contention)": (
                bridge, {**quiet_env, "ROUTER_SERVE": niced}),
        }
        times: dict[str, list[float]] = {label: [] for label in configs}
        for round_ in range(repeat + 1):
            for label, (args, run_env) in configs.items():
                started = time.perf_counter()
                done = run_print([*args, "--no-session", "hello"], cwd=work, env=run_env, install=install,
                                 timeout=120)
                if done.returncode != 0:
                    raise RuntimeError(f"{label}: {done.stderr[-2000:]}")
                if round_ > 0:
                    times[label].append((time.perf_counter() - started) * 1000)
    base_ms = statistics.median(times["no extension"])
    print(f"(d)  where the start-up goes: `pi -p` with 1 prompt, median of {repeat} (interleaved)")
    for label, samples in times.items():
        median = statistics.median(samples)
        print(f"  {label:54s} {median:7.1f} ms  added {median - base_ms:+7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--only", default="a1,a2,b,c,d", help="comma-separated parts to run")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batches", default="1,10", help="read calls per assistant message")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    parts = set(args.only.split(","))
    install = ensure_pi()
    print(f"Pi {PI_VERSION} on {install.node}; python {sys.executable}")
    if "a1" in parts:
        bench_a1(install, args.calls, [int(b) for b in args.batches.split(",")])
    if parts & {"a2", "b"}:
        bench_a2_b(install, args.events, parts)
    if "c" in parts:
        bench_c(install, args.repeat)
    if "d" in parts:
        bench_d(install, args.repeat)


if __name__ == "__main__":
    main()
