"""Run a command beside CPU-bound processes: the suite's busy lane (docs/development.md).

    python3 -m tests.busy_lane [--per-core N] -- COMMAND...

starts N processes per core that spin on the CPU at the same priority as the command, runs
COMMAND, stops the spinners (whatever happens to the command) and exits with COMMAND's status.
`.ci/run` runs `python3 -m pytest -m timing` this way: the tests whose outcome involves time must
pass on a loaded machine as well as on an idle one.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

SPIN = "while True:\n    pass\n"


def spinners(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that each keep one CPU busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL,
                             start_new_session=True) for _ in range(count)]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Kill and reap every spinner."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
    for process in processes:
        process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.busy_lane", description=__doc__.split("\n")[0])
    parser.add_argument("--per-core", type=int, default=2, help="spinning processes per core (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is required after --")
    count = max(args.per_core, 0) * (os.cpu_count() or 1)
    print(f"busy lane: {count} CPU-bound processes beside: {' '.join(command)}", flush=True)
    busy = spinners(count)
    try:
        return subprocess.call(command)
    finally:
        stop(busy)


if __name__ == "__main__":
    sys.exit(main())
