"""Trust a session keeps without `router trust`: the project content Pi approved for this run
(`--approve`, `defaultProjectTrust: always`), and a user's own command that saved into a trusted
project's data file (the trust record follows that content instead of the project turning
untrusted)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from router.compile.ir import CompiledPolicy
from router.engine.decision import Decision
from router.runtime.project_content import git_tree_file, read_project_content
from router.runtime.session_policy import PROJECT_SECONDS
from router.trust.store import TrustStore, TrustStoreError, bounded_sha256, recorded_path

JSON_WRITES = ("save", "forget")  # the actions that change a JSON data file


def approved_digest(params: dict[str, Any], cwd: Path, agent: Path) -> str | None:
    """The project content Pi says to apply for this run unrecorded (`--approve`, or the user's
    `defaultProjectTrust: always`): the content of the run's first hello, never newer bytes."""
    if params.get("noApprove") is True:
        return None
    settings = params.get("settings")
    always = isinstance(settings, dict) and settings.get("defaultProjectTrust") == "always"
    if not (params.get("approve") is True or always):
        return None
    if params.get("firstHello") is False:  # a new session or sidecar: only what was approved
        earlier = params.get("approvedDigest")
        return earlier if isinstance(earlier, str) and earlier else None
    content, _ = read_project_content(cwd, agent, seconds=PROJECT_SECONDS)
    return content.digest if content is not None else None


def trust_after_own_writes(policy: CompiledPolicy, decision: Decision, cwd: Path, agent: Path,
                           checked: frozenset[tuple[str, str]], log: Callable[[str], None]) -> bool:
    """Whether the trust record was moved to the project's content after `decision` saved into one
    of its data files (say, `/cuttle config set` into .pi/pi-cuttle.json), only when nothing else
    of the trusted files changed; what happened is logged."""
    if not policy.project_data:
        return False
    data = {(cwd / name).resolve() for name in policy.project_data}
    written = [e for e in decision.effects if e.action in JSON_WRITES and isinstance(e.params, dict)
               and _resolved(e.params.get("file")) in data]
    if not written:
        return False
    names = {str(Path(name)) for name in policy.project_data}
    base = cwd.resolve()
    changed = [name for name, sha in checked
               if name not in names and bounded_sha256(recorded_path(base, name, git_tree_file)[0]
                                                       or base / name) != sha]
    if changed or not checked:  # the policy's own files changed too: not yours to keep
        log(f"trust not updated after a write to the project's data: "
            f"{', '.join(changed) or 'no trusted file list'} changed as well")
        return False
    content, _ = read_project_content(cwd, agent)
    if content is None:
        return False
    try:
        TrustStore(agent).trust(content)
    except (OSError, TrustStoreError) as exc:
        log(f"trust not updated after a write to the project's data: {exc}")
        return False
    log(f"trust kept for {cwd}: the project's data changed by your command")
    return True


def _resolved(value: Any) -> Path | None:
    if not isinstance(value, str) or not value:
        return None
    return Path(value).expanduser().resolve()
