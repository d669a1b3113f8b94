"""Fixtures for end-to-end tests against a real Pi 1.6.0 and the loopback fake provider."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_provider import FakeProvider
from tests.e2e.pi_harness import PiInstall, PiInstallError, ensure_pi, make_agent_dir
from tests.e2e.pi_harness import pi_env as build_pi_env
from tests.e2e.pi_rpc import RpcPi


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``e2e`` marker."""
    config.addinivalue_line("markers", "e2e: end-to-end test that runs a real Pi process")


@pytest.fixture(scope="session")
def pi_install() -> PiInstall:
    """Pi 1.6.0 on Node 22, installed once per cache dir. An install failure fails the test."""
    try:
        return ensure_pi()
    except PiInstallError as exc:
        pytest.fail(f"could not install Pi for e2e tests: {exc}", pytrace=False)


@pytest.fixture
def fake_provider(tmp_path: Path) -> Iterator[FakeProvider]:
    """A started fake provider (chat + llama.cpp), logging to ``tmp_path/requests.jsonl``."""
    provider = FakeProvider(log_path=tmp_path / "requests.jsonl")
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def agent_dir(tmp_path: Path, fake_provider: FakeProvider) -> Path:
    """An isolated PI_CODING_AGENT_DIR whose ``fake`` provider is ``fake_provider``."""
    return make_agent_dir(tmp_path, fake_provider)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory for Pi (its cwd)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def pi_env(agent_dir: Path, pi_install: PiInstall) -> dict[str, str]:
    """Environment for Pi: isolated agent dir and HOME, offline, Node 22 first on PATH."""
    return build_pi_env(agent_dir, pi_install)


@contextlib.contextmanager
def started_rpcs(tmp_path: Path, pi_install: PiInstall, workdir: Path,
                 kind: type[RpcPi] = RpcPi) -> Iterator[Callable[..., RpcPi]]:
    """A factory ``start(args, env=..., **RpcPi kwargs)`` of started RPC Pis (of ``kind``), all
    closed when the block ends. Stderr goes to ``tmp_path/pi-rpc-N.stderr``; cwd defaults to ``workdir``."""
    started: list[RpcPi] = []

    def start(args: Sequence[str] = (), *, env: dict[str, str], **kwargs: Any) -> RpcPi:
        kwargs.setdefault("cwd", workdir)
        kwargs.setdefault("stderr_path", tmp_path / f"pi-rpc-{len(started)}.stderr")
        rpc = kind(pi_install, args, env=env, **kwargs)
        started.append(rpc)
        return rpc.start()

    try:
        yield start
    finally:
        for rpc in started:
            rpc.close()


@pytest.fixture
def rpc_pi(tmp_path: Path, pi_install: PiInstall, workdir: Path) -> Iterator[Callable[..., RpcPi]]:
    """Factory ``rpc_pi(args, env=..., **RpcPi kwargs)`` for started RPC Pis, all closed after."""
    with started_rpcs(tmp_path, pi_install, workdir) as start:
        yield start
