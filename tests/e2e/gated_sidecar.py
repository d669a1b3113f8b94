"""A stand-in for `router serve` whose behaviour a file decides, so two runs share one command.

Usage (the bridge appends ``--cwd DIR --agent-dir DIR``)::

    ROUTER_SERVE='["python3", "tests/e2e/gated_sidecar.py", "/tmp/gate"]'

When the gate file holds ``hold``, it reads its stdin and answers nothing (a sidecar that never
says hello) until stdin closes; otherwise it becomes the real sidecar of this interpreter. The
declarations cache is keyed by the sidecar command, so a test that needs "the same sidecar,
answering or not" uses this one command for both runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    gate, rest = Path(argv[0]), argv[1:]
    held = gate.is_file() and gate.read_text().strip() == "hold"
    if not held:
        os.execv(sys.executable, [sys.executable, "-P", "-m", "router", "serve", *rest])
    for _ in sys.stdin.buffer:  # silent until the bridge closes stdin
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
