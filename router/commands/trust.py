"""`router trust`, `router untrust`, `router trust --list`: the user's trust in a project's policy.

`summary` says what the project policy would do (its files, rules, actions, signals and the
capabilities they use) so the user decides on what they read; `trust` records the digest of that
exact content. The same functions serve `/policy trust` in Pi (router/policy_command.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from router.capabilities import capability_report, refusal_of
from router.compiled import CompiledPolicy
from router.diagnostics import Diagnostic, has_errors, render_text
from router.paths import project_policy as project_file
from router.session_policy import read_project_content
from router.trust import ProjectContent, TrustStore, TrustStoreError, decide


@dataclass(frozen=True)
class Review:
    """What the user is asked to trust."""

    root: Path
    content: ProjectContent | None
    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic]


def review(directory: Path, agent: Path) -> Review:
    """The project layer of `directory` as the trust check reads it, compiled over the user's layers."""
    root = directory.resolve()
    content, found = read_project_content(root, agent)
    diagnostics = [d for d in found if refusal_of(d) is None]  # refusals are listed, not fatal
    policy = None
    if content is not None and not has_errors(diagnostics):
        from router.compile import load_policy

        policy, more = load_policy(root, agent=agent, include_project=True)
        diagnostics = diagnostics + more
    return Review(root, content, policy, diagnostics)


def render_summary(item: Review, *, state: str) -> str:
    """The text the user reads before trusting: files, rules, signals, capabilities, digest."""
    assert item.content is not None
    lines = [f"project policy: {project_file(item.root)} ({_state_words(state)})", "files it reaches:"]
    lines += [f"  {name}  sha256 {sha[:12]}" for name, sha in item.content.files]
    policy = item.policy
    if policy is not None:
        rules = [r for r in policy.rules if r.layer == "project"]
        packs = sorted({f.pack for f in policy.files if f.pack and f.used_by is not None
                        and f.used_by in {g.path for g in policy.files if g.layer == "project"}})
        if packs:
            lines.append(f"built-in packs it uses: {', '.join(packs)}")
        lines.append(f"rules ({len(rules)}):")
        lines += [f"  {r.id}: on {', '.join(r.on)}; do {', '.join(a.name for a in r.actions) or 'nothing'}"
                  f"{' (shadow)' if r.shadow else ''}" for r in rules]
        lines += _capability_lines(policy)
    lines.append(f"content sha256: {item.content.digest}")
    return "\n".join(lines)


def trust(directory: Path, agent: Path, *, confirm: Callable[[str], bool]) -> tuple[int, str]:
    """Show the summary, ask `confirm`, record the digest. Exit code and text."""
    item = review(directory, agent)
    if item.content is None:
        return 1, f"error: no project policy at {project_file(item.root)}"
    if item.policy is None:
        return 1, (f"{render_text(item.diagnostics)}\nerror: {project_file(item.root)} has errors; "
                   "fix them (router lint) before trusting it")
    store = TrustStore(agent)
    try:
        state = decide(item.content, item.root, store.projects()).state
    except TrustStoreError as exc:
        return 1, f"error: {exc}"
    text = render_summary(item, state=state)
    if state == "trusted":
        return 0, f"{text}\nalready trusted: nothing to do"
    if not confirm(text):
        return 1, "not trusted: nothing was recorded"
    store.trust(item.content)
    digest = item.content.digest[:12]
    return 0, f"trusted {project_file(item.root)} (sha256 {digest}); Pi applies it from now on"


def untrust(directory: Path, agent: Path) -> tuple[int, str]:
    root = directory.resolve()
    try:
        found = TrustStore(agent).untrust(root)
    except TrustStoreError as exc:
        return 1, f"error: {exc}"
    return (0, f"untrusted {root}: its policy is no longer applied") if found else (
        0, f"{root} was not trusted: nothing to do")


def list_trusted(agent: Path) -> tuple[int, str]:
    try:
        projects = TrustStore(agent).projects()
    except TrustStoreError as exc:
        return 1, f"error: {exc}"
    if not projects:
        return 0, "no trusted project policies"
    rows = []
    for root in sorted(projects):
        record = projects[root] if isinstance(projects[root], dict) else {}
        current, _ = read_project_content(Path(root), agent)
        now = "missing" if current is None else (
            "unchanged" if current.digest == record.get("sha256") else "changed since trusted")
        rows.append(f"{root}  sha256 {str(record.get('sha256', ''))[:12]}  "
                    f"trusted {record.get('trusted_at', '?')}  ({now})")
    return 0, "\n".join(rows)


def _capability_lines(policy: CompiledPolicy) -> list[str]:
    """The project layer's capabilities (each use, where) and what is refused at run time."""
    report = next((r for r in capability_report(policy) if r.layer == "project"), None)
    if report is None:
        return ["capabilities: none beyond Pi's own"]
    lines = ["capabilities:"] if report.capabilities else ["capabilities: none beyond Pi's own"]
    lines += [f"  {u.capability}: {u.field} = {u.value} ({u.owner}, {u.where})" for u in report.capabilities]
    if report.refused:
        lines.append(f"refused ({len(report.refused)}; they stay refused in Pi, the rest applies):")
        lines += [f"  {r.kind} {r.name}: {r.reason} [{r.code}] ({r.where})" for r in report.refused]
    return lines


def _state_words(state: str) -> str:
    return {"trusted": "trusted", "changed": "changed since you trusted it",
            "untrusted": "not trusted"}.get(state, state)
