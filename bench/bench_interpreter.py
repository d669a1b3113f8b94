"""Interpreter speed: µs per event for generated policies, against two baselines in the same run.

Run: python bench/bench_interpreter.py [--sizes 100,1000] [--repeat 7] [--lint-repeat 7]

Every rule listens to the benchmarked event type and none fires, so every rule is considered:
- `none-match`: each rule's JMESPath match is false (the `when` is never reached);
- `worst`: each match is true and each `when` expression is false (both run).
Each policy is evaluated three ways, each figure the median of `--repeat` timed runs:
- `router`: `evaluate()` as the sidecar runs it (the rule index leaves out rules known not to match);
- `no index`: `evaluate()` with the index switched off (every rule's compiled closures run);
- `library`: a plain loop over the same rules with the libraries themselves: `jmespath` (compiled
  once per rule) for `match`, then `simpleeval` (parsed once per rule) for `when`.
Then load + compile + lint of a 1,000-rule file, against a bare YAML load of the same file
(ruamel.yaml, safe loader), both medians of `--lint-repeat` runs. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jmespath
from ruamel.yaml import YAML
from simpleeval import EvalWithCompoundTypes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.commands.lint import lint_paths  # noqa: E402
from router.compile.compiler import compile_files  # noqa: E402
from router.compile.ir import CompiledPolicy  # noqa: E402
from router.engine import rule_index  # noqa: E402
from router.engine.interpreter import evaluate  # noqa: E402
from router.lang.functions import FUNCTIONS  # noqa: E402

EVENT = {
    "type": "input", "text": "please refactor the parser and fix the crash", "source": "rpc",
    "session": {"id": "s1", "cwd": "/work", "mode": "rpc", "has_ui": True, "subagent": False},
    "model": {"provider": "fake", "id": "deepseek-v4", "ref": "fake/deepseek-v4", "context_window": 128000},
    "tools": {"active": ["read", "bash", "edit", "write"], "all": ["read", "bash", "edit", "write"]},
    "usage": {"tokens": 1000, "context_window": 128000, "percent": 0.8}, "env": {},
}
VARS = {"threshold": 0.5}


def rule_sources(size: int, kind: str) -> list[tuple[str, str]]:
    """(match, when) of each generated rule."""
    rules = []
    for i in range(size):
        if kind == "none-match":
            rules.append((f"source == 'rpc' && text == 'never {i}'", "vars.threshold < 1"))
        else:
            rules.append((f"source == 'rpc' && text != 'never {i}'",
                          f"count_keywords(text, ['kw{i}']) > 0 and usage.percent > vars.threshold"))
    return rules


def policy_text(size: int, kind: str) -> str:
    """A generated policy of `size` rules of the given kind."""
    lines = ["version: 1", "vars:", "  threshold: 0.5", "rules:"]
    for i, (match, when) in enumerate(rule_sources(size, kind)):
        lines += [f"  - id: rule-{i}", "    on: input", f'    match: "{match}"', f'    when: "{when}"',
                  "    do:", f"      - notify: 'rule {i} fired for {{text}}'"]
    return "\n".join(lines) + "\n"


def compile_text(text: str, directory: Path) -> CompiledPolicy:
    path = directory / "policy.yaml"
    path.write_text(text)
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    return policy


def median_us(step: Callable[[], int], runs: int, repeat: int) -> float:
    """Median over `repeat` timed runs of the µs per call of `step` (which returns rules fired)."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(runs):
            fired = step()
        samples.append((time.perf_counter() - start) / runs * 1e6)
        assert fired == 0
    return statistics.median(samples)


def router_step(policy: CompiledPolicy) -> Callable[[], int]:
    return lambda: len(evaluate(policy, EVENT).fired)


def library_step(sources: list[tuple[str, str]]) -> Callable[[], int]:
    """The libraries' own loop: jmespath for `match`, simpleeval for `when`, first match fires."""
    compiled = [(jmespath.compile(m), ast.parse(w.strip(), mode="eval").body, w) for m, w in sources]
    functions = {"count_keywords": FUNCTIONS["count_keywords"].impl}

    def step() -> int:
        names: dict[str, Any] = {**EVENT, "vars": VARS}
        evaluator = EvalWithCompoundTypes(names=names, functions=functions)
        evaluator.ATTR_INDEX_FALLBACK = True  # `usage.percent` reads a dict key
        fired = 0
        for match, when_tree, when in compiled:
            if match.search(EVENT) and evaluator.eval(when, previously_parsed=when_tree):
                fired += 1
        return fired

    return step


def evaluation_table(sizes: list[int], repeat: int, directory: Path) -> None:
    print(f"{'rules':>6} {'kind':>11} {'router µs':>10} {'no index µs':>12} {'library µs':>11} "
          f"{'library/router':>15} {'no index/router':>16}")
    for kind in ("none-match", "worst"):
        for size in sizes:
            policy = compile_text(policy_text(size, kind), directory)
            runs = max(20, 20000 // size)
            rule_index.enabled = True
            indexed = median_us(router_step(policy), runs, repeat)
            rule_index.enabled = False
            plain = median_us(router_step(policy), max(5, runs // 10), repeat)
            rule_index.enabled = True
            library = median_us(library_step(rule_sources(size, kind)), max(3, runs // 100), repeat)
            print(f"{size:>6} {kind:>11} {indexed:>10.1f} {plain:>12.1f} {library:>11.1f} "
                  f"{library / indexed:>14.0f}x {plain / indexed:>15.1f}x")


def median_ms(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def lint_figures(repeat: int, directory: Path) -> None:
    text = policy_text(1000, "worst")
    path = directory / "lint.yaml"
    path.write_text(text)
    diagnostics = lint_paths([path])  # warm: imports and first-use caches
    lint = median_ms(lambda: lint_paths([path]), repeat)
    yaml = median_ms(lambda: YAML(typ="safe").load(path.read_text()), repeat)
    print(f"load + compile + lint of a 1,000-rule file ({len(text.splitlines())} lines, "
          f"{len(diagnostics)} diagnostics): {lint:.0f} ms; bare YAML load of it: {yaml:.0f} ms; "
          f"ratio {lint / yaml:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--lint-repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        evaluation_table([int(s) for s in args.sizes.split(",")], args.repeat, Path(tmp))
        lint_figures(args.lint_repeat, Path(tmp))


if __name__ == "__main__":
    main()
