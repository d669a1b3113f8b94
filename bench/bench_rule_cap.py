"""A policy at the rule cap: what a sidecar's events cost, from the cache and warm.

Run: python bench/bench_rule_cap.py [--rules 4990] [--events 5]

Builds a user policy of `--rules` rules on `input` (each a `regex()` and a `starts_with()`, none
matching) next to the built-in default pack, says hello once (which compiles it and stores the
cache), then starts a second engine on the cache, as a restarted sidecar does, and prints: its
hello, its first event (the rules of `input` compiled and indexed, announced with a progress),
and the median of `--events` later events, against the announced deadline. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.lang.budget import EVENT_DEADLINE_MS  # noqa: E402
from router.runtime.server import Engine  # noqa: E402

EVENT = {"type": "input", "payload": {"text": "please refactor the parser", "source": "rpc"}, "ctx": {}}


class Quiet:
    """A connection that answers nothing and counts progress notes."""

    def __init__(self) -> None:
        self.progress = 0

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.progress += method == "progress"

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        return None


def timed(call: Any) -> float:
    started = time.perf_counter()
    asyncio.run(call)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=4990)
    parser.add_argument("--events", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent, cwd = Path(tmp, "agent"), Path(tmp, "proj")
        agent.mkdir()
        cwd.mkdir()
        rules = "".join(f"  - id: r{i}\n    on: input\n    when: \"regex(text, 'never {i}x') or "
                        f"starts_with(text, 'no {i}')\"\n    do: [{{notify: x{i}}}]\n"
                        for i in range(args.rules))
        (agent / "router.yaml").write_text("version: 1\nrules:\n" + rules)
        first = Engine(Quiet(), cwd=cwd, agent=agent, extra=[])  # type: ignore[arg-type]
        compile_ms = timed(first.hello({"cwd": str(cwd)}))
        connection = Quiet()
        engine = Engine(connection, cwd=cwd, agent=agent, extra=[])  # type: ignore[arg-type]
        hello_ms = timed(engine.hello({"cwd": str(cwd)}))
        first_ms = timed(engine.event(1, EVENT))
        announced = connection.progress
        later = [timed(engine.event(2 + n, EVENT)) for n in range(args.events)]
    print(f"{args.rules} rules on input (+ the default pack); announced deadline {EVENT_DEADLINE_MS} ms")
    print(f"  hello, compiling:          {compile_ms:9.1f} ms")
    print(f"  hello from the cache:      {hello_ms:9.1f} ms")
    print(f"  first event (compiles):    {first_ms:9.1f} ms  (progress notes sent first: {announced})")
    print(f"  later events, median:      {statistics.median(later):9.1f} ms")


if __name__ == "__main__":
    main()
