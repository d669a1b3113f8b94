"""`router update` moves releases: the newest version tag (version order; other tags are never
releases), `--to`, `--freeze`; the `use:` entry rewritten in place, the lock rewritten with the
dead entry dropped, and a report of the rules, vars and settings the release changes (and, with
`--sessions`, the decisions). Real git repositories on disk, the `router` CLI in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import Project, TeamRepo, make_project, make_repo
from tests.replay_sessions import SessionWriter, write_models

TEAM = """
version: 1
use: [./base.yaml]
vars:
  hard_word: {word}
rules:
  - id: local-otherwise
    on: input
    group: model
    do: [{{model: fake/local}}]
"""

BASE = """
version: 1
rules:
  - id: cloud-for-hard
    on: input
    group: model
    when: "vars.hard_word in text"
    do: [{model: fake/cloud}]
"""

POLICY = """\
# the project's policy
version: 1
use:
  - "{entry}"   # the team's rules
rules: []     # none of our own yet
"""


@pytest.fixture
def repo(tmp_path: Path) -> TeamRepo:
    """Tags v1 .. v10 in commit order, with `v9` released after `v10` was (a backport), and the
    tags `latest` and `v11-rc1` on a newer commit that is no release."""
    found = make_repo(tmp_path)
    found.write("base.yaml", BASE)
    for tag in ("v2", "v10", "v9"):
        found.write("team.yaml", TEAM.format(word=f"hard-{tag}"))
        found.commit(tag, tag=tag)
    found.write("team.yaml", TEAM.format(word="unreleased"))
    found.commit("work in progress", tag="latest")
    found.git("tag", "v11-rc1")
    return found


def project_at(tmp_path: Path, repo: TeamRepo, ref: str, name: str = "project") -> Project:
    project = make_project(tmp_path, name) if not (tmp_path / "home" / name).exists() else None
    assert project is not None
    project.policy(POLICY.format(entry=repo.source(ref)))
    done = project.router("lint")
    assert done.returncode == 0, done.stdout + done.stderr
    return project


def policy_text(project: Project) -> str:
    return (project.root / ".pi" / "router.yaml").read_text()


def test_a_tag_pin_moves_to_the_newest_release_in_version_order(tmp_path: Path, repo: TeamRepo) -> None:
    project = project_at(tmp_path, repo, "v2")
    old, new = repo.git("rev-parse", "v2"), repo.git("rev-parse", "v10")

    done = project.router("update")

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"git+{repo.url}@v2 -> @v10: {old[:7]} -> {new[:7]} (.pi/router.lock)"
    assert '  ~ var hard_word: "hard-v2" -> "hard-v10" (read by: cloud-for-hard)' in lines
    assert f"  .pi/router.yaml:4: use: {repo.source('v2')} -> {repo.source('v10')}" in lines
    assert f"dropped git+{repo.url}@v2 from .pi/router.lock (no policy file uses it)" in lines
    assert policy_text(project) == POLICY.format(entry=repo.source("v10"))  # comments and layout kept
    assert list(project.lock["sources"]) == [f"git+{repo.url}@v10"]  # type: ignore[call-overload]
    assert project.lock["sources"][f"git+{repo.url}@v10"]["commit"] == new  # type: ignore[index]
    again = project.router("update")
    assert again.stdout.strip() == f"git+{repo.url}@v10: up to date at {new[:7]} (.pi/router.lock)"


def test_a_commit_pin_stays_until_to_names_where_to_go(tmp_path: Path, repo: TeamRepo) -> None:
    commit = repo.git("rev-parse", "v2")
    project = project_at(tmp_path, repo, commit)

    stays = project.router("update")

    assert stays.returncode == 0, stays.stdout + stays.stderr
    assert f"pinned to commit {commit}: stays (`router update --to REF` moves it)" in stays.stdout
    assert policy_text(project) == POLICY.format(entry=repo.source(commit))
    moved = project.router("update", "--to", "v9")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert f"git+{repo.url}@{commit} -> @v9:" in moved.stdout
    assert policy_text(project) == POLICY.format(entry=repo.source("v9"))
    assert list(project.lock["sources"]) == [f"git+{repo.url}@v9"]  # type: ignore[call-overload]


def test_freeze_writes_the_commit_with_the_release_in_a_comment(tmp_path: Path, repo: TeamRepo) -> None:
    project = project_at(tmp_path, repo, "v2")
    v10 = repo.git("rev-parse", "v10")

    frozen = project.router("update", "--freeze")

    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    text = policy_text(project)
    assert f'  - "{repo.source(v10)}"   # the team\'s rules  # frozen: v10\n' in text
    assert list(project.lock["sources"]) == [f"git+{repo.url}@{v10}"]  # type: ignore[call-overload]
    current = project.router("update", "--freeze")
    assert "frozen at v10, the newest release: up to date" in current.stdout and policy_text(project) == text
    repo.write("team.yaml", TEAM.format(word="hard-v12"))
    v12 = repo.commit("v12", tag="v12")
    moved = project.router("update", "--freeze")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert '~ var hard_word: "hard-v10" -> "hard-v12"' in moved.stdout
    assert f'  - "{repo.source(v12)}"   # the team\'s rules  # frozen: v12\n' in policy_text(project)


def test_dry_run_shows_the_release_and_writes_nothing(tmp_path: Path, repo: TeamRepo) -> None:
    project = project_at(tmp_path, repo, "v2")
    lock = (project.root / ".pi" / "router.lock").read_bytes()
    before = policy_text(project)

    done = project.router("update", "--dry-run")

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"git+{repo.url}@v2 -> @v10:" in done.stdout and '~ var hard_word: "hard-v2"' in done.stdout
    assert "would lock" in done.stderr and done.stdout.rstrip().endswith(
        "dry run: no policy file or lock was written")
    assert (project.root / ".pi" / "router.lock").read_bytes() == lock and policy_text(project) == before


def test_to_needs_a_source_when_several_match(tmp_path: Path, repo: TeamRepo) -> None:
    other = make_repo(tmp_path / "other")
    project = make_project(tmp_path)
    project.policy(f'version: 1\nuse: ["{repo.source("v2")}", "{other.source("v1")}"]\n')
    assert project.router("lint").returncode == 0

    several = project.router("update", "--to", "v9")

    assert several.returncode == 2 and "--to moves one source, and several match" in several.stdout
    one = project.router("update", f"git+{repo.url}", "--to", "v9")
    assert one.returncode == 0, one.stdout + one.stderr
    assert (project.root / ".pi" / "router.yaml").read_text() == (
        f'version: 1\nuse: ["{repo.source("v9")}", "{other.source("v1")}"]\n')


def test_an_entry_it_cannot_rewrite_is_refused_and_nothing_is_written(tmp_path: Path, repo: TeamRepo) -> None:
    project = make_project(tmp_path)
    escaped = repo.source("v2").replace("#", "\\x23")  # the same entry, written with an escape
    project.policy(f'version: 1\nuse: ["{escaped}"]\n')
    assert project.router("lint").returncode == 0
    lock = (project.root / ".pi" / "router.lock").read_bytes()

    done = project.router("update")

    assert done.returncode == 1
    assert ".pi/router.yaml:2: the `use:` entry" in done.stdout and "edit it by hand" in done.stdout
    assert policy_text(project) == f'version: 1\nuse: ["{escaped}"]\n'
    assert (project.root / ".pi" / "router.lock").read_bytes() == lock


def test_sessions_show_the_decisions_the_release_changes(tmp_path: Path, repo: TeamRepo) -> None:
    repo.write("team.yaml", TEAM.format(word="notes"))
    repo.commit("notes are hard", tag="v20")
    project = project_at(tmp_path, repo, "v10")
    (SessionWriter(id="s1").start("fake/local")
     .user("read the notes").assistant("fake/local", "done")
     .user("a hard-v10 one").assistant("fake/cloud", "thought", cost=0.5)).write(project.root / "sessions")
    write_models(project.root / "models.json")

    done = project.router("update", "--sessions", "sessions", "--models", "models.json")

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "old: before the update" in out and "new: after the update" in out
    assert "1 sessions, 2 turns, 2 changed" in out
    assert "  model: fake/local -> fake/cloud" in out and "  model: fake/cloud -> fake/local" in out
    assert "delta +$0.000000 over 2 turns" not in out and "cost: old" in out


def test_a_refused_lock_is_moved_by_the_command_its_error_names(tmp_path: Path) -> None:
    from tests.load.test_gitsrc_confined import fork_commit, locked_at

    repo = make_repo(tmp_path)
    project, key = locked_at(tmp_path, repo, fork_commit(repo))
    refused = project.router("lint")
    assert refused.returncode == 1 and f"`router update {key} --to v1`" in refused.stdout

    done = project.router("update", key, "--to", "v1")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{key}: (refused) -> {repo.git('rev-parse', 'v1')[:7]} (.pi/router.lock)")
    assert project.lock["sources"][key]["commit"] == repo.git("rev-parse", "v1")  # type: ignore[index]
    assert project.router("lint").returncode == 0
