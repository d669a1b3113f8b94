"""Interpreter speed: µs per event for generated policies of 10 to 10,000 rules, and load time.

Run: python bench/bench_interpreter.py [--sizes 10,100,1000,10000] [--repeat 5]

Every rule listens to the benchmarked event type and none fires, so every rule is evaluated:
- `match-miss`: each rule's JMESPath match is false (the `when` is never reached);
- `when-miss`: each match is true and each `when` expression is false (both run: the worst case).
Also prints load + compile + lint time of a 1,000-rule file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.compile.compiler import compile_files  # noqa: E402
from router.engine.interpreter import evaluate  # noqa: E402

EVENT = {
    "type": "input", "text": "please refactor the parser and fix the crash", "source": "rpc",
    "session": {"id": "s1", "cwd": "/work", "mode": "rpc", "has_ui": True, "subagent": False},
    "model": {"provider": "fake", "id": "deepseek-v4", "ref": "fake/deepseek-v4", "context_window": 128000},
    "tools": {"active": ["read", "bash", "edit", "write"], "all": ["read", "bash", "edit", "write"]},
    "usage": {"tokens": 1000, "context_window": 128000, "percent": 0.8}, "env": {},
}


def policy_text(size: int, kind: str) -> str:
    """A generated policy of `size` rules of the given kind."""
    lines = ["version: 1", "vars:", "  threshold: 0.5", "rules:"]
    for i in range(size):
        if kind == "match-miss":
            match = f"source == 'rpc' && text == 'never {i}'"
            when = "vars.threshold < 1"
        else:
            match = f"source == 'rpc' && text != 'never {i}'"
            when = f"count_keywords(text, ['kw{i}']) > 0 and usage.percent > vars.threshold"
        lines += [f"  - id: rule-{i}", "    on: input", f'    match: "{match}"', f'    when: "{when}"',
                  "    do:", f"      - notify: 'rule {i} fired for {{text}}'"]
    return "\n".join(lines) + "\n"


def compile_text(text: str, directory: Path):
    path = directory / "policy.yaml"
    path.write_text(text)
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    return policy


def per_event_us(policy, repeat: int) -> float:
    runs = max(20, 20000 // max(1, len(policy.rules)))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(runs):
            decision = evaluate(policy, EVENT)
        samples.append((time.perf_counter() - start) / runs * 1e6)
        assert not decision.fired
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print(f"{'rules':>7} {'kind':>11} {'µs/event':>10} {'µs/rule':>8}")
        for kind in ("match-miss", "when-miss"):
            for size in sizes:
                policy = compile_text(policy_text(size, kind), directory)
                us = per_event_us(policy, args.repeat)
                print(f"{size:>7} {kind:>11} {us:>10.1f} {us / size:>8.2f}")
        text = policy_text(1000, "when-miss")
        path = directory / "lint.yaml"
        path.write_text(text)
        from router.commands.lint import lint_paths

        start = time.perf_counter()
        diagnostics = lint_paths([path])
        elapsed = time.perf_counter() - start
        print(f"load + compile + lint of a 1,000-rule file ({len(text.splitlines())} lines): "
              f"{elapsed * 1000:.0f} ms ({len(diagnostics)} diagnostics)")


if __name__ == "__main__":
    main()
