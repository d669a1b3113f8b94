"""router.commands.use_entry: `use:` entries rewritten in place, every other byte kept, and a
file that cannot be parsed (or rewritten safely) refused and left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.commands.use_entry import Change, RewriteError, frozen_ref, rewrite

OLD = "git+https://git.example.com/acme/team.git@v1#team.yaml"
NEW = "git+https://git.example.com/acme/team.git@v2#team.yaml"
SHA = "git+https://git.example.com/acme/team.git@" + "a" * 40 + "#team.yaml"


def policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "router.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", [
    f"# team\nversion: 1\nuse:\n  - decision   # a pack\n  - \"{OLD}\"  # the team's\nvars: {{a: 1}}\n",
    f"version: 1\nuse: [decision, '{OLD}']   # both\n\n# rules below\nrules: []\n",
    f"version: 1\nuse:\n- {OLD}\n- cuttle\n",
    f"version: 1\r\nuse:\r\n  - \"{OLD}\"\r\n",
])
def test_only_the_entry_changes(tmp_path: Path, text: str) -> None:
    path = policy(tmp_path, text)
    new, edits = rewrite(path, [Change(OLD, NEW)])
    assert new == text.replace(OLD, NEW)
    assert [(e.old, e.new) for e in edits] == [(OLD, NEW)]
    assert path.read_bytes().decode() == text  # rewrite only computes; write() writes


def test_freezing_sets_the_comment_and_moving_on_drops_it(tmp_path: Path) -> None:
    path = policy(tmp_path, f"version: 1\nuse:\n  - \"{OLD}\"\nrules: []\n")
    frozen, [edit] = rewrite(path, [Change(OLD, SHA, frozen="v1")])
    assert frozen == f"version: 1\nuse:\n  - \"{SHA}\"  # frozen: v1\nrules: []\n" and edit.line == 3
    path.write_text(frozen)
    assert frozen_ref(path, SHA) == "v1"
    moved, _ = rewrite(path, [Change(SHA, NEW)])
    assert moved == f"version: 1\nuse:\n  - \"{NEW}\"\nrules: []\n"


@pytest.mark.parametrize(("text", "problem"), [
    ("version: 1\nuse: [\"a\"\n", "not valid YAML"),
    (f"version: 1\nuse: {OLD}\n", "`use:` is not a list"),
    ("version: 1\nuse:\n  - \"git+https://git.example.com/acme/team.git@v1\\x23team.yaml\"\n", ""),
    ("version: 1\nuse:\n  - \"git+https://git.example.com/acme/team.git@v1\\\n    #team.yaml\"\n",
     "is not written as one plain or quoted string"),
])
def test_what_cannot_be_rewritten_safely_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    path = policy(tmp_path, text)
    if problem:
        with pytest.raises(RewriteError, match=problem.replace("`", ".").replace("(", ".")):
            rewrite(path, [Change(OLD, NEW)])
    else:  # an escaped entry: not the entry as written, so nothing is edited
        with pytest.raises(RewriteError, match="edit it by hand"):
            rewrite(path, [Change(OLD, NEW)])
    assert path.read_text() == text


comment = st.text(st.characters(codec="ascii", categories=["L", "N", "Zs"], exclude_characters="#"),
                  max_size=20)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(comment, comment, st.integers(min_value=1, max_value=6))
def test_comments_and_indentation_around_the_entry_are_kept(tmp_path: Path, before: str, after: str,
                                                            indent: int) -> None:
    pad = " " * indent
    text = f"# {before}\nversion: 1\nuse:\n{pad}- decision\n{pad}- '{OLD}'  # {after}\n# end\n"
    path = policy(tmp_path, text)
    new, _ = rewrite(path, [Change(OLD, NEW)])
    assert new == text.replace(OLD, NEW)
