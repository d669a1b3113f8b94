"""Fixtures of the fault-injection suite: the e2e fixtures, a rig whose RPC Pis stamp arrival
times, and the ``case`` record every test fills in (written to the results file at teardown)."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import fake_provider, pi_install, started_rpcs, workdir
from tests.e2e.fake_provider import FakeProvider
from tests.e2e.helpers_router import RouterRig, make_rig, wait_until
from tests.e2e.pi_harness import PiInstall
from tests.e2e.pi_rpc import RpcPi, TimedRpc
from tests.reliability.faults import (
    Case,
    append_result,
    kill_processes_naming,
    processes_naming,
    results_path,
)

__all__ = ["fake_provider", "pi_install", "workdir"]  # fixtures shared with tests/e2e


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``reliability`` marker (every test of this directory carries it)."""
    config.addinivalue_line("markers", "reliability: the fault-injection suite (docs/reliability.md)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/reliability with ``reliability``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
        None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, for the ``case`` fixture's teardown."""
    report = yield
    setattr(item, f"reliability_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The JSON-lines results file of this run."""
    return results_path(tmp_path_factory.getbasetemp())


def _status(item: pytest.Item) -> tuple[str, str]:
    """(status, failure text) of a finished test: passed, failed, xfail, xpass or skipped."""
    reports = [getattr(item, f"reliability_{when}", None) for when in ("setup", "call")]
    for report in reports:
        if report is None:
            continue
        xfailed = hasattr(report, "wasxfail")
        if report.skipped:
            if xfailed:
                return "xfail", _first_line(report.longreprtext)
            return "skipped", _skip_reason(report)
        if report.failed:
            return "failed", _first_line(report.longreprtext)
        if xfailed and report.when == "call":
            return "xpass", ""
    return "passed", ""


def _xfail_reason(item: pytest.Item) -> str:
    """The reason of the test's xfail mark, empty without one."""
    mark = item.get_closest_marker("xfail")
    return str(mark.kwargs.get("reason", "")) if mark is not None else ""


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\w*:")


def _first_line(text: str) -> str:
    """The failure's message: the first ``E`` line naming an error, else any line that does."""
    cleaned = [line.lstrip("E").strip(" |+-") for line in text.splitlines()]
    e_lines = [c for line, c in zip(text.splitlines(), cleaned, strict=True) if line.startswith("E ")]
    named = [c for c in e_lines if ERROR_LINE.match(c)] or [c for c in cleaned if ERROR_LINE.match(c)]
    chosen = (named or [c for c in e_lines if c] or [c for c in cleaned if c][-1:] or [""])[0]
    return chosen[:300]


@pytest.fixture
def case(request: pytest.FixtureRequest, results_file: Path) -> Iterator[Case]:
    """The test's outcome record; written with its pytest status when the test ends."""
    record = Case(test=request.node.nodeid)
    yield record
    status, detail = _status(request.node)
    record.status = status
    record.xfail = _xfail_reason(request.node)
    if status not in ("passed", "xpass"):
        record.outcome = "failed" if status in ("failed", "xfail") else "skipped"
        record.note(f"Today: {detail}" if status == "xfail" else f"({status}: {detail})")
    if record.case:
        append_result(results_file, record.record())


@pytest.fixture
def no_leftovers(tmp_path: Path) -> Iterator[None]:
    """After the test's Pis are closed: kill any process still naming the test's directory.

    A safety net (sidecars that outlived Pi, a fake child ``pi``); tests that care assert on it.
    """
    yield
    with contextlib.suppress(AssertionError):  # a sidecar that got `shutdown` may still be exiting
        wait_until(lambda: not processes_naming(str(tmp_path)), 3, "the test's processes to exit")
    killed = kill_processes_naming(str(tmp_path))
    if killed:
        warnings.warn(f"killed {len(killed)} leftover process(es) of {tmp_path.name}", stacklevel=1)


@pytest.fixture
def timed_rpc(
    tmp_path: Path, pi_install: PiInstall, workdir: Path, no_leftovers: None
) -> Iterator[Callable[..., RpcPi]]:
    """Like the e2e ``rpc_pi`` factory, with TimedRpc (records carry their arrival time ``_t``)."""
    with started_rpcs(tmp_path, pi_install, workdir, TimedRpc) as start:
        yield start


@pytest.fixture
def rig(
    tmp_path: Path,
    fake_provider: FakeProvider,
    pi_install: PiInstall,
    workdir: Path,
    timed_rpc: Callable[..., RpcPi],
) -> RouterRig:
    """The e2e RouterRig (retry off) whose ``rpc()`` starts TimedRpc Pis."""
    return make_rig(tmp_path, fake_provider, pi_install, workdir, timed_rpc)
