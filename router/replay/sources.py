"""What a replay reads: the session files, the decision logs and the model catalog."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from router.compile.ir import CompiledPolicy
from router.load.paths import agent_dir as default_agent_dir
from router.load.paths import log_files
from router.load.prices import Catalog, read_catalog
from router.replay import parallel
from router.replay.log_reader import DecisionLog, read_logs
from router.replay.progress import Progress
from router.replay.runner import Replayer, SessionRun
from router.replay.session_file import Problem, SessionFile, log_paths_in, read_session, session_paths


@dataclass
class Inputs:
    """The sessions to replay and what they are replayed with."""

    sessions: list[SessionFile]
    log: DecisionLog
    catalog: Catalog
    missing: list[Problem] = field(default_factory=list)  # paths that do not exist


def gather(paths: Sequence[Path], *, log: Path | None = None, agent: Path | None = None,
           models: Path | None = None, session: str | None = None) -> Inputs:
    """Read the session files under `paths` (only those whose id or path contains `session`),
    the decision log (`log`, else the agent dir's, plus any decisions*.jsonl under `paths`) and
    the models (`models`, else a models.json inside a given directory, else the agent dir's)."""
    agent = agent or default_agent_dir()
    missing = [Problem(str(p), 0, "no such file or directory") for p in paths if not p.exists()]
    found = [read_session(p) for p in session_paths(p for p in paths if p.exists())]
    if session:
        found = [s for s in found if session in s.id or session in s.path]
    logs = [log] if log is not None and log.is_file() else log_files(log or agent / "router" / "log")
    decision_log = read_logs([*logs, *log_paths_in(paths)])
    return Inputs(found, decision_log, read_catalog(models or _models_in(paths) or agent / "models.json"),
                  missing)


def _models_in(paths: Sequence[Path]) -> Path | None:
    """A models.json directly inside one of the given directories (a corpus can carry its prices)."""
    return next((d / "models.json" for d in paths if d.is_dir() and (d / "models.json").is_file()), None)


def replay_all(policy: CompiledPolicy, inputs: Inputs, *, progress: bool = True,
               jobs: int = 1) -> list[SessionRun]:
    """Every session through `policy`, in their order (a progress bar on a terminal's stderr); with
    `jobs` > 1, in that many worker processes (router/replay/parallel.py), with the same result."""
    replayer = Replayer(policy, inputs.catalog.copy(), inputs.log)
    bar = Progress(len(inputs.sessions), "replaying", force=False) if progress else None
    advance = bar.advance if bar is not None else None
    if jobs > 1 and len(inputs.sessions) > 1 and parallel.can_fork():
        runs = parallel.replay_parallel(replayer, inputs.sessions, jobs, advance)
    else:
        runs = []
        for run in _each(replayer, inputs.sessions):
            runs.append(run)
            if advance is not None:
                advance(1)
    if bar is not None:
        bar.close()
    return runs


def _each(replayer: Replayer, sessions: list[SessionFile]) -> Iterator[SessionRun]:
    for session in sessions:
        yield parallel.run_one(replayer, session)
