"""Git as people have it set up (router/load/git_env.py): the environment and gitconfig an https
fetch needs reach the router's git, what would redirect or endanger it does not, and git's own
error message reaches the user whole. A wrapper first on PATH records what the real git is given."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.load.git_env import BATCH_SSH, MAX_CHARS, git_env, git_message
from tests.gitrepo import Project, TeamRepo, dedent, make_project, make_repo

WRAPPER = """\
#!{python}
import json, os, sys
with open(os.environ["FAKE_GIT_RECORD"], "a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}}) + "\\n")
fail = os.environ.get("FAKE_GIT_FAIL")
if fail and "fetch" in sys.argv:
    sys.stderr.write(fail)
    sys.exit(128)
os.execv({git!r}, [{git!r}, *sys.argv[1:]])
"""

USER_ENV = {
    "GIT_SSL_CAINFO": "/etc/corp/ca.pem", "GIT_SSL_CAPATH": "/etc/corp/certs",
    "SSL_CERT_FILE": "/etc/corp/ca.pem", "SSL_CERT_DIR": "/etc/corp/certs",
    "HTTPS_PROXY": "http://proxy.corp.test:3128", "https_proxy": "http://proxy.corp.test:3128",
    "NO_PROXY": "localhost", "ALL_PROXY": "socks5://proxy.corp.test",
    "GIT_DIR": "/nonexistent/hook/repo.git", "GIT_INDEX_FILE": "/nonexistent/index", "GIT_TRACE": "1",
    "GIT_CONFIG_PARAMETERS": "'core.hookspath'='/tmp/evil'", "GIT_SSL_NO_VERIFY": "1",
    "GIT_ASKPASS": "/usr/bin/ksshaskpass", "GIT_TERMINAL_PROMPT": "1",
}


# --- the environment, as a function -------------------------------------------------------------


def test_the_environment_keeps_what_a_fetch_needs_and_drops_what_redirects_git() -> None:
    env = git_env({**USER_ENV, "HOME": "/home/u", "PATH": "/usr/bin"}, ssh_configured=False)

    for name in ("GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY",
                 "https_proxy", "NO_PROXY", "ALL_PROXY", "HOME", "PATH"):
        assert env[name] == {**USER_ENV, "HOME": "/home/u", "PATH": "/usr/bin"}[name], name
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_TRACE", "GIT_CONFIG_PARAMETERS", "GIT_SSL_NO_VERIFY",
                 "GIT_CONFIG_NOSYSTEM"):
        assert name not in env, name
    assert (env["GIT_TERMINAL_PROMPT"], env["GIT_ASKPASS"], env["SSH_ASKPASS"]) == ("0", "", "")
    assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh:file" and env["GIT_SSH_COMMAND"] == BATCH_SSH


def test_ssh_keeps_the_users_choice_of_command() -> None:
    assert "GIT_SSH_COMMAND" not in git_env({}, ssh_configured=True)  # core.sshCommand in their config
    assert git_env({"GIT_SSH_COMMAND": "ssh -i ~/.ssh/work"}, ssh_configured=False)["GIT_SSH_COMMAND"] == \
        "ssh -i ~/.ssh/work"
    assert "GIT_SSH_COMMAND" not in git_env({"GIT_SSH": "/usr/bin/plink"}, ssh_configured=False)


# --- git's message, whole and without credentials -----------------------------------------------


def test_gits_message_keeps_every_line_and_hides_credentials() -> None:
    stderr = (b"fatal: unable to access 'https://alice:s3cret@git.corp.test/p.git/': "
              b"SSL certificate problem\n"
              b"\n"
              b"hint: set http.sslCAInfo\n")
    said = git_message(stderr, 128)
    assert said == ("fatal: unable to access 'https://***@git.corp.test/p.git/': SSL certificate problem; "
                    "hint: set http.sslCAInfo")
    assert git_message(b"", 128) == "exit 128"


def test_a_long_message_is_bounded_and_says_how_much_was_left_out() -> None:
    said = git_message(b"".join(b"remote: line %d\n" % n for n in range(50)), 1)
    assert said.startswith("remote: line 0; remote: line 1;") and said.endswith("(30 more lines)")
    assert "line 19" in said and "line 20" not in said
    assert len(git_message(b"x" * 10_000, 1)) <= MAX_CHARS + 2


@given(user=st.text("abcdefgh.-_", min_size=1, max_size=8),
       token=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=6, max_size=40),
       before=st.text(" :'\"fatal", max_size=10))
def test_no_credential_of_a_url_survives(user: str, token: str, before: str) -> None:
    stderr = f"{before}https://{user}:{token}@host.test/p.git\nfatal: https://{token}@host.test/q\n".encode()
    assert token not in git_message(stderr, 128)


# --- the real git, through a recording wrapper ----------------------------------------------------


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Project, TeamRepo, Path]:
    """A project, a team repository, and a `git` first on the project's PATH recording each call."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(WRAPPER.format(python=sys.executable, git=real))
    wrapper.chmod(0o755)
    project = make_project(tmp_path)
    record = tmp_path / "git-calls.jsonl"
    project.env.update({"PATH": f"{bin_dir}:{project.env['PATH']}", "FAKE_GIT_RECORD": str(record)})
    return project, make_repo(tmp_path), record


def calls(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def test_a_fetch_gets_the_users_tls_proxy_and_gitconfig_and_none_of_the_rest(
        tmp_path: Path, recorded: tuple[Project, TeamRepo, Path]) -> None:
    project, repo, record = recorded
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "hook-ran"
    hook = hooks / "reference-transaction"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    system = tmp_path / "etc-gitconfig"  # the system file: rewrites the team's https URL to the repository
    system.write_text(f'[url "{repo.url}"]\n\tinsteadOf = https://git.corp.test/team-policies\n')
    (project.home / ".gitconfig").write_text(dedent(f"""
        [core]
        \thooksPath = {hooks}
        \tsshCommand = ssh -i ~/.ssh/corp
    """))
    project.policy('version: 1\nuse: ["git+https://git.corp.test/team-policies@v1#team.yaml"]\n')

    done = project.router("lint", **USER_ENV, GIT_CONFIG_SYSTEM=str(system))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "locked git+https://git.corp.test/team-policies@v1 at" in done.stderr
    fetches = [c for c in calls(record) if "fetch" in c["argv"]]
    assert fetches, calls(record)
    for call in fetches:
        env = call["env"]
        assert {k: env.get(k) for k in ("GIT_SSL_CAINFO", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy",
                                        "NO_PROXY", "GIT_CONFIG_SYSTEM")} == {
            "GIT_SSL_CAINFO": "/etc/corp/ca.pem", "SSL_CERT_FILE": "/etc/corp/ca.pem",
            "HTTPS_PROXY": "http://proxy.corp.test:3128", "https_proxy": "http://proxy.corp.test:3128",
            "NO_PROXY": "localhost", "GIT_CONFIG_SYSTEM": str(system)}
        assert not {"GIT_DIR", "GIT_INDEX_FILE", "GIT_TRACE", "GIT_CONFIG_PARAMETERS", "GIT_SSL_NO_VERIFY",
                    "GIT_CONFIG_NOSYSTEM"} & set(env)
        assert (env["GIT_TERMINAL_PROMPT"], env["GIT_ASKPASS"]) == ("0", "")
        assert "GIT_SSH_COMMAND" not in env  # the user's core.sshCommand is theirs
        argv = call["argv"]
        assert argv[:4] == ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
        assert "protocol.ext.allow=never" in argv and call["cwd"] == "/"
    assert not marker.exists(), "the user's hooks never run for a policy fetch"


def test_a_failing_fetch_shows_gits_whole_message(recorded: tuple[Project, TeamRepo, Path]) -> None:
    project, _, _ = recorded
    project.policy('version: 1\nuse: ["git+file:///nonexistent/team-policies@v1#team.yaml"]\n')

    done = project.router("lint")

    assert done.returncode == 1 and "[RT125]" in done.stdout
    assert "fatal: '/nonexistent/team-policies' does not appear to be a git repository; " \
           "fatal: Could not read from remote repository.; Please make sure you have the correct " \
           "access rights; and the repository exists." in " ".join(done.stdout.split())
    assert "help: check that this machine reaches the repository (the network, the URL, your access to " \
           "it: `git ls-remote` with the URL shows git's own answer), then run the command again" \
           in " ".join(done.stdout.split())


def test_credentials_in_gits_message_are_hidden(recorded: tuple[Project, TeamRepo, Path]) -> None:
    project, _, _ = recorded
    project.policy('version: 1\nuse: ["git+https://git.corp.test/p.git@v1#team.yaml"]\n')
    said = ("fatal: unable to access 'https://alice:ghp_S3CRET@git.corp.test/p.git/': "
            "SSL certificate problem: unable to get local issuer certificate\n")

    done = project.router("lint", FAKE_GIT_FAIL=said)

    out = " ".join(done.stdout.split())
    assert "fatal: unable to access 'https://***@git.corp.test/p.git/': SSL certificate problem: unable " \
           "to get local issuer certificate" in out
    assert "ghp_S3CRET" not in done.stdout + done.stderr
