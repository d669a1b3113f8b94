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
    """Stage a file of `size` zero bytes, stored in a pack of its own (a few MB for 1.5 GB) written
    directly: `git add` of a sparse file compresses every byte (45 s for 1.5 GB here), and a loose
    object would be inflated and compressed again by the `git pack-objects` serving each fetch
    (14 s of CPU for 1.5 GB), where a packed one is sent as it is stored.

    Nothing here is trusted by git unchecked: the fetching side inflates the object (zlib checks
    the Adler-32) and hashes it again (a wrong id is a missing object, and the fetch fails)."""
    chunk = 1 << 22
    count, rest = divmod(size, chunk)
    digest = hashlib.sha1(f"blob {size}\0".encode())
    zeros = bytes(chunk)
    for _ in range(count):
        digest.update(zeros)
    digest.update(bytes(rest))
    sha = digest.hexdigest()
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)  # the same for each chunk
    adler = ((size % 65521) << 16) | 1  # Adler-32 of `size` zeros: a stays 1, b counts the bytes
    entry = bytearray(_pack_object_header(3, size) + b"\x78\x01")  # 3: a blob; a zlib stream follows
    entry += block * count + deflate.compress(bytes(rest)) + deflate.flush(zlib.Z_FINISH)
    entry += adler.to_bytes(4, "big")
    pack = b"PACK" + (2).to_bytes(4, "big") + (1).to_bytes(4, "big") + bytes(entry)
    pack += hashlib.sha1(pack).digest()
    index = b"\xfftOc" + (2).to_bytes(4, "big")  # version 2: fan-out, ids, CRC-32s, offsets
    first = int(sha[:2], 16)
    index += b"".join((0 if byte < first else 1).to_bytes(4, "big") for byte in range(256))
    index += bytes.fromhex(sha) + zlib.crc32(entry).to_bytes(4, "big") + (12).to_bytes(4, "big")
    index += pack[-20:]
    index += hashlib.sha1(index).digest()
    packs = repo.path / ".git" / "objects" / "pack"
    packs.mkdir(parents=True, exist_ok=True)
    stem = f"pack-{pack[-20:].hex()}"
    (packs / f"{stem}.pack").write_bytes(pack)
    (packs / f"{stem}.idx").write_bytes(index)
    repo.git("update-index", "--add", "--cacheinfo", f"100644,{sha},{name}")
    return sha


def _pack_object_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 4 bits of size in the first byte, 7 in each one after."""
    out = bytearray([(kind << 4) | (size & 0x0F)])
    size >>= 4
    while size:
        out[-1] |= 0x80
        out.append(size & 0x7F)
        size >>= 7
    return bytes(out)


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
