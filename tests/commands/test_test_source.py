"""`router test git+<url>@<ref>#<file>` (router/commands/test_source.py): a real repository with
two tags served as git+file:// (and as https through the user's `url.*.insteadOf`), the `router`
CLI in a directory that is not a project, its cache isolated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.gitrepo import Project, TeamRepo, make_project, make_repo

TESTS = """
cases:
  - name: a review gets read only
    event: {type: input, text: review}
    expect: {fired: [team-read-only]}
"""

V2 = """
version: 1
use: [./base.yaml]
rules:
  - id: team-read-only
    on: input
    when: "text == 'review'"
    do:
      - tools: {only: [read]}
  - id: team-careful-deploys
    on: input
    when: "contains(text, 'deploy')"
    do: [{notify: "deploys go through the release checklist"}]
"""


@pytest.fixture
def repo(tmp_path: Path) -> TeamRepo:
    found = make_repo(tmp_path)  # v1: team.yaml (team-read-only) uses base.yaml (team-no-force-push)
    found.write("team.test.yaml", TESTS)
    found.write("other.test.yaml", "policy: base.yaml\ncases: []\n")  # tests another policy
    found.commit("tests", tag="v1")
    found.write("team.yaml", V2)
    found.commit("careful deploys", tag="v2")
    return found


@pytest.fixture
def ci(tmp_path: Path) -> Project:
    """A CI job's directory: no policy of its own."""
    return make_project(tmp_path, "ci")


def test_a_tag_of_a_git_source_is_tested_with_its_own_tests_and_coverage(repo: TeamRepo, ci: Project) -> None:
    done = ci.router("test", repo.source("v2"), "--coverage")

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["team.test.yaml:2: a review gets read only: PASS", "PASS: 1/1", "FAIL: 0/1"]
    assert lines[3:6] == ["coverage: 1/3 rules (33%)", "  base.yaml: 0/1 (0%)", "  team.yaml: 1/2 (50%)"]
    assert lines[6:] == ["rules no test exercised:", "  team-no-force-push (base.yaml:3)",
                         "  team-careful-deploys (team.yaml:9)"]
    commit = repo.git("rev-parse", "v2")
    assert f"source: git+{repo.url}@v2 is commit {commit[:12]} of {repo.path}" in done.stderr
    assert "tests: team.test.yaml against team.yaml (+ base.yaml via use:)" in done.stderr
    assert "other.test.yaml" not in done.stderr + done.stdout
    assert not list(ci.root.rglob("router.lock")) and (ci.cache / "").is_dir()
    assert not list(ci.cache.rglob("router.lock")), "the cache's tree is tested in a copy, never written"


def test_min_coverage_gates_a_release(repo: TeamRepo, ci: Project) -> None:
    v1 = ci.router("test", repo.source("v1"), "--min-coverage", "50")
    v2 = ci.router("test", repo.source("v2"), "--min-coverage", "50")

    assert v1.returncode == 0, v1.stdout + v1.stderr
    assert "coverage: 1/2 rules (50%)" in v1.stdout
    assert v2.returncode == 1
    assert v2.stdout.splitlines()[-1] == "error: rule coverage 1/3 (33.3%) is below --min-coverage 50%"


def test_the_https_form_goes_through_the_users_gitconfig(repo: TeamRepo, ci: Project, tmp_path: Path) -> None:
    system = tmp_path / "gitconfig"
    system.write_text(f'[url "{repo.url}"]\n\tinsteadOf = https://git.corp.test/team-policies\n')

    done = ci.router("test", "git+https://git.corp.test/team-policies@v2#team.yaml",
                     GIT_CONFIG_SYSTEM=str(system))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "source: git+https://git.corp.test/team-policies@v2 is commit" in done.stderr
    assert "team.test.yaml:2: a review gets read only: PASS" in done.stdout


def test_offline_the_cached_copy_is_tested_with_a_warning(repo: TeamRepo, ci: Project) -> None:
    assert ci.router("test", repo.source("v2")).returncode == 0
    shutil.rmtree(repo.path)

    offline = ci.router("test", repo.source("v2"))

    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "does not appear to be a git repository" in offline.stderr
    assert "testing the cached copy of v2" in offline.stderr
    assert "team.test.yaml:2: a review gets read only: PASS" in offline.stdout


def test_a_source_that_cannot_be_read_fails_with_gits_message(ci: Project, tmp_path: Path) -> None:
    missing = ci.router("test", f"git+file://{tmp_path}/nowhere@v1#team.yaml")
    no_file = ci.router("test", f"git+file://{tmp_path}/nowhere@v1#team.txt")

    assert missing.returncode == 1 and "[RT125]" in missing.stdout
    assert "does not appear to be a git repository" in " ".join(missing.stdout.split())
    assert no_file.returncode == 1 and "is not a .yaml file of the repository" in no_file.stdout


def test_a_file_the_commit_lacks_is_named(repo: TeamRepo, ci: Project) -> None:
    done = ci.router("test", repo.source("v2", "policies/none.yaml"))
    assert done.returncode == 1 and "has no file policies/none.yaml" in done.stdout


def test_a_source_with_other_paths_is_a_usage_mistake(repo: TeamRepo, ci: Project) -> None:
    done = ci.router("test", repo.source("v2"), "team.test.yaml")
    assert done.returncode == 2 and "router test takes one git source, alone" in done.stderr


@pytest.mark.parametrize("entry", ["{outside}", "../../../../../../..{outside}"])
def test_a_fetched_policy_never_uses_a_file_outside_its_copy(repo: TeamRepo, ci: Project, tmp_path: Path,
                                                             entry: str) -> None:
    outside = tmp_path / "private" / "mine.yaml"
    outside.parent.mkdir()
    outside.write_text("rules:\n  - id: private-rule\n    on: input\n    do: [{notify: secret}]\n")
    repo.write("team.yaml", f"use: ['{entry.format(outside=outside)}']\nrules: []\n")
    repo.commit("reach out", tag="v3")

    done = ci.router("test", repo.source("v3"))

    assert done.returncode == 1, done.stdout + done.stderr
    assert "private-rule" not in done.stdout + done.stderr
    assert "refused" in done.stdout
