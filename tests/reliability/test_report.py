"""report.py: results file -> docs/reliability.md (sections, medians, totals, xfail marks)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.reliability import report

RECORDS = [
    {"case": "killed", "group": "sidecar", "tries": 3, "outcome": "recovered",
     "recovery_ms": [300.0, 500.0, 400.0], "notes": "", "test": "t.py::a", "status": "passed", "xfail": ""},
    {"case": "full disk", "group": "logs", "tries": 2, "outcome": "failed", "recovery_ms": [],
     "notes": "Today: cannot write /tmp/pytest-of-x/pytest-1/t0/agent/router/audit.jsonl | partial",
     "test": "t.py::b", "status": "xfail", "xfail": "needs the robustness branch"},
    {"case": "garbage", "group": "policy", "tries": 2, "outcome": "held", "recovery_ms": [12.0],
     "notes": "", "test": "t.py::c", "status": "passed", "xfail": ""},
]


def write_results(tmp_path: Path, records: list[dict[str, object]]) -> Path:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_render_sections_medians_totals_and_marks(tmp_path: Path) -> None:
    page = report.render(report.load(write_results(tmp_path, RECORDS)))

    assert "| killed | 3 | recovered | 400 ms (300–500) |  |" in page
    assert "| garbage | 2 | held | 12 ms |  |" in page
    titles = ("The sidecar", "Logs and the disk", "The policy file")
    sections = [page.index(f"## {title}") for title in titles]
    assert sections == sorted(sections)
    assert "3 cases, 7 tries" in page and "1 recovered" in page and "1 fails today (xfail)" in page
    assert "Needs the robustness branch:\n\n- Logs and the disk: full disk (t.py::b)" in page
    assert "/tmp/" not in page and "…/audit.jsonl \\| partial" in page  # no machine paths; pipes escaped
    assert report.COMMAND in page


def test_load_keeps_the_last_record_of_a_test(tmp_path: Path) -> None:
    again = {**RECORDS[0], "tries": 5}
    records = report.load(write_results(tmp_path, [*RECORDS, again]))
    assert [r["tries"] for r in records if r["test"] == "t.py::a"] == [5]


def test_main_writes_the_page_from_a_results_file(tmp_path: Path) -> None:
    out = tmp_path / "reliability.md"
    assert report.main([str(write_results(tmp_path, RECORDS)), "--out", str(out)]) == 0
    assert out.read_text().startswith("# Reliability\n")
