"""Redraw docs/img/report.png, the report of the example corpus (run by hand, like
examples/sessions/generate.py: Chromium's pixels differ between versions, so `tests.regen --check`
cannot hold it to a clean tree; tests/replay/test_report_html.py checks it is there and cited).

    python3 -m tests.report_screenshot

It runs `router replay examples/sessions --policy rules/cuttle.yaml --html …` and a headless
Chromium screenshot of the page, offline (the page loads nothing; Chromium gets no network).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "img" / "report.png"
WINDOW = "1100,2500"


def main() -> int:
    from tests.programs import find

    chromium = find("chromium", "chromium-browser")
    if chromium is None:
        print("chromium is not installed (docs/development.md says how)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="router-shot-") as scratch:
        page = Path(scratch) / "report.html"
        subprocess.run([sys.executable, "-m", "router", "replay", str(ROOT / "examples" / "sessions"),
                        "--policy", str(ROOT / "rules" / "cuttle.yaml"), "--html", str(page)],
                       check=True, capture_output=True, timeout=300)
        TARGET.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--hide-scrollbars", f"--user-data-dir={scratch}/profile",
                        "--proxy-server=127.0.0.1:9",
                        f"--window-size={WINDOW}", f"--screenshot={TARGET}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
