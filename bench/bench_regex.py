"""Regex engines for user patterns: µs per search with `re`, `regex` (with timeout=) and RE2.

Run: python bench/bench_regex.py [--repeat 5]

The patterns are the packs' own (a keyword alternation with `i`, an anchored answer, a number)
on a short prompt, on a 20 KB text and on 20 KB where nothing matches; then the time
backtracking patterns such as `(a+)+$` take with each engine (RE2 is linear; `regex` stops at
its timeout). Engines that are not installed are skipped.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

SHORT = "Please refactor the parser, then approve the change and continue (Recommended) p=0.86"
LONG = (SHORT + " lorem ipsum dolor sit amet ") * 180  # about 20 KB
MISS = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 360  # 20 KB, nothing matches
PATTERNS = [
    ("keywords/i", "confirm|approve|allow|continue|proceed|overwrite|delete|remove|publish|trust", "i"),
    ("anchored/i", "^(yes|y|ok|okay|accept|approve|allow|continue|proceed)$", "i"),
    ("number", "[0-9.]+", ""),
    ("unicode/i", "重构|架构|全面|详细|设计|refactor|comprehensive|design", "i"),
]


def engines() -> dict[str, Callable[[str, str], Callable[[str], Any]]]:
    """name -> compile(pattern, flags) -> search(text)."""
    found: dict[str, Callable[[str, str], Callable[[str], Any]]] = {
        "re": lambda p, f: re.compile(p, re.IGNORECASE if f else 0).search}
    try:
        rx = importlib.import_module("regex")

        def with_timeout(p: str, f: str) -> Callable[[str], Any]:
            search = rx.compile(p, rx.IGNORECASE if f else 0).search
            return lambda text: search(text, timeout=1.0)

        found["regex+timeout"] = with_timeout
    except ImportError:
        pass
    try:
        re2 = importlib.import_module("re2")
        options = re2.Options()
        insensitive = re2.Options()
        insensitive.case_sensitive = False
        found["re2"] = lambda p, f: re2.compile(p, insensitive if f else options).search
    except ImportError:
        pass
    return found


def per_call_us(search: Callable[[str], Any], text: str, repeat: int) -> float:
    runs = 20000 if len(text) < 1000 else 500
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(runs):
            search(text)
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return statistics.median(samples)


CATASTROPHIC = [("(a+)+$", "a" * 30 + "!"), ("(a|aa)+$", "a" * 40 + "!"),
                ("(\\w+\\s?)+$", "word " * 8 + "!" * 3)]


def catastrophic_ms(make: Callable[[str, str], Callable[[str], Any]], pattern: str, text: str) -> str:
    search = make(pattern, "")
    started = time.perf_counter()
    try:
        search(text)
    except TimeoutError:
        return f"{(time.perf_counter() - started) * 1000:.0f} ms (timeout)"
    return f"{(time.perf_counter() - started) * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    found = engines()
    print(f"{'pattern':<12} {'text':>6} " + " ".join(f"{name:>14}" for name in found))
    for label, pattern, flags in PATTERNS:
        for text_name, text in (("short", SHORT), ("20KB", LONG), ("miss", MISS)):
            cells = [per_call_us(make(pattern, flags), text, args.repeat) for make in found.values()]
            print(f"{label:<12} {text_name:>6} " + " ".join(f"{c:>11.2f} µs" for c in cells))
    for name, make in found.items():
        if name == "re":
            continue  # these take minutes or more with `re`
        for pattern, text in CATASTROPHIC:
            print(f"{pattern} on {len(text)} chars, {name}: {catastrophic_ms(make, pattern, text)}")


if __name__ == "__main__":
    main()
