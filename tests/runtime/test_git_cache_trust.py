"""A real `router serve` on a trusted project whose git source's cache entry is missing or was
changed: the hello's warning and status name that cause and the command that fixes it, never
`router trust` (the content the user trusted did not change)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router.runtime import protocol
from tests.gitrepo import Project, TeamRepo, make_project, make_repo
from tests.runtime.test_server import ROOT, Reader


@pytest.fixture
def trusted(tmp_path: Path) -> tuple[TeamRepo, Project]:
    """A project using the team repository's `@v1`, locked and trusted by the CLI."""
    repo = make_repo(tmp_path)
    project = make_project(tmp_path)
    project.policy(f'version: 1\nuse: ["{repo.source()}"]\n')
    done = project.router("trust", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    return repo, project


def hello(project: Project) -> dict[str, Any]:
    """The hello answer of a real sidecar started in the project (then shut down)."""
    argv = [sys.executable, "-m", "router", "serve", "--cwd", str(project.root), "--agent-dir",
            str(project.agent)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env=project.env) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)
        try:
            process.stdin.write(protocol.encode({"id": 1, "method": "hello",
                                                 "params": {"cwd": str(project.root)}}))
            process.stdin.flush()
            answer = reader.answer()
            process.stdin.write(protocol.encode({"id": 2, "method": "shutdown", "params": {}}))
            process.stdin.flush()
            assert reader.message() == {"id": 2, "result": {}}
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    result = answer["result"]
    assert isinstance(result, dict)
    return result


def project_warning(answer: dict[str, Any], project: Project) -> str:
    [warning] = [w for w in answer["warnings"] if str(project.root / ".pi" / "router.yaml") in w]
    assert isinstance(warning, str)
    return warning


def test_a_tampered_cache_entry_names_the_file_the_lock_and_the_fix_not_trust(
        trusted: tuple[TeamRepo, Project]) -> None:
    repo, project = trusted
    [cached] = project.cache.glob("*/trees/*/base.yaml")
    cached.write_text(cached.read_text().replace("not allowed", "fine"))

    answer = hello(project)

    assert answer["trust"]["state"] == "changed"
    warning = project_warning(answer, project)
    assert f"the cached copy of base.yaml of git+{repo.url}@v1 (commit {repo.git('rev-parse', 'v1')[:7]})" \
        in warning
    assert f"does not match {project.root / '.pi' / 'router.lock'}" in warning
    assert f"delete {cached.parent}" in warning and "`router lint`" in warning
    assert "router trust" not in warning and "changed since you trusted it" not in warning
    assert answer["trust"]["status"] == "router: project policy off (git cache does not match the lock)"
    listed = project.router("trust", "--list")
    assert "does not match the lock" in listed.stdout and "changed since trusted" not in listed.stdout


def test_a_missing_cache_entry_names_the_source_and_the_fetch_not_trust(
        trusted: tuple[TeamRepo, Project]) -> None:
    repo, project = trusted
    shutil.rmtree(project.cache)

    answer = hello(project)

    warning = project_warning(answer, project)
    commit = repo.git("rev-parse", "v1")[:7]
    assert f"git+{repo.url}@v1 (commit {commit}) is not in this machine's git cache" in warning
    assert "`router lint`" in warning and "router trust" not in warning
    assert answer["trust"]["status"] == "router: project policy off (run router lint)"
    assert not project.cache.exists()  # the sidecar never fetches


@pytest.mark.parametrize("cache", ["tampered", "missing"])
def test_an_edited_policy_with_a_broken_cache_still_asks_for_trust(
        trusted: tuple[TeamRepo, Project], cache: str) -> None:
    """The cache's state explains a refusal only when the rest is the content the user trusted."""
    _, project = trusted
    [cached] = project.cache.glob("*/trees/*/base.yaml")
    if cache == "tampered":
        cached.write_text(cached.read_text() + "# edited\n")
    else:
        shutil.rmtree(project.cache)
    policy = project.root / ".pi" / "router.yaml"
    policy.write_text(policy.read_text() + "# edited too\n")

    warning = project_warning(hello(project), project)

    assert "changed since you trusted it" in warning and "router trust" in warning
