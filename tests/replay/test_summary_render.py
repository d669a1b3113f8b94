"""router.replay.summary_render: `router replay --summary`, totals only: sessions, turns, changed
turns, cost against the recorded and all-cloud cost with their price sources; failed sessions named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from router.commands import replay as command
from router.replay.runner import Replayer, SessionRun
from tests.replay_sessions import SessionWriter, write_models

POLICY = """
version: 1
rules:
  - id: local-always
    on: input
    do: [{model: fake/local}]
"""


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two sessions, each a turn on the cloud model and one on the local model, as recorded."""
    for name in ("a", "b"):
        (SessionWriter(id=name).start("fake/local").user("hello").assistant("fake/local")
         .model("fake/cloud").user("more", quick=True).assistant("fake/cloud", cost=0.5)
         .write(tmp_path / "sessions"))
    write_models(tmp_path / "models.json")
    (tmp_path / "policy.yaml").write_text(POLICY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def summary(corpus: Path, fmt: str) -> tuple[int, str]:
    options = command.Options([corpus / "sessions"], log=corpus / "nolog", models=corpus / "models.json",
                              progress=False, summary=True, baseline="fake/cloud")
    return command.run(options, policy_files=[corpus / "policy.yaml"], fmt=fmt)


def test_summary_text_has_totals_changes_and_cost_without_per_session_rows(corpus: Path) -> None:
    code, text = summary(corpus, "text")
    assert code == 0
    lines = text.splitlines()
    assert "sessions: 2 (0 failed); events: " in text and "; turns: 4" in text
    assert "turns whose model changes: 2 of 4 (50.0%)" in lines
    assert "models: fake/local 4 (100%)" in lines
    # each turn 1000 in + 100 out: $0.0045 at the cloud model's $3/$15 per million, $0 locally
    assert "cost: estimated $0.0000 [4 local (free)]; recorded $1.0000 [2 local (free), 2 registry]" in lines
    assert "all-cloud: (fake/cloud) $0.0180" in lines
    assert "saving against all-cloud: $0.0180 (100.0%)" in lines
    assert not any(line.startswith("session ") for line in lines)  # no per-session rows


def test_summary_json_has_the_same_totals(corpus: Path) -> None:
    code, text = summary(corpus, "json")
    body = json.loads(text)
    assert code == 0 and "per_session" not in body
    assert (body["sessions"], body["turns"], body["changed_turns"]) == (2, 4, 2)
    assert body["cost"]["estimated"]["priced_by"] == {"local": 4}
    assert body["cost"]["baseline"]["usd"] == 0.018 and body["saving"] == 0.018
    assert body["failed_sessions"] == []


def test_a_failed_session_is_named_and_sets_the_exit_code(corpus: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    original = Replayer.run

    def run(self: Replayer, session: Any) -> SessionRun:
        if session.id == "b":
            raise RuntimeError("cannot")
        return original(self, session)

    monkeypatch.setattr(Replayer, "run", run)
    code, text = summary(corpus, "text")
    assert code == 1
    assert "sessions: 2 (1 failed)" in text
    assert "\nfailed sessions (1):\n  sessions/2026-01-01T10-00-00-000Z_b.jsonl: replay failed: " \
        "RuntimeError: cannot\n" in text
    assert "saving against all-cloud: $0.009000 (100.0%)" in text  # over the turns replayed
    code, body = summary(corpus, "json")
    assert code == 1
    assert json.loads(body)["failed_sessions"][0]["error"] == "replay failed: RuntimeError: cannot"

