"""router.compile.policy_changes: what two sets of policy files differ in, and which rules read
each changed var (directly, or through a signal)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from router.compile.policy_changes import compare, render_lines, render_markdown, snapshot
from router.load.loader import PolicyFile, load_layers

OLD = """
version: 1
vars: {hard_words: [design], big_model: fake/cloud, unused: 1}
signals:
  hard: {expr: "count_keywords(text, vars.hard_words)"}
defaults:
  notify: {level: info}
rules:
  - id: by-signal
    on: input
    when: "signals.hard > 0"
    do: [{model: "{vars.big_model}"}]
  - id: direct
    on: input
    when: "vars['hard_words'] != []"
    do: [{notify: x}]
  - id: gone
    on: input
    do: [{notify: y}]
"""


def files(tmp_path: Path, name: str, text: str) -> list[PolicyFile]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    loaded, diagnostics = load_layers([("file", path)])
    assert not [d for d in diagnostics if d.severity.name == "ERROR"], diagnostics
    return loaded


def test_rules_vars_and_settings_that_changed_with_the_readers_of_each_var(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    new_text = (OLD.replace("[design]", "[design, parser]").replace("unused: 1", "unused: 2")
                .replace("level: info", "level: warning").replace("do: [{notify: x}]", "do: [{notify: z}]")
                .replace("  - id: gone\n    on: input\n    do: [{notify: y}]\n",
                         "  - id: added\n    on: turn_end\n    do: [{notify: a}]\n"))
    old = snapshot(files(tmp_path, "old.yaml", OLD))
    new = snapshot(files(tmp_path, "new.yaml", new_text))

    changes = compare(old, new)

    assert changes.added == [("added", "new.yaml:16")] and changes.removed == [("gone", "old.yaml:16")]
    assert changes.changed == [("direct", "new.yaml:12")]
    assert [(v.name, v.old, v.new, v.readers) for v in changes.vars] == [
        ("hard_words", ["design"], ["design", "parser"], ("by-signal", "direct")),
        ("unused", 1, 2, ())]
    assert [(s.name, s.old, s.new) for s in changes.settings] == [
        ("defaults.notify", {"level": "info"}, {"level": "warning"})]
    lines = render_lines(changes)
    assert '  ~ var hard_words: ["design"] -> ["design", "parser"] (read by: by-signal, direct)' in lines
    assert "  ~ var unused: 1 -> 2 (read by no rule)" in lines and "  - rule gone (was old.yaml:16)" in lines
    table = "\n".join(render_markdown(changes))
    assert '| `hard_words` | `["design"]` | `["design", "parser"]` | `by-signal`, `direct` |' in table
    assert "| `added` | added | `new.yaml:16` |" in table


def test_the_same_files_change_nothing(tmp_path: Path) -> None:
    same = snapshot(files(tmp_path, "a.yaml", OLD))
    changes = compare(same, same)
    assert changes.empty and render_lines(changes) == [] and render_markdown(changes) == []
    assert changes.counts() == "rules: 0 added, 0 removed, 0 changed; vars: 0 changed; settings: 0 changed"
