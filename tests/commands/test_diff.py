"""`router diff` reviews what a pull request ships: `REV:PATH` reads the tree at REV (relative
`use:` entries and the lock committed there), the markdown report names the rules and vars that
changed and the decisions that change, and the exit code says 0 unchanged, 1 changed, 2 no
comparison. Real git repositories on disk, the `router` CLI in a subprocess."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from router.commands.git_revision import read_revision
from tests.gitrepo import Project, TeamRepo, dedent, make_project, make_repo
from tests.replay_sessions import SessionWriter, write_models

TEAM = """
version: 1
use: [./base.yaml]
vars:
  hard_word: hard
rules:
  - id: local-otherwise
    on: input
    group: model
    do: [{model: fake/local}]
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


def sessions(where: Path) -> Path:
    """One session: an easy prompt on the local model, then a hard one on the cloud model."""
    (SessionWriter(id="s1").start("fake/local")
     .user("read the notes").assistant("fake/local", "done")
     .model("fake/cloud").user("a hard one", quick=True).assistant("fake/cloud", "thought", cost=0.5)
     ).write(where / "sessions")
    write_models(where / "models.json")
    return where / "sessions"


@pytest.fixture
def team(tmp_path: Path) -> TeamRepo:
    repo = make_repo(tmp_path)
    repo.write("team.yaml", TEAM)
    repo.write("base.yaml", BASE)
    repo.commit("hard words go to the cloud", tag="v2")
    sessions(repo.path)
    return repo


def diff(where: Project | TeamRepo, *args: str) -> tuple[int, str]:
    runner = where if isinstance(where, Project) else as_project(where)
    done = runner.router("diff", *args, "--sessions", "sessions", "--models", "models.json")
    return done.returncode, done.stdout + done.stderr


_RUNS = itertools.count()


def as_project(repo: TeamRepo) -> Project:
    """The `router` CLI run inside the team repository (its own home and cache)."""
    found = make_project(repo.path.parent, f"cli-{next(_RUNS)}")
    return Project(repo.path, found.home, found.env)


def test_a_multi_file_team_repository_compares_against_its_main_branch(team: TeamRepo) -> None:
    (team.path / "team.yaml").write_text(dedent(TEAM).replace("hard_word: hard", "hard_word: notes"))

    code, out = diff(team, "main:team.yaml", "team.yaml", "--format", "markdown")

    assert code == 1, out
    assert "does not compile" not in out and "file not found" not in out
    assert "| `hard_word` | `\"hard\"` | `\"notes\"` | `cloud-for-hard` |" in out
    assert "| `s1` | 1 | model | fake/local | fake/cloud |" in out
    assert "| `s1` | 2 | model | fake/cloud | fake/local |" in out
    assert "| session | turns changed | cost Δ |" in out and "| `s1` | 2 |" in out
    assert "rules: 0 added, 0 removed, 0 changed; vars: 1 changed" in out


def test_an_unchanged_tree_exits_0_and_says_so(team: TeamRepo) -> None:
    code, out = diff(team, "main:team.yaml", "team.yaml")
    assert code == 0, out
    assert "no turn changes" in out and "rules: 0 added, 0 removed, 0 changed; vars: 0 changed" in out


def test_rules_are_named_where_the_revision_has_them(team: TeamRepo) -> None:
    (team.path / "base.yaml").write_text(dedent(BASE).replace("id: cloud-for-hard", "id: cloud-when-hard"))

    code, out = diff(team, "main:team.yaml", "team.yaml", "--format", "json")

    body = json.loads(out[out.index("{"):])
    assert code == 1  # a rule fires under another name: how often each fires changed
    assert body["policy"]["added"] == [{"id": "cloud-when-hard", "where": "base.yaml:3"}]
    assert body["policy"]["removed"] == [{"id": "cloud-for-hard", "where": "main:base.yaml:3"}]
    assert body["policy"]["vars"] == [] and body["changed"] == 0


