"""A real git repository of team policies on disk, served as `git+file://`, and the `router` CLI
run against a project that uses it (isolated HOME, agent dir and cache)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zlib
from dataclasses import dataclass
from pathlib import Path

TEAM = """
version: 1
use: [./base.yaml]
rules:
  - id: team-read-only
    on: input
    when: "text == 'review'"
    do:
      - tools: {only: [read]}
"""

BASE = """
version: 1
rules:
  - id: team-no-force-push
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, '--force')"
    do: [{block: "force pushes are not allowed"}]
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "Team", "GIT_AUTHOR_EMAIL": "team@example.test", "GIT_COMMITTER_NAME": "Team",
           "GIT_COMMITTER_EMAIL": "team@example.test", "GIT_CONFIG_NOSYSTEM": "1"}


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@dataclass
class TeamRepo:
    """A working repository whose commits and tags the tests make."""

    path: Path
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def source(self, ref: str = "v1", file: str = "team.yaml") -> str:
        return f"git+{self.url}@{ref}#{file}"

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout.strip()

    def write(self, name: str, text: str) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(dedent(text), encoding="utf-8")

    def commit(self, message: str, tag: str | None = None) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        if tag is not None:
            self.git("tag", "-f", tag)
        return self.git("rev-parse", "HEAD")


def zero_blob(repo: TeamRepo, name: str, size: int) -> str:
    """Stage a file of `size` zero bytes as git stores it (a loose object, a few MB for 1.5 GB),
    written directly: `git add` of a sparse file compresses every byte (45 s for 1.5 GB here)."""
    header = f"blob {size}\0".encode()
    chunk = bytes(1 << 22)
    digest, adler = hashlib.sha1(header), zlib.adler32(header)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(header) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)  # the same for each chunk
    count, rest = divmod(size, len(chunk))
    for _ in range(count):
        digest.update(chunk)
        adler = zlib.adler32(chunk, adler)
    digest.update(bytes(rest))
    adler = zlib.adler32(bytes(rest), adler)
    sha = digest.hexdigest()
    target = repo.path / ".git" / "objects" / sha[:2] / sha[2:]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        out.write(b"\x78\x01" + head)
        for _ in range(count):
            out.write(block)
        out.write(deflate.compress(bytes(rest)) + deflate.flush(zlib.Z_FINISH) + adler.to_bytes(4, "big"))
    repo.git("update-index", "--add", "--cacheinfo", f"100644,{sha},{name}")
    return sha


@dataclass
class Project:
    """A project directory, its home and cache, and the `router` CLI run in it."""

    root: Path
    home: Path
    env: dict[str, str]

    @property
    def agent(self) -> Path:
        return self.home / ".pi" / "agent"

    @property
    def cache(self) -> Path:
        return Path(self.env["XDG_CACHE_HOME"]) / "pi-policy-router" / "git"

    @property
    def lock(self) -> dict[str, object]:
        data = json.loads((self.root / ".pi" / "router.lock").read_text())
        assert isinstance(data, dict)
        return data

    def policy(self, text: str) -> Path:
        path = self.root / ".pi" / "router.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text), encoding="utf-8")
        return path

    def router(self, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "router", *args], cwd=self.root, env={**self.env, **env},
                              input=stdin, capture_output=True, text=True, timeout=120, check=False)


def make_repo(tmp: Path) -> TeamRepo:
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp / "git-home")}
    path = tmp / "team-policies"
    path.mkdir(parents=True)
    repo = TeamRepo(path, env)
    repo.git("init", "-q", "-b", "main")
    repo.write("team.yaml", TEAM)
    repo.write("base.yaml", BASE)
    repo.commit("team policies v1", tag="v1")
    return repo


def make_project(tmp: Path, name: str = "project") -> Project:
    home = tmp / "home"
    root = home / name
    root.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "ROUTER_"))}
    env.update({"HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
                "XDG_CACHE_HOME": str(home / ".cache"), "NO_COLOR": "1"})
    return Project(root, home, env)
