"""`router report --html`: the page rendered in headless Chromium, with every network request trapped.

Chromium runs with a proxy on 127.0.0.1 that only counts connections: a page that tried to load
anything over the network would reach it. A control page with an external image shows the trap
works. Without Chromium the browser tests skip, saying how to install it (in CI they fail:
tests/programs.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from router.load.prices import Catalog
from router.replay.report_data import from_log
from router.replay.report_html import render
from tests.commands.test_log_cli import record, router, write_log
from tests.programs import require

QUIET = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
         "--disable-domain-reliability", "--disable-extensions", "--metrics-recording-only",
         "--no-default-browser-check", "--disable-features=MediaRouter,OptimizationHints,Translate"]


ROOT = Path(__file__).resolve().parent.parent.parent
SESSIONS, CUTTLE = ROOT / "examples" / "sessions", ROOT / "rules" / "cuttle.yaml"
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
        self.in_title = False
        self.title = ""
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
        elif tag == "title":
            self.in_title = True
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
        elif tag == "title":
            self.in_title = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        if self.in_heading:
            self.headings.append(data)
        if self.in_title:
            self.title += data


def parsed(dom: str) -> Cells:
    cells = Cells()
    cells.feed(dom)
    return cells


MODELS = {"providers": {
    "cloud": {"baseUrl": "https://api.invalid/v1", "models": [
        {"id": "sonnet", "cost": {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0}}]},
    "local": {"baseUrl": "http://127.0.0.1:8080/v1", "models": [{"id": "qwen-8b"}]}}}
XSS = "<script>document.title='pwned'</script>"


def records() -> list[dict[str, Any]]:
    """A hand-made log: 2 projects, 2 sessions, 3 turns (local, cloud, cloud) among 12 decisions
    (most of them `context` events on the local model), a blocked tool call, a shadow rule, a
    signal fallback, a prompt and a rule id with HTML in them, two policy digests."""
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    alpha, beta = {"name": "alpha", "digest": "sha256:a1"}, {"name": "beta", "digest": "sha256:b2"}
    local, cloud = "local/qwen-8b", "cloud/sonnet"
    plan: list[tuple[str, str, dict[str, Any]]] = [
        ("input", local, {"tier": "local", "fired": ("route-local",),
                          "shadow": [{"id": "try-cloud", "would": [], "agrees": False}]}),
        *[("context", local, {"fired": ()}) for _ in range(5)],
        ("turn_end", local, {"fired": (), "cost": 0.0, "tokens": {"input": 1000, "output": 500}}),
        ("tool_call", local, {"fired": ("no-rm",), "actions": [
            {"action": "block", "params": {"reason": "rm is not allowed here"}, "rule": "no-rm"}]}),
        ("input", cloud, {"tier": "cloud", "fired": ("route-cloud",)}),
        ("turn_end", cloud, {"fired": (), "cost": 0.0105, "tokens": {"input": 1000, "output": 500}}),
    ]
    items = [record(seq, event=event, model=model, when=start + timedelta(minutes=seq), project=alpha,
                    **{k: v for k, v in extra.items()}) for seq, (event, model, extra) in enumerate(plan)]
    items.append(record(20, session="s-bbbb2222", event="input", model=cloud, fired=("notify-<b>",),
                        when=start + timedelta(minutes=30), project=beta, policy="sha256:22",
                        text=XSS + " please", tier="cloud",
                        signals={"judge": {"source": "fallback", "error": "timeout"}}))
    items.append(record(21, session="s-bbbb2222", event="turn_end", model=cloud, fired=(),
                        when=start + timedelta(minutes=31), project=beta, policy="sha256:22",
                        cost=0.021, tokens={"input": 2000, "output": 1000}))
    items[5]["latency_ms"] = 812.5
    return items


def write_corpus(tmp_path: Path) -> tuple[Path, Path]:
    directory = tmp_path / "log"
    write_log(directory, *records())
    models = tmp_path / "models.json"
    models.write_text(json.dumps(MODELS), encoding="utf-8")
    return directory, models


def test_report_page_counts_turns_tokens_and_cost_with_the_saving(tmp_path: Path, trap: Trap) -> None:
    directory, models = write_corpus(tmp_path)
    page = tmp_path / "report.html"
    done = router("report", "--html", str(page), "--log", str(directory), "--models", str(models),
                  "--title", "Team <router>")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {page} (3 turns, 12 decisions)"
    dom = dump_dom(page, trap, tmp_path / "profile")
    cells = parsed(dom)
    assert cells.headings == ["Summary", "Policy version", "Models", "Tiers", "Cost over time", "Per project",
                              "Per session", "Hits per rule", "Blocked tool calls", "Fallbacks and failures",
                              "Slowest decisions"]
    summary = cells.summary
    assert (summary["decisions"], summary["turns"], summary["sessions"], summary["projects"]) == \
        ("12", "3", "2", "2")
    assert summary["tokens"] == "6000"
    assert summary["cost"] == "$0.0315 [1 local (free), 2 recorded]"
    assert summary["baseline"] == "$0.0420"  # every turn's tokens on cloud/sonnet
    assert summary["saving"] == "$0.0105 (25%)"
    # shares by turns, tokens and cost, not by decisions (8 of the 12 name the local model)
    assert cells.rows[("data-model", "cloud/sonnet")] == ["cloud/sonnet", "2", "67%", "4500", "75%",
                                                           "$0.0315 [2 recorded]", "100%"]
    assert cells.rows[("data-model", "local/qwen-8b")][:5] == ["local/qwen-8b", "1", "33%", "1500", "25%"]
    assert cells.rows[("data-tier", "cloud")][:3] == ["cloud", "2", "67%"]
    assert cells.rows[("data-tier", "local")][:3] == ["local", "1", "33%"]
    assert cells.rows[("data-project", "alpha")] == ["alpha", "1", "2", "3000", "$0.0105 [1 local (free), "
                                                     "1 recorded]", "$0.0105 (50%)"]
    assert cells.rows[("data-project", "beta")][:3] == ["beta", "1", "1"]
    assert cells.rows[("data-session", "s-bbbb2222")][-1] == XSS + " please"  # shown as text
    assert cells.rows[("data-rule", "route-local")] == ["route-local", "1"]
    assert cells.rows[("data-rule", "notify-<b>")] == ["notify-<b>", "1"]
    assert ("data-rule", "try-cloud") not in cells.rows  # a shadow rule never counts as fired
    assert cells.rows[("data-shadow", "try-cloud")] == ["try-cloud", "1"]
    assert cells.rows[("data-blocked", "1")] == ["s-aaaa1111", "2026-12-01T10:07:00.000Z", "—", "no-rm",
                                                 "rm is not allowed here"]
    assert cells.rows[("data-failure", "signal fallback:judge")] == ["signal fallback", "judge", "1"]
    digests = [row[1] for key, row in cells.rows.items() if key[0] == "data-policy"]
    assert any(d.startswith("sha256:11 (10 decisions") for d in digests), digests
    assert cells.rows[("data-slow", "1")][:2] == ["2026-12-01T10:05:00.000Z", "s-aaaa1111"]
    assert "None" not in dom and "<script>" not in dom and "pwned" not in cells.title
    ticks = re.findall(r'class="ytick"[^>]*>([^<]*)<', dom)
    assert len(ticks) >= 4 and all(t.startswith("$") for t in ticks), ticks
    assert len(re.findall(r'class="xtick"', dom)) >= 4
    assert "cumulative cost (USD, $)" in dom and "time (UTC)" in dom
    assert trap.page_requests == [], "the page tried to reach the network"


def test_render_escapes_every_text_and_never_says_none() -> None:
    page = render(from_log([{"time": "2026-12-01T10:00:00.000Z", "session": "<s>", "event": "input", "seq": 0,
                             "rules": [{"id": "<script>alert(1)</script>", "fired": True}], "latency_ms": 2,
                             "model": "a\"b", "text": "<script>x</script>"},
                            {"session": "<s>", "event": "turn_end", "model": "a\"b"}],
                           Catalog(), None, "<x>"))
    assert "<script>" not in page and "&lt;script&gt;" in page and "<title>&lt;x&gt;</title>" in page
    assert "data-model=\"a&quot;b\"" in page and "None" not in page
    empty = render(from_log([], Catalog(), None, "empty"))
    assert "No rule fired." in empty and "No turn was answered." in empty and "None" not in empty


def test_the_trap_sees_a_page_that_loads_from_the_network(tmp_path: Path, trap: Trap) -> None:
    """The control: without the report's policy, an external image does reach the trap."""
    page = tmp_path / "leaky.html"
    page.write_text("<!DOCTYPE html><html><body><img src=\"http://example.invalid/x.png\"></body></html>")
    dump_dom(page, trap, tmp_path / "profile")
    assert trap.page_requests == ["example.invalid"], "the trap must see the page's request, or the "\
        "no-network check above would prove nothing"


