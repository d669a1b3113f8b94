"""`router trust`, `router untrust`, `router trust --list`: the user's trust in a project's policy.

`summary` says what the project policy would do (its files, rules, actions, signals and the
capabilities they use) so the user decides on what they read; `trust` records the digest of that
exact content. The same functions serve `/policy trust` in Pi (router/runtime/policy_command.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from router.compile.capability_analysis import capability_report
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic, render_text
from router.load.paths import project_policy as project_file
from router.runtime.project_content import git_tree_file, locked_sha
from router.runtime.session_policy import load_with_project
from router.trust.store import ProjectContent, TrustDecision, TrustStore, TrustStoreError, decide, precheck


@dataclass(frozen=True)
class Review:
    """What the user is asked to trust."""

    root: Path
    content: ProjectContent | None
    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic]


def review(directory: Path, agent: Path) -> Review:
    """The project layer of `directory` compiled over the user's layers, from one read of the
    files: the summary shown and the digest recorded describe the same bytes."""
    root = directory.resolve()
    loaded = load_with_project(root, agent)
    policy, diagnostics = loaded.compile(agent) if loaded.content is not None else (None, [])
    return Review(root, loaded.content, policy, diagnostics)


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
        lines += _override_lines(policy)
        lines += _capability_lines(policy)
    lines.append(f"content sha256: {item.content.digest}")
    return "\n".join(_printable(line) for line in lines)


def _override_lines(policy: CompiledPolicy) -> list[str]:
    """What the project changes of the layers below it: disabled and replaced rules, vars."""
    own = [f for f in policy.files if f.layer == "project"]
    others = [f for f in policy.files if f.layer != "project"]
    theirs = {r.id: f.label for f in others for r in f.policy.rules}
    lines = []
    disabled = sorted({rule_id for f in own for rule_id in f.policy.disable})
    if disabled:
        lines.append(f"switches off rules: {', '.join(disabled)}")
    replaced = sorted({f"{r.id} ({theirs[r.id]})" for f in own for r in f.policy.rules if r.id in theirs})
    if replaced:
        lines.append(f"replaces rules: {', '.join(replaced)}")
    set_below = {name for f in others for name in f.policy.vars}
    changed = sorted({name for f in own for name in f.policy.vars if name in set_below})
    if changed:
        lines.append(f"overrides vars: {', '.join(changed)}")
    return lines


def _printable(text: str) -> str:
    """`text` with control characters shown as escapes: a policy cannot redraw the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
        # nothing of a project is parsed
        state = precheck(Path(root), projects, git_tree_file, locked_sha(Path(root)))
        now = "missing" if not project_file(Path(root)).is_file() else _listed(state)
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


def _listed(state: TrustDecision) -> str:
    """How `router trust --list` shows a project's state (what the engine would decide)."""
    if state.applies:
        return "unchanged"
    if state.cause == "unlisted":
        return "needs trust again: trusted by an older router"
    if state.tampered is not None:
        return (f"off: the cached {state.cause} does not match the lock "
                f"(delete {state.tampered}, then `router lint`)")
    if state.cause is not None:
        return f"off until `router lint` fetches {state.cause}"
    return "changed since trusted"