# One test per case (each a `router` run of its own), so that the workers share them.
UNREADABLE = {
    "does-not-compile": (("main:team.yaml", "broken.yaml"), "broken.yaml does not compile"),
    "no-such-revision": (("nope:team.yaml", "team.yaml"), "nope:team.yaml: no such revision 'nope'"),
    "no-file-at-revision": (("main:missing.yaml", "team.yaml"),
                            "main:missing.yaml: revision main has no file missing.yaml"),
    "no-such-file": (("missing.yaml", "team.yaml"), "missing.yaml: no such policy file"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_policy_that_does_not_compile_or_cannot_be_read_exits_2(team: TeamRepo, case: str) -> None:
    (team.path / "broken.yaml").write_text("version: 1\nrules: [{id: x, on: inptu, do: []}]\n")
    args, problem = UNREADABLE[case]
    code, out = diff(team, *args)
    assert (code, problem in out) == (2, True), out


@pytest.mark.parametrize("given", ["no-sessions-found", "no-sessions-given"])
def test_sessions_not_found_or_not_given_exit_2(team: TeamRepo, given: str) -> None:
    runner = as_project(team)
    if given == "no-sessions-found":
        none = runner.router("diff", "main:team.yaml", "team.yaml", "--sessions", "nowhere")
        assert none.returncode == 2 and "no Pi session files found in nowhere" in none.stdout
    else:
        usage = runner.router("diff", "main:team.yaml", "team.yaml")
        assert usage.returncode == 2 and "diff needs recorded sessions" in usage.stderr


def test_a_lock_bump_alone_shows_its_changed_decisions(tmp_path: Path, team: TeamRepo) -> None:
    """The old side reads the lock committed at HEAD, so a pull request that only moves the lock
    (the tag `v2` was moved and `router update` ran) shows what the new commit changes."""
    project = make_project(tmp_path)
    project.policy(f'version: 1\nuse: ["{team.source("v2")}"]\n')
    sessions(project.root)
    assert project.router("lint").returncode == 0
    repo = TeamRepo(project.root, {**team.env})
    repo.git("init", "-q", "-b", "main")
    repo.commit("the team policy at v2")
    team.write("team.yaml", TEAM.replace("hard_word: hard", "hard_word: notes"))
    team.commit("notes are hard", tag="v2")
    updated = project.router("update")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert repo.git("status", "--porcelain") == "M .pi/router.lock"  # the lock alone moved

    code, out = diff(project, "HEAD:.pi/router.yaml", ".pi/router.yaml", "--format", "markdown")

    assert code == 1, out
    assert "**2 changed**" in out and "| `hard_word` | `\"hard\"` | `\"notes\"` |" in out
    assert "Cost delta" in out


def test_git_paths_follow_git_relative_to_the_top_or_to_the_working_directory(team: TeamRepo) -> None:
    runner = as_project(team)
    (team.path / "sub").mkdir()
    inside = Project(team.path / "sub", runner.home, runner.env)
    done = inside.router("diff", "main:./../team.yaml", "../team.yaml", "--sessions", "../sessions")
    assert done.returncode == 0, done.stdout + done.stderr
    top = inside.router("diff", "main:team.yaml", "../team.yaml", "--sessions", "../sessions")
    assert top.returncode == 0, top.stdout + top.stderr
    outside = inside.router("diff", "main:../../x.yaml", "../team.yaml", "--sessions", "../sessions")
    assert outside.returncode == 2 and "is outside the repository" in outside.stdout


def test_help_documents_the_exit_codes(team: TeamRepo) -> None:
    done = as_project(team).router("diff", "--help")
    text = " ".join(done.stdout.split())
    assert "Exit 0: nothing changed; 1: a turn or how often a rule fires changed; 2: no comparison" in text


def test_only_policy_files_of_the_revision_are_read(team: TeamRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    (team.path / "big.bin").write_bytes(b"\0" * 1024)
    (team.path / "notes.txt").write_text("not a policy\n")
    (team.path / "docs").mkdir()
    (team.path / "docs" / "link.yaml").symlink_to("/etc/passwd")
    team.commit("other files")  # with the sessions and models.json the fixture wrote
    monkeypatch.chdir(team.path)

    revision = read_revision("HEAD:team.yaml", team.path.parent / "scratch")

    names = sorted(p.relative_to(revision.root).as_posix() for p in revision.root.rglob("*") if p.is_file())
    assert names == ["base.yaml", "models.json", "team.yaml"]  # no link, no other kind of file
    assert revision.label(revision.root / "base.yaml") == "HEAD:base.yaml"
    assert revision.label(team.path / "base.yaml") is None


def test_a_crafted_tree_naming_a_path_twice_is_an_error_not_a_crash(
        team: TeamRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from router.commands.git_revision import RevisionError

    def git(*args: str, stdin: str = "") -> str:
        return subprocess.run(["git", *args], cwd=team.path, env=team.env, input=stdin, capture_output=True,
                              text=True, timeout=60, check=True).stdout.strip()

    blob = git("hash-object", "-w", "--stdin", stdin="rules: []\n")
    inner = git("mktree", stdin=f"100644 blob {blob}\tx.yaml\n")
    tree = git("mktree", stdin=f"100644 blob {blob}\td.yaml\n040000 tree {inner}\td.yaml\n"
                               f"100644 blob {blob}\tteam.yaml\n")
    commit = git("commit-tree", tree, "-m", "a file and a directory of one name")
    monkeypatch.chdir(team.path)

    with pytest.raises(RevisionError, match="cannot write"):
        read_revision(f"{commit}:team.yaml", team.path.parent / "scratch")


MANAGED = """
version: 1
rules:
  - id: notes-stay-local
    locked: true
    on: input
    group: model
    when: "starts_with(text, 'read')"
    do: [{model: fake/local}]
"""


def test_both_sides_run_under_the_managed_layer_whose_locked_rules_no_side_changes(tmp_path: Path) -> None:
    """The managed policy binds the files below it in a diff as in Pi: its locked rule decides the
    first turn on both sides, the new side's `disable:` of it is dropped (RT609 on stderr), and the
    report names the managed policy; without the layer the same sides differ on that turn."""
    project = make_project(tmp_path)
    sessions(project.root)
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "router.yaml").write_text(dedent(MANAGED))
    old = project.root / "old.yaml"
    old.write_text(dedent(BASE) + "vars: {hard_word: hard}\n")
    new = project.root / "new.yaml"
    new.write_text(dedent(BASE).replace("vars.hard_word in text", "true") + "disable: [notes-stay-local]\n")

    held = project.router("diff", "old.yaml", "new.yaml", "--sessions", "sessions", "--models", "models.json",
                          "--format", "markdown", ROUTER_MANAGED_DIR=str(managed))
    alone = project.router("diff", "old.yaml", "new.yaml", "--sessions", "sessions",
                           "--models", "models.json")
    as_json = project.router("diff", "old.yaml", "new.yaml", "--sessions", "sessions", "--format", "json",
                             ROUTER_MANAGED_DIR=str(managed))

    assert held.returncode == 0, held.stdout + held.stderr  # the locked rule keeps turn 1 local
    assert "Both sides run under the managed policy `" in held.stdout
    assert "managed/router.yaml` (locked: notes-stay-local)." in held.stdout
    assert "disable 'notes-stay-local' of the file policy refused: it disables the locked rule" in held.stderr
    assert "[RT609]" in held.stderr
    assert alone.returncode == 1 and "model: fake/local -> fake/cloud" in alone.stdout, alone.stdout
    assert "managed" not in alone.stdout
    assert json.loads(as_json.stdout)["managed"]["locked"] == ["notes-stay-local"]