def test_a_replay_report_shows_the_figures_the_text_replay_prints(tmp_path: Path, trap: Trap) -> None:
    page = tmp_path / "replay.html"
    done = router("replay", str(SESSIONS), "--policy", str(CUTTLE), "--html", str(page))
    assert done.returncode == 0, done.stderr
    cost = re.search(r"cost: estimated (\$[0-9.]+) \[4 local \(free\), 5 registry\]; .* all-cloud "
                     r"\(fake/cloud-pricey\) (\$[0-9.]+)", done.stdout)
    assert cost, done.stdout
    dom = dump_dom(page, trap, tmp_path / "profile")
    cells = parsed(dom)
    assert (cells.summary["sessions"], cells.summary["turns"]) == ("3", "9")
    assert cells.summary["cost"] == f"{cost[1]} [4 local (free), 5 registry]"
    assert cost[1] == "$0.000147"
    assert cells.summary["baseline"] == cost[2] == "$0.000540"
    assert cells.summary["saving"] == "$0.000393 (73%)"
    assert cells.rows[("data-tier", "cloud")][:3] == ["cloud", "5", "56%"]  # the text's `tiers:` line
    assert cells.rows[("data-tier", "local")][:3] == ["local", "4", "44%"]
    assert cells.rows[("data-model", "fake/cloud-pricey")][:2] == ["fake/cloud-pricey", "2"]
    assert cells.rows[("data-rule", "cu-route")] == ["cu-route", "3"]
    assert cells.rows[("data-project", "project")][:3] == ["project", "3", "9"]
    assert any(key[0] == "data-policy" and row[1].startswith("sha256:") for key, row in cells.rows.items())
    assert "None" not in dom
    assert trap.page_requests == [], "the page tried to reach the network"


