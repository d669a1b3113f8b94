"""router.commands.eval_: a `vars.` or `signals.` key the policy lacks fails with the closest one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.commands.eval_ import run
from router.diagnostics.code_names import UNDEFINED_SIGNAL, UNDEFINED_VAR


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user policy that defines `vars.hard_words`; an isolated home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "router.yaml").write_text("version: 1\nvars:\n  hard_words: [refactor]\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "e.json").write_text(json.dumps({"type": "input", "text": "refactor it"}))
    return work


@pytest.mark.parametrize("jmespath", [False, True])
def test_a_misspelt_var_gets_did_you_mean(project: Path, jmespath: bool) -> None:
    source = "vars.hard_word" if jmespath else "count_keywords(text, vars.hard_word) > 0"
    code, text = run(source, "e.json", jmespath=jmespath, state=None)
    assert code == 1
    assert f"error: undefined var 'vars.hard_word' [{UNDEFINED_VAR}]" in text
    assert "help: did you mean 'hard_words'?" in text
    column = source.find("vars.hard_word") + 1
    assert text.startswith(f"<expr>:1:{column}:"), text


def test_a_defined_var_still_evaluates(project: Path) -> None:
    done = run("count_keywords(text, vars.hard_words) > 0", "e.json", jmespath=False, state=None)
    assert done == (0, "true")


def test_an_unknown_signal_lists_what_there_is(project: Path) -> None:
    code, text = run("signals.nothing_like_it", "e.json", jmespath=False, state=None)
    assert code == 1 and f"[{UNDEFINED_SIGNAL}]" in text and "help: the policy defines: none" in text
