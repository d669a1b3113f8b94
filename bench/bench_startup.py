"""CPU of one `router` process start, per command (figures printed, nothing asserted).

Run: python bench/bench_startup.py [--runs 20] [--only version,lint,...] [--against DIR]

Each command runs `--runs` times as `python -m router ...` (what the console script runs) in a
temporary project; its CPU (user + system, from the kernel's accounting of the waited child) is
the median over the runs, and the ratio is against `python -c pass` measured in the same run, so
the figures compare across a noisy, shared machine. The sidecar (`serve`) starts, answers its
`hello` and exits on end of input: once with a fresh agent directory each run (the policy
compiled: the first session of a project, every end-to-end test) and once with the same one (the
compiled policy from the cache: any later session). `--against DIR` (a checkout of another
revision, e.g. `git archive main | tar -x -C DIR`) runs every case a second time with DIR first
on PYTHONPATH, interleaved, and prints this tree's CPU as a ratio to that one's. Both trees are
byte-compiled first (`compileall`): with PYTHONDONTWRITEBYTECODE set, a tree without current
.pyc files would pay the compilation of every module at every start.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROUTER = [sys.executable, "-m", "router"]
EMPTY = "version: 1\n"
DEFAULT = "version: 1\nuse: [default]\n"
EVENT = {"type": "input", "text": "hello"}


def cpu_of(run: Callable[[], None]) -> float:
    """Milliseconds of CPU the children `run` waited for used (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def command(argv: list[str], cwd: Path, env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False, timeout=120)
    return run


def serve(cwd: Path, agent: Callable[[], Path], env: dict[str, str]) -> Callable[[], None]:
    """Start the sidecar, wait for its answer to `hello`, close its input, wait for its end."""
    hello = json.dumps({"id": 1, "method": "hello", "params": {"protocol": 1, "cwd": str(cwd)}})

    def run() -> None:
        argv = [sys.executable, "-P", "-m", "router", "serve", "--cwd", str(cwd), "--agent-dir", str(agent())]
        done = subprocess.run(argv, input=hello + "\n", capture_output=True, text=True, env=env,
                              cwd=cwd, check=False, timeout=120)
        if '"id": 1' not in done.stdout and '"id":1' not in done.stdout:
            raise SystemExit(f"the sidecar did not answer hello: {done.stdout[:300]} {done.stderr[:300]}")
    return run


def cases(base: Path, against: Path | None = None) -> dict[str, Callable[[], None]]:
    work = base / "work"
    work.mkdir(parents=True)
    (work / "empty.yaml").write_text(EMPTY)
    (work / "default.yaml").write_text(DEFAULT)
    (work / "event.json").write_text(json.dumps(EVENT))
    agents = base / "agents"
    agents.mkdir()
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agents / "cli"), "NO_COLOR": "1"}
    if against is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(against), *filter(None, [os.environ.get("PYTHONPATH")])])
    counter = iter(range(10**6))
    same = agents / "same"
    same.mkdir()

    def fresh() -> Path:
        path = agents / f"fresh-{next(counter)}"
        path.mkdir()
        return path

    return {
        "pass": command([sys.executable, "-c", "pass"], work, env),
        "version": command([*ROUTER, "version"], work, env),
        "help": command([*ROUTER, "--help"], work, env),
        "lint": command([*ROUTER, "lint", "empty.yaml"], work, env),
        "lint-default": command([*ROUTER, "lint", "default.yaml"], work, env),
        "explain-code": command([*ROUTER, "explain", "RT301"], work, env),
        "explain": command([*ROUTER, "explain", "-e", "event.json", "-p", "default.yaml"], work, env),
        "test": command([*ROUTER, "test", "default.yaml"], work, env),
        "serve-fresh": serve(work, fresh, env),
        "serve-cached": serve(work, lambda: same, env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated case names (pass always runs)")
    parser.add_argument("--against", type=Path, help="another checkout to compare with (PYTHONPATH)")
    args = parser.parse_args()
    for tree in [Path(__file__).resolve().parent.parent / "router",
                 *([args.against.resolve() / "router"] if args.against else [])]:
        compileall.compile_dir(tree, quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        table = cases(Path(tmp) / "this")
        other = cases(Path(tmp) / "other", args.against.resolve()) if args.against else {}
        wanted = {"pass", *filter(None, args.only.split(","))} if args.only else set(table)
        samples: dict[str, list[float]] = {name: [] for name in table if name in wanted}
        theirs: dict[str, list[float]] = {name: [] for name in samples if other}
        for _ in range(args.runs):  # interleaved: a busy moment costs every case alike
            for name in samples:
                samples[name].append(cpu_of(table[name]))
                if other:
                    theirs[name].append(cpu_of(other[name]))
    floor = statistics.median(samples["pass"])
    print(f"CPU per start, median of {args.runs} (user + system ms; x = ratio to `python -c pass`"
          + (f"; then {args.against}'s, and this tree's as a ratio to it)" if other else ")"))
    for name, values in samples.items():
        median = statistics.median(values)
        line = f"  {name:14s} {median:7.1f} ms  {median / floor:5.1f}x"
        if other:
            base = statistics.median(theirs[name])
            line += f"   against {base:7.1f} ms  {base / floor:5.1f}x   ratio {median / base:4.2f}"
        print(line)


if __name__ == "__main__":
    main()
