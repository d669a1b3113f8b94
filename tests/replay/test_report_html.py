"""`router report --html`: the page rendered in headless Chromium, with every network request trapped.

Chromium runs with a proxy on 127.0.0.1 that only counts connections: a page that tried to load
anything over the network would reach it. A control page with an external image shows the trap
works. Without Chromium the browser tests skip, saying how to install it (in CI they fail:
tests/programs.py).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from router.replay.report_html import render
from tests.commands.test_log_cli import record, router, write_log
from tests.programs import require

QUIET = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
         "--disable-domain-reliability", "--disable-extensions", "--metrics-recording-only",
         "--no-default-browser-check", "--disable-features=MediaRouter,OptimizationHints,Translate"]


BROWSER_HOSTS = (".google.com", ".googleapis.com", ".gstatic.com", ".gvt1.com")


class Trap:
    """A TCP listener that counts connections (Chromium's proxy: every request would come here)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.connections.append(conn.recv(200))
                except OSError:
                    self.connections.append(b"")

    @property
    def page_requests(self) -> list[str]:
        """The hosts asked for, less Chromium's own services (its clock check, accounts, …)."""
        hosts = []
        for head in self.connections:
            parts = head.split(b" ")
            target = parts[1].decode("latin-1") if len(parts) > 1 else "?"
            host = target.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
            if not host.endswith(BROWSER_HOSTS):
                hosts.append(host)
        return hosts

    def close(self) -> None:
        """Stop listening: shutdown() wakes the thread blocked in accept(), which then ends."""
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join()


@pytest.fixture
def trap() -> Iterator[Trap]:
    """The proxy trap, for a test that renders a page in Chromium (which it requires)."""
    require("chromium", "chromium-browser")
    found = Trap()
    yield found
    found.close()


def dump_dom(page: Path, trap: Trap, profile: Path) -> str:
    """The DOM after the page loaded (and its scripts ran), as Chromium serializes it."""
    argv = [require("chromium", "chromium-browser"), *QUIET, f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{trap.port}",
            "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=2000", "--dump-dom", page.as_uri()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Cells(HTMLParser):
    """Rows of the page's tables keyed by their data-* attribute, and the texts of sections."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[tuple[str, str], list[str]] = {}
        self.summary: dict[str, str] = {}
        self.current: list[str] | None = None
        self.cell: list[str] | None = None
        self.summary_key: str | None = None
        self.headings: list[str] = []
        self.in_heading = False
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "tr":
            key = next(((k, str(v)) for k, v in attrs if k.startswith("data-")), None)
            self.current = [] if key else None
            if key:
                self.rows[key] = self.current  # type: ignore[assignment]
        elif tag == "td":
            self.cell = []
            self.summary_key = values.get("data-summary")
        elif tag == "h2":
            self.in_heading = True
        elif tag == "svg":
            self.svgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            text = "".join(self.cell).strip()
            if self.current is not None:
                self.current.append(text)
            if self.summary_key:
                self.summary[self.summary_key] = text
            self.cell, self.summary_key = None, None
        elif tag == "h2":
            self.in_heading = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        if self.in_heading:
            self.headings.append(data)


def parsed(dom: str) -> Cells:
    cells = Cells()
    cells.feed(dom)
    return cells


def records() -> list[dict[str, Any]]:
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    items = []
    for seq in range(12):
        model = "local/qwen-8b" if seq % 3 else "cloud/sonnet"
        fired = ("route-local",) if seq % 3 else ("route-cloud", "notify-<b>")
        extra: dict[str, Any] = {"tier": "local" if seq % 3 else "cloud"}
        if seq % 2:
            extra["cost"] = 0.01 * seq
        items.append(record(seq, event="turn_end" if seq % 2 else "input", fired=fired,
                            when=start + timedelta(minutes=seq), model=model, **extra))
    items[5]["latency_ms"] = 812.5
    items[7]["shadow"] = [{"id": "try-judge", "would": [], "agrees": False}]
    return items


def test_report_page_shows_models_tiers_rules_cost_and_slowest(tmp_path: Path, trap: Trap) -> None:
    directory = tmp_path / "log"
    write_log(directory, *records())
    page = tmp_path / "report.html"
    done = router("report", "--html", str(page), "--log", str(directory), "--title", "Team <router>")
    assert done.returncode == 0, done.stderr
    cells = parsed(dump_dom(page, trap, tmp_path / "profile"))
    assert cells.headings == ["Summary", "Models", "Tiers", "Cost over time", "Hits per rule",
                              "Slowest decisions"]
    assert cells.summary["decisions"] == "12" and cells.summary["sessions"] == "1"
    assert cells.summary["cost"] == f"{sum(0.01 * s for s in range(1, 12, 2)):.4f}"
    assert cells.rows[("data-model", "local/qwen-8b")] == ["local/qwen-8b", "8", "67%"]
    assert cells.rows[("data-model", "cloud/sonnet")] == ["cloud/sonnet", "4", "33%"]
    assert cells.rows[("data-tier", "local")][1:] == ["8", "67%"]
    assert cells.rows[("data-rule", "route-local")] == ["route-local", "8", "0"]
    assert cells.rows[("data-rule", "notify-<b>")] == ["notify-<b>", "4", "0"]  # escaped, shown as text
    assert cells.rows[("data-rule", "try-judge")] == ["try-judge", "0", "1"]
    assert cells.rows[("data-slow", "1")] == ["2026-12-01T10:05:00.000Z", "s-aaaa1111", "turn_end #5",
                                              "route-local", "812.50"]
    assert len([key for key in cells.rows if key[0] == "data-slow"]) == 10
    assert cells.svgs >= 4
    assert trap.page_requests == [], "the page tried to reach the network"


def test_render_takes_records_and_escapes_everything() -> None:
    page = render([{"time": "2026-12-01T10:00:00.000Z", "session": "<s>", "event": "input", "seq": 0,
                    "rules": [{"id": "<script>alert(1)</script>", "fired": True}], "latency_ms": 2,
                    "model": "a\"b"}], title="<x>")
    assert "<script>" not in page and "&lt;script&gt;" in page and "<title>&lt;x&gt;</title>" in page
    assert "data-model=\"a&quot;b\"" in page
    assert "No rule fired." in render([], "empty") and "No record names a model." in render([], "e")


def test_the_trap_sees_a_page_that_loads_from_the_network(tmp_path: Path, trap: Trap) -> None:
    """The control: without the report's policy, an external image does reach the trap."""
    page = tmp_path / "leaky.html"
    page.write_text("<!DOCTYPE html><html><body><img src=\"http://example.invalid/x.png\"></body></html>")
    dump_dom(page, trap, tmp_path / "profile")
    assert trap.page_requests == ["example.invalid"], "the trap must see the page's request, or the "\
        "no-network check above would prove nothing"


def test_a_replay_writes_the_same_report_from_recorded_sessions(tmp_path: Path, trap: Trap) -> None:
    sessions = Path(__file__).resolve().parent.parent.parent / "examples" / "sessions"
    cuttle = Path(__file__).resolve().parent.parent.parent / "rules" / "cuttle.yaml"
    page = tmp_path / "replay.html"
    done = router("replay", str(sessions), "--policy", str(cuttle), "--html", str(page), "-f", "json")
    assert done.returncode == 0, done.stderr
    cells = parsed(dump_dom(page, trap, tmp_path / "profile"))
    assert cells.headings[:2] == ["Summary", "Models"] and "Hits per rule" in cells.headings
    assert cells.summary["sessions"] == "3"
    assert cells.rows[("data-rule", "cu-route")][0] == "cu-route"
    assert any(key[0] == "data-model" for key in cells.rows)
    assert trap.page_requests == [], "the page tried to reach the network"


def test_a_replay_report_that_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    sessions = Path(__file__).resolve().parent.parent.parent / "examples" / "sessions"
    done = router("replay", str(sessions), "--html", str(tmp_path / "missing" / "r.html"))
    assert done.returncode == 1 and "error: cannot write" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
