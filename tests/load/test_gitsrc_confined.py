"""Git sources confined (issue 23, docs/security.md "Confinement: writes and git sources"): a lock
whose commit the named ref does not reach, a huge commit read as a stream against the cap, and
links in a fetched tree. Real repositories on disk served as git+file://, the `router` CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.load import git_cache
from router.load.git_cache import Cache, tree_dir
from router.load.git_spec import GitSourceError, GitSpec, parse
from tests.gitrepo import Project, TeamRepo, make_project, make_repo, zero_blob


@pytest.fixture
def repo(tmp_path: Path) -> TeamRepo:
    return make_repo(tmp_path)


def uses(project: Project, *entries: str) -> None:
    project.policy("version: 1\nuse:\n" + "".join(f'  - "{entry}"\n' for entry in entries))


# --- a lock pinning a commit the ref does not reach ------------------------------------------


def fork_commit(repo: TeamRepo) -> str:
    """A commit only `refs/pull/1/head` reaches, as a fork's pull request on a forge; the served
    repository lets a client fetch any object by its id, as GitHub does."""
    repo.git("checkout", "-q", "-b", "fork")
    repo.write("team.yaml", """
        version: 1
        rules:
          - {id: fork-rule, on: input, do: [{notify: "the fork's rules"}]}
    """)
    commit = repo.commit("the fork's rules")
    repo.git("update-ref", "refs/pull/1/head", commit)
    repo.git("checkout", "-q", "main")
    repo.git("branch", "-q", "-D", "fork")
    repo.git("config", "uploadpack.allowAnySHA1InWant", "true")
    return commit


def locked_at(tmp_path: Path, repo: TeamRepo, commit: str) -> tuple[Project, str]:
    """A project that uses the team repository at v1, with a committed lock pinning `commit`."""
    project = make_project(tmp_path)
    uses(project, repo.source())
    key = f"git+{repo.url}@v1"
    lock = {"version": 1, "sources": {key: {"url": repo.url, "ref": "v1", "commit": commit, "files": {}}}}
    (project.root / ".pi" / "router.lock").write_text(json.dumps(lock))
    return project, key


def test_a_committed_lock_pinning_a_forks_commit_under_a_tag_is_refused(tmp_path: Path,
                                                                          repo: TeamRepo) -> None:
    fork = fork_commit(repo)
    tag = repo.git("rev-parse", "v1")
    project, key = locked_at(tmp_path, repo, fork)

    done = project.router("lint")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "[RT125]" in done.stdout and "Traceback" not in done.stdout + done.stderr
    assert f"pins {key} at commit {fork[:12]}, which is not v1 ({tag[:12]}) nor reachable from it" \
        in done.stdout
    assert f"router update {key}" in done.stdout
    assert project.lock["sources"][key]["files"] == {}  # type: ignore[index]  # no hashes filled from it
    assert not tree_dir(parse(repo.source()), fork, project.cache).exists()
    explained = project.router("explain", "--event", "-", stdin='{"type": "input", "text": "hi"}')
    assert "fork-rule" not in explained.stdout


def test_an_older_commit_of_the_tags_history_stays_usable(tmp_path: Path, repo: TeamRepo) -> None:
    older = repo.git("rev-parse", "v1")
    repo.write("later.yaml", "version: 1\n")
    repo.commit("later", tag="v1")
    project, key = locked_at(tmp_path, repo, older)

    done = project.router("lint")

    assert done.returncode == 0, done.stdout + done.stderr
    assert set(project.lock["sources"][key]["files"]) == {"team.yaml", "base.yaml"}  # type: ignore[index]


def test_a_commit_named_after_at_must_be_on_a_branch_or_tag(tmp_path: Path, repo: TeamRepo) -> None:
    fork = fork_commit(repo)
    project = make_project(tmp_path)
    uses(project, repo.source())
    assert project.router("lint").returncode == 0  # the mirror now exists
    mirror = next(project.cache.glob("*/repo.git"))
    subprocess.run(["git", f"--git-dir={mirror}", "fetch", "-q", repo.url, fork], env=repo.env, check=True,
                   capture_output=True, timeout=60)  # the object is in the mirror
    uses(project, repo.source(ref=fork))

    done = project.router("lint")

    assert done.returncode == 1 and f"commit {fork[:12]} is on no branch or tag" in done.stdout, done.stdout


# --- a commit larger than the cap: never read whole --------------------------------------------

PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB: the largest of router and its gits
print(done.returncode)
print(done.stdout + done.stderr)
"""


