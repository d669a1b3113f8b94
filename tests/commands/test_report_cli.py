"""router/commands/report.py: the policy version of a report, the diff's rows, writing the page."""

from __future__ import annotations

from pathlib import Path

from router.commands.report import change_rows, recorded_policies, write
from router.replay.diff import Change
from router.replay.report_data import Figures


def test_each_recorded_digest_with_its_decisions_and_time_range() -> None:
    rows = recorded_policies([{"policy": "sha256:a", "time": "2026-12-01T10:00:00Z"},
                              {"policy": "sha256:b", "time": "2026-12-01T11:00:00Z"},
                              {"policy": "sha256:a", "time": "2026-12-01T12:00:00Z"}, {"policy": None}])
    assert rows == [
        ("digest", "sha256:a (2 decisions, 2026-12-01T10:00:00+00:00 to 2026-12-01T12:00:00+00:00)"),
        ("digest", "sha256:b (1 decision, 2026-12-01T11:00:00+00:00 to 2026-12-01T11:00:00+00:00)")]
    assert recorded_policies([{}]) == []


def test_a_changed_turn_is_one_row_per_aspect_with_the_cost_on_the_first() -> None:
    change = Change("s1", "p", 2, 10, {"model": ("a", "b"), "tools": (["read"], [])}, -0.5)
    assert change_rows([change]) == [
        {"session": "s1", "turn": 2, "what": "model", "old": "a", "new": "b", "delta": "-$0.5000"},
        {"session": "s1", "turn": 2, "what": "tools", "old": "read", "new": "(none)", "delta": None}]


def test_a_page_that_cannot_be_written_is_a_message(tmp_path: Path) -> None:
    figures = Figures("t", "replay", [], [])
    assert write(tmp_path / "no" / "r.html", figures) is not None
    assert write(tmp_path / "r.html", figures) is None
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
