"""Which policy `router replay` replays each session with (docs/replay.md, "Whose policy").

Without `--policy`, a session recorded in a project whose `.pi/router.yaml` you trust is replayed
with that project's policy, as its sidecar loads it there (your layers, then the project's);
any other session with the current directory's policy. Sessions that share a policy form a
group; a group whose decision log records another policy digest than the one replayed gets one
warning line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from router.compile.ir import CompiledPolicy
from router.load.paths import agent_dir, display_path, project_identity, project_policy
from router.replay.log_reader import DecisionLog
from router.replay.runner import SessionRun
from router.replay.session_file import SessionFile
from router.runtime.decision_log import digest_key
from router.runtime.decision_record import policy_digest

DIGEST_SHOWN = 19  # `sha256:` and 12 hex digits


@dataclass
class Group:
    """Sessions replayed with one policy."""

    policy: CompiledPolicy
    label: str  # where the policy comes from, as the warnings say it
    sessions: list[SessionFile] = field(default_factory=list)


def groups(sessions: list[SessionFile], current: CompiledPolicy, *, given: bool,
           agent: Path | None = None) -> tuple[list[Group], list[str]]:
    """The session groups (the current policy's first) and the warnings about them."""
    fallback = Group(current, "the --policy files" if given else "the current policy")
    if given:
        fallback.sessions = list(sessions)
        return [fallback], []
    agent = agent or agent_dir()
    by_project: dict[str, Group] = {}
    notes: list[str] = []
    here = _resolved(Path.cwd())
    for session in sessions:
        root = Path(session.cwd) if session.cwd else None
        if root is None or _resolved(root) == here or not project_policy(root).is_file():
            fallback.sessions.append(session)
            continue
        key = str(_resolved(root))
        if key not in by_project:
            policy, note = _project_policy(root, agent)
            by_project[key] = Group(policy or current, display_path(project_policy(root))
                                    if policy is not None else fallback.label)
            notes += [note] if note else []
        group = by_project[key]
        (group if group.policy is not current else fallback).sessions.append(session)
    found = [fallback] + [g for g in by_project.values() if g.policy is not current]
    return [g for g in found if g.sessions], notes


def digest_warnings(found: list[Group], log: DecisionLog, agent: Path | None = None) -> list[str]:
    """One line per group whose recorded policy digests are not the replayed policy's."""
    lines: list[str] = []
    key = b""
    for group in found:
        replayed = policy_digest(group.policy)
        recorded = {r.policy for s in group.sessions for r in log.of_session(s.id) if r.policy}
        differ = sorted(recorded - {replayed})
        if not differ:
            continue
        sessions = {s.id for s in group.sessions if any(r.policy in differ for r in log.of_session(s.id))}
        key = key or digest_key(agent or agent_dir())
        names = sorted({_project_name(s, key) for s in group.sessions if s.id in sessions})
        lines.append(f"warning: {len(sessions)} session{'s' if len(sessions) != 1 else ''} "
                     f"({', '.join(names)}) recorded under policy "
                     f"{', '.join(d[:DIGEST_SHOWN] for d in differ)} are replayed with "
                     f"{replayed[:DIGEST_SHOWN]} ({group.label}): decisions may differ from the "
                     "recorded ones")
    return lines


def _project_policy(root: Path, agent: Path) -> tuple[CompiledPolicy | None, str | None]:
    """The policy a sidecar started in `root` loads, when the project's file is trusted and
    compiles; else None and why (the session then gets the current policy)."""
    from router.runtime.session_policy import load_session_policy
    from router.trust.store import TrustStore, TrustStoreError

    try:
        records = TrustStore(agent).records()
    except TrustStoreError:
        records = {}
    shown = display_path(project_policy(root))
    loaded = load_session_policy(root, agent, records=records)
    if not loaded.trust.applies:
        return None, (f"note: {shown} is not trusted (router trust in {display_path(root)}): its sessions "
                      "are replayed with the current policy")
    if loaded.policy is None:
        return None, f"note: {shown} does not compile: its sessions are replayed with the current policy"
    return loaded.policy, None


def projects(sessions: list[SessionFile], agent: Path | None = None) -> dict[str, dict[str, str | None]]:
    """Session path -> its project `{name, digest}`, as the sidecar recorded it (the digest keyed
    with the agent dir's decision-log key); sessions without a working directory are left out."""
    key = digest_key(agent or agent_dir())
    found = {s.path: project_identity(s.cwd, key) for s in sessions if s.cwd}
    return {path: identity for path, identity in found.items() if identity is not None}


def stamp(runs: Iterable[SessionRun], found: Mapping[str, Mapping[str, str | None]]) -> None:
    """Give each replayed decision its session's `project`, as the live record carries it."""
    for run in runs:
        project = found.get(run.path)
        if project is not None:
            for record in run.records:
                record["project"] = dict(project)


def _project_name(session: SessionFile, key: bytes) -> str:
    identity = project_identity(session.cwd, key) if session.cwd else None
    return (identity or {}).get("name") or (identity or {}).get("digest") or "no project"


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