def test_a_huge_commit_is_refused_with_memory_bounded(tmp_path: Path, repo: TeamRepo) -> None:
    """The issue's repository: 1.7 MB holding a 1.5 GB file of zeros (read whole: 3.1 GB of memory)."""
    zero_blob(repo, "zeros.bin", 1536 << 20)
    repo.git("commit", "-q", "-m", "a big file")
    repo.git("tag", "-f", "v1")
    project = make_project(tmp_path)
    uses(project, repo.source())

    run = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "router", "lint"],
                         cwd=project.root, env=project.env, capture_output=True, text=True, timeout=300,
                         check=True)
    peak_kib, code, output = run.stdout.split("\n", 2)

    assert int(code) == 1 and "the commit holds more than 64 MiB (1536 MiB of files" in output, output
    assert int(peak_kib) < 200 * 1024, f"peak {int(peak_kib) >> 10} MiB"
    assert list(project.cache.glob("*/trees/*")) == []


def test_the_stream_stops_git_at_the_cap_and_leaves_nothing(tmp_path: Path, repo: TeamRepo,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the sizes listed (a race, or a listing that lies), the streamed read still stops at the cap."""
    (repo.path / "big.bin").write_bytes(os.urandom(3 << 20))
    commit = repo.commit("three MiB", tag="v1")
    spec = GitSpec(repo.url, "v1", "team.yaml")
    cache = Cache(tmp_path / "cache")
    cache.fetch(spec)
    started: list[subprocess.Popen[bytes]] = []
    stream = cache.git.stream

    def recording(args: list[str]) -> subprocess.Popen[bytes]:
        started.append(stream(args))
        return started[-1]

    monkeypatch.setattr(git_cache, "MAX_ARCHIVE_BYTES", 1 << 20)
    monkeypatch.setattr(cache, "_check_sizes", lambda *args: None)
    monkeypatch.setattr(cache.git, "stream", recording)

    with pytest.raises(GitSourceError, match="more than 1 MiB"):
        cache.export(spec, commit)

    assert len(started) == 1 and started[0].returncode is not None  # stopped and reaped
    assert list((tmp_path / "cache").glob("*/trees/*")) == []  # no tree, no temporary directory


# --- links in a fetched tree -------------------------------------------------------------------


@pytest.fixture
def linked(repo: TeamRepo) -> TeamRepo:
    """The team repository with links: absolute, leaving the tree, and inside it (file and dir)."""
    (repo.path / "absolute.yaml").symlink_to("/etc/passwd")
    (repo.path / "outside.yaml").symlink_to("../../outside.yaml")
    (repo.path / "alias.yaml").symlink_to("team.yaml")
    (repo.path / "policies").mkdir()
    (repo.path / "policies" / "real.yaml").write_text("version: 1\n")
    (repo.path / "shortcut").symlink_to("policies")
    repo.commit("links", tag="v1")
    return repo


def test_unused_links_are_skipped_and_the_source_works(tmp_path: Path, linked: TeamRepo) -> None:
    project = make_project(tmp_path)
    uses(project, linked.source())

    done = project.router("lint")

    assert done.returncode == 0, done.stdout + done.stderr
    (tree,) = project.cache.glob("*/trees/*[0-9a-f]")
    assert sorted(p.name for p in tree.iterdir()) == ["base.yaml", "policies", "team.yaml"]
    assert not any(p.is_symlink() for p in tree.rglob("*"))
    assert json.loads(Path(f"{tree}.links").read_text()) == ["absolute.yaml", "alias.yaml", "outside.yaml",
                                                              "shortcut"]


@pytest.mark.parametrize("file", ["absolute.yaml", "outside.yaml", "alias.yaml", "shortcut/real.yaml"])
def test_a_link_the_policy_uses_is_refused_where_use_names_it(tmp_path: Path, linked: TeamRepo,
                                                              file: str) -> None:
    project = make_project(tmp_path)
    uses(project, linked.source(), linked.source(file=file))

    done = project.router("lint")

    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    (line,) = [text for text in done.stdout.splitlines() if "is a symbolic link" in text]
    assert line.startswith(".pi/router.yaml:4:5: error:") and "[RT125]" in line, line
    assert f"{file.split('/')[0]} is a symbolic link in commit" in line


def test_a_link_a_git_file_uses_is_refused_at_its_use_entry(tmp_path: Path, linked: TeamRepo) -> None:
    linked.write("team.yaml", "version: 1\nuse: [./base.yaml, ./alias.yaml]\n")
    commit = linked.commit("uses a link", tag="v1")
    project = make_project(tmp_path)
    uses(project, linked.source())

    done = project.router("lint")

    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [text for text in done.stdout.splitlines() if "is a symbolic link" in text]
    assert line.startswith(f"{linked.path}@{commit[:7]}:team.yaml:2:20: error:"), line