def test_a_replay_counts_shadow_rules_apart(tmp_path: Path) -> None:
    policy = tmp_path / "shadow.yaml"
    policy.write_text("rules:\n  - id: watch-input\n    on: input\n    shadow: true\n"
                      "    do: [{notify: seen}]\n", encoding="utf-8")
    page = tmp_path / "replay.html"
    done = router("replay", str(SESSIONS), "--policy", str(policy), "--html", str(page))
    assert done.returncode == 0, done.stderr
    cells = parsed(page.read_text(encoding="utf-8"))
    assert ("data-rule", "watch-input") not in cells.rows
    assert cells.rows[("data-shadow", "watch-input")] == ["watch-input", "6"]


def test_a_diff_report_shows_the_changed_turns_and_the_new_cost(tmp_path: Path) -> None:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text("rules: []\n", encoding="utf-8")
    new.write_text("rules:\n  - id: all-local\n    on: input\n    do: [{model: fake/local-small}]\n",
                   encoding="utf-8")
    page = tmp_path / "diff.html"
    done = router("diff", str(old), str(new), "--sessions", str(SESSIONS), "--html", str(page))
    assert done.returncode == 1, done.stderr  # turns changed: router diff exits 1
    text = page.read_text(encoding="utf-8")
    cells = parsed(text)
    assert "Changed turns" in cells.headings and "None" not in text
    changes = [row for key, row in cells.rows.items() if key[0] == "data-change"]
    assert changes and all(row[2] == "model" and row[4] == "fake/local-small" for row in changes), changes
    assert cells.rows[("data-model", "fake/local-small")][1] == "9"
    assert cells.summary["cost"] == "$0.0000 [9 local (free)]"


def test_a_replay_report_that_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    done = router("replay", str(SESSIONS), "--html", str(tmp_path / "missing" / "r.html"))
    assert done.returncode == 1 and "error: cannot write" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_the_docs_show_a_screenshot_of_the_report_of_the_example_corpus() -> None:
    """docs/img/report.png is drawn by hand (python3 -m tests.report_screenshot): it is there, a PNG
    of a full page, and the docs show it."""
    shot = ROOT / "docs" / "img" / "report.png"
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert width >= 1000 and height >= 2000, (width, height)
    assert "](img/report.png)" in (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")


def test_the_page_stays_bounded_on_a_large_log() -> None:
    """150 sessions make 100 rows and a count of the rest; a 50 kB model name is cut."""
    huge = "m" * 50_000
    items = [{"session": f"s{n:04d}", "event": "turn_end", "model": huge if n == 0 else f"p/m{n % 3}",
              "cost": 0.01, "time": "2026-12-01T10:00:00Z"} for n in range(150)]
    page = render(from_log(items, Catalog(), None, "big"))
    cells = parsed(page)
    assert len([key for key in cells.rows if key[0] == "data-session"]) == 100
    assert "50 more rows not shown (at most 100)." in page
    assert huge not in page and "… [cut: 50,000 characters]" in page and len(page) < 200_000
