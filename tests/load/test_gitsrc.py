"""Git sources in `use:` end to end: a real repository served as git+file://, the `router` CLI.

Pinning, offline use, a moved tag ignored until `router update`, a tampered cache refused, the
sidecar that never fetches, provenance, trust over the locked content, and the entry's checks.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from router.load.git_spec import GitSourceError, parse, redact
from router.runtime.project_content import read_project_content
from router.runtime.session_policy import load_session_policy
from router.trust.store import TrustStore, decide
from tests.gitrepo import Project, TeamRepo, make_project, make_repo

REVIEW = '{"type": "input", "text": "review"}'


@pytest.fixture
def repo(tmp_path: Path) -> TeamRepo:
    return make_repo(tmp_path)


@pytest.fixture
def project(tmp_path: Path, repo: TeamRepo) -> Project:
    found = make_project(tmp_path)
    found.policy(f"""
        version: 1
        use: ["{repo.source()}"]
    """)
    return found


def explain(project: Project, event: str = REVIEW) -> str:
    done = project.router("explain", "--event", "-", stdin=event)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_first_lint_fetches_and_pins_the_tag_with_each_file_digest(
        repo: TeamRepo, project: Project) -> None:
    done = project.router("lint")

    assert done.returncode == 0, done.stdout + done.stderr
    commit = repo.git("rev-parse", "v1")
    entry = project.lock["sources"][f"git+{repo.url}@v1"]  # type: ignore[index]
    assert entry["commit"] == commit and entry["ref"] == "v1"
    assert entry["files"] == {name: hashlib.sha256((repo.path / name).read_bytes()).hexdigest()
                              for name in ("team.yaml", "base.yaml")}
    assert f"locked git+{repo.url}@v1 at {commit[:7]} in .pi/router.lock" in done.stderr


def test_lint_test_and_explain_work_offline_after_the_origin_is_deleted(
        repo: TeamRepo, project: Project) -> None:
    assert project.router("lint").returncode == 0
    short = repo.git("rev-parse", "--short=7", "v1")
    shutil.rmtree(repo.path)

    lint = project.router("lint")
    explained = explain(project)
    tested = project.router("test", "--format", "json")

    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "fetching" not in lint.stderr
    assert f"{repo.path}@{short}:team.yaml:4  [project] rule team-read-only: enter" in explained
    assert "set active tools (only): [\"read\"]" in explained
    assert tested.returncode == 1 and json.loads(tested.stdout)["diagnostics"] == []  # no tests, no errors


def test_a_moved_tag_changes_nothing_until_router_update_shows_what_changed(
        repo: TeamRepo, project: Project) -> None:
    assert project.router("lint").returncode == 0
    first = repo.git("rev-parse", "v1")
    repo.write("team.yaml", """
        version: 1
        use: [./base.yaml]
        rules:
          - id: team-read-only
            on: input
            when: "text == 'review'"
            do:
              - tools: {only: [read, grep]}
          - id: team-new
            on: input
            when: "text == 'new'"
            do: [{notify: new}]
    """)
    (repo.path / "base.yaml").write_text("version: 1\n")
    second = repo.commit("v1 moved", tag="v1")

    assert project.router("lint").returncode == 0
    assert project.lock["sources"][f"git+{repo.url}@v1"]["commit"] == first  # type: ignore[index]
    assert '["read"]' in explain(project)

    updated = project.router("update")

    assert updated.returncode == 0, updated.stderr
    lines = updated.stdout.splitlines()
    assert lines[0] == f"git+{repo.url}@v1: {first[:7]} -> {second[:7]} (.pi/router.lock)"
    assert f"  + rule team-new ({repo.path}@{second[:7]}:team.yaml:9)" in lines
    assert f"  ~ rule team-read-only ({repo.path}@{second[:7]}:team.yaml:4)" in lines
    assert f"  - rule team-no-force-push (was {repo.path}@{first[:7]}:base.yaml:3)" in lines
    entry = project.lock["sources"][f"git+{repo.url}@v1"]  # type: ignore[index]
    assert entry["commit"] == second and set(entry["files"]) == {"team.yaml", "base.yaml"}
    assert '["read", "grep"]' in explain(project)
    again = project.router("update", f"git+{repo.url}")
    assert again.stdout.strip() == f"git+{repo.url}@v1: up to date at {second[:7]} (.pi/router.lock)"
    unknown = project.router("update", "git+https://example.test/other.git")
    assert unknown.returncode == 1 and f"git+{repo.url}@v1" in unknown.stdout


def test_a_tampered_cache_is_refused_naming_the_source_and_the_file(repo: TeamRepo, project: Project) -> None:
    assert project.router("lint").returncode == 0
    (cached,) = project.cache.glob("*/trees/*/base.yaml")
    cached.write_text(cached.read_text().replace("force pushes are not allowed", "fine"))

    done = project.router("lint")

    assert done.returncode == 1
    assert "[RT126]" in done.stdout
    assert f"the cached base.yaml of git+{repo.url}@v1" in done.stdout and "does not match" in done.stdout
    policy = load_session_policy(project.root, project.agent, records={}, approved=None)
    assert policy.policy is not None and "team-no-force-push" not in [r.id for r in policy.policy.rules]


def test_the_sidecar_never_fetches_a_missing_entry_is_a_refusal_naming_the_command(
        repo: TeamRepo, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    assert project.router("lint").returncode == 0
    shutil.rmtree(project.cache)
    monkeypatch.setenv("XDG_CACHE_HOME", project.env["XDG_CACHE_HOME"])
    content, _ = read_project_content(project.root, project.agent)
    assert content is not None

    loaded = load_session_policy(project.root, project.agent, records={}, approved=content.digest)

    assert loaded.policy is not None
    (refusal,) = [r for r in loaded.policy.refused if r.code == "RT125"]
    assert "is not in the cache; the sidecar never fetches" in refusal.reason
    assert "router lint" in (refusal.help or "")
    assert not project.cache.exists()


def test_trust_covers_the_locked_content_and_an_update_asks_for_it_again(
        repo: TeamRepo, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", project.env["XDG_CACHE_HOME"])
    trusted = project.router("trust", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert f"git+{repo.url}@v1@{repo.git('rev-parse', 'v1')}:team.yaml" in trusted.stdout
    store = TrustStore(project.agent)
    content, _ = read_project_content(project.root, project.agent)
    assert decide(content, project.root, store.projects()).state == "trusted"

    repo.write("team.yaml", "version: 1\n")
    repo.commit("v1 moved", tag="v1")
    assert "router trust" in project.router("update").stdout

    moved, _ = read_project_content(project.root, project.agent)
    assert decide(moved, project.root, store.projects()).state == "changed"


def test_a_git_file_uses_only_files_of_its_own_commit(repo: TeamRepo, project: Project) -> None:
    repo.write("team.yaml", "version: 1\nuse: [../outside.yaml]\n")
    (repo.path.parent / "outside.yaml").write_text("version: 1\n")
    repo.commit("reach out", tag="v1")

    done = project.router("lint")

    assert done.returncode == 1 and "[RT125]" in done.stdout and "is outside the repository" in done.stdout


@pytest.mark.parametrize(("entry", "problem"), [
    ("git+https://example.test/a.git@-oProxyCommand=x#p.yaml", "is not a tag, branch or commit name"),
    ("git+ssh://-oProxyCommand=x/a.git@v1#p.yaml", "not a plain URL"),
    ("git+ext::sh -c x@v1#p.yaml", "is not one of https, ssh, file"),
    ("git+https://example.test/a.git@v1", "names no file"),
    ("git+https://example.test/a.git@v1#../p.yaml", "is not a .yaml file of the repository"),
    ("git+https://example.test/a.git@v1#p.sh", "is not a .yaml file of the repository"),
    ("git+file://host/a.git@v1#p.yaml", "file:///absolute/path"),
])
def test_option_like_or_malformed_entries_are_refused(entry: str, problem: str) -> None:
    with pytest.raises(GitSourceError) as info:
        parse(entry)
    assert problem in info.value.message


def test_entries_parse_into_url_ref_and_path() -> None:
    spec = parse("git+ssh://git@example.test/acme/policies.git@release/2.0#team/base.yaml")
    assert (spec.url, spec.ref, spec.path) == ("ssh://git@example.test/acme/policies.git", "release/2.0",
                                               "team/base.yaml")
    assert spec.repo == "example.test/acme/policies"
    assert parse("git+https://example.test/p.git#x.yaml").ref is None


def test_credentials_never_reach_the_lock_or_an_error(tmp_path: Path) -> None:
    assert redact("https://user:s3cret@example.test/p.git") == "https://***@example.test/p.git"
    assert redact("https://ghp_TOKEN@example.test/p.git") == "https://***@example.test/p.git"
    assert redact("ssh://git@example.test/p.git") == "ssh://git@example.test/p.git"
    project = make_project(tmp_path)
    project.policy('version: 1\nuse: ["git+https://user:s3cret@127.0.0.1:9/p.git@v1#p.yaml"]\n')

    done = project.router("lint")

    assert done.returncode == 1 and "[RT125]" in done.stdout
    said = [line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("  | ")]
    assert "s3cret" not in "\n".join(said)  # only the quoted line of the user's own file holds it
    assert not (project.root / ".pi" / "router.lock").exists()
