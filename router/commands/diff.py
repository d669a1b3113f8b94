"""`router diff OLD NEW --sessions PATH...`: two policies on the same recorded sessions.

Each side is compiled with what it `use:`s, under this machine's managed layer when there is one
(router/load/managed.py): the administrator's policy binds every file below it, so its locked rules
decide on both sides as they do in Pi, and a side's entry that tries to change one is dropped with
its RT609 warning on stderr.

Exit codes: 0 nothing changed, 1 a turn or how often a rule fires changed, 2 no comparison (a
usage mistake, a side that cannot be read or does not compile, no sessions)."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from router.commands import report
from router.commands.git_revision import Revision, RevisionError, is_revision, read_revision
from router.commands.replay import Options as Options
from router.commands.replay import baseline_of
from router.commands.replay import load_policy as load_policy
from router.commands.replay import read_inputs as read_inputs
from router.commands.replay import warn_problems as warn_problems
from router.compile import policy_changes
from router.compile.compiler import compile_layers, complete
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import render_text
from router.load.loader import PolicyFile
from router.load.managed import MANAGED, managed_policy
from router.replay import diff
from router.replay.report_data import from_runs
from router.replay.runner import SessionRun
from router.replay.sources import Inputs, replay_all

RENDER = {"text": diff.render_text, "markdown": diff.render_markdown, "json": diff.render_json}
UNCHANGED, CHANGED, CANNOT_COMPARE = 0, 1, 2


@dataclass(frozen=True)
class Side:
    """One compiled side of a comparison and how its files are named."""

    label: str
    policy: CompiledPolicy
    revision: Revision | None = None

    def snapshot(self) -> policy_changes.Snapshot:
        revision = self.revision

        def name(f: PolicyFile) -> str:
            found = revision.label(f.source) if revision is not None and f.source is not None else None
            return found or f.path

        return policy_changes.snapshot(self.policy.files, name)


def run(old: str, new: str, options: Options, *, fmt: str) -> tuple[int, str]:
    inputs = read_inputs(options)
    if not inputs.sessions:
        warn_problems(inputs, [])
        where = ", ".join(str(p) for p in options.paths)
        return CANNOT_COMPARE, f"error: no Pi session files found in {where}"
    with tempfile.TemporaryDirectory(prefix="router-diff-") as scratch:
        sides = []
        for index, spec in enumerate((old, new)):
            side, problem = load_side(spec, Path(scratch) / str(index))
            if side is None:
                return CANNOT_COMPARE, f"error: {problem}"
            sides.append(side)
        result, runs = compared(sides[0], sides[1], options, inputs)
    if options.html is not None:
        failed = _write_html(options.html, options, inputs, runs, sides[1].policy, result)
        if failed:
            return CANNOT_COMPARE, failed
    return (CHANGED if result.changed else UNCHANGED), with_managed(RENDER[fmt](result), sides[1].policy, fmt)


def managed_note(policy: CompiledPolicy) -> tuple[str, list[str]] | None:
    """The managed policy both sides ran under and its locked rules, else None."""
    files = [f.path for f in policy.files if f.layer == MANAGED]
    if not files:
        return None
    locked = [r.id for r in policy.rules if r.locked and r.layer == MANAGED]
    return files[0], locked


def with_managed(rendered: str, policy: CompiledPolicy, fmt: str) -> str:
    """The report saying which managed policy decided on both sides (a reviewer on another machine
    would see other decisions without it)."""
    note = managed_note(policy)
    if note is None:
        return rendered
    path, locked = note
    if fmt == "json":
        data = json.loads(rendered)
        data["managed"] = {"path": path, "locked": locked}
        return json.dumps(data, indent=2)
    held = f" (locked: {', '.join(locked)})" if locked else ""
    if fmt == "markdown":
        head, summary, rest = rendered.split("\n\n", 2)
        return f"{head}\n\n{summary}\n\nBoth sides run under the managed policy `{path}`{held}.\n\n{rest}"
    lines = rendered.split("\n")
    return "\n".join([*lines[:2], f"managed: {path}{held}, under both sides", *lines[2:]])


def compare(old: Side, new: Side, options: Options, inputs: Inputs | None = None) -> diff.Comparison:
    """Both sides replayed on the sessions and compared, with what their files differ in
    (`router update --sessions` shows a release the same way)."""
    return compared(old, new, options, inputs)[0]


def compared(old: Side, new: Side, options: Options,
             inputs: Inputs | None = None) -> tuple[diff.Comparison, list[SessionRun]]:
    """The comparison and the new side's runs (the HTML page shows them)."""
    inputs = inputs if inputs is not None else read_inputs(options)
    runs = [replay_all(side.policy, inputs, progress=options.progress) for side in (old, new)]
    warn_problems(inputs, runs[1])
    result = diff.compare(old.label, new.label, runs[0], runs[1])
    result.policy = policy_changes.compare(old.snapshot(), new.snapshot())
    return result, runs[1]


def _write_html(path: Path, options: Options, inputs: Inputs, runs: list[SessionRun],
                policy: CompiledPolicy, result: diff.Comparison) -> str | None:
    """The new policy's replay with the changed turns, as one page (router/replay/report_html.py)."""
    figures = from_runs(runs, inputs.sessions, inputs.catalog, baseline_of(options, inputs),
                        f"Policy diff: {result.old} → {result.new}")
    figures.policy = report.policy_rows(policy)
    figures.changes = report.change_rows(result.changes)
    figures.notes.append(diff.render_text(result).splitlines()[-1 if result.changed else -2])
    problem = report.write(path, figures)
    if problem is None:
        print(report.written(path, figures), file=sys.stderr)
    return problem


def load_side(spec: str, scratch: Path) -> tuple[Side | None, str]:
    """`spec` compiled: a policy file, or `REV:PATH` read from the tree at REV (with its files and
    the lock committed there) into `scratch`."""
    revision = None
    path = Path(spec)
    if is_revision(spec):
        try:
            revision = read_revision(spec, scratch)
        except RevisionError as exc:
            return None, str(exc)
        path = revision.path
    elif not path.is_file():
        return None, (f"{spec}: no such policy file (a git revision is written REV:PATH, "
                      "e.g. main:.pi/router.yaml)")
    policy, errors = load_managed(path)
    if policy is None:
        return None, f"{spec} does not compile:\n{_relabel(errors, revision)}"
    for refusal in policy.refused:
        print(f"warning: {_relabel(refusal.warning(), revision)}", file=sys.stderr)
    return Side(spec, policy, revision), ""


def load_managed(path: Path) -> tuple[CompiledPolicy | None, str]:
    """`path` (with what it uses) under the managed layer when this machine has one; on errors
    None and the rendered diagnostics."""
    managed = managed_policy()
    layers = [(MANAGED, managed)] if managed.is_file() else []
    loaded = complete(compile_layers([*layers, ("file", path)]))
    if loaded.policy is None:
        return None, render_text(loaded.diagnostics)
    return loaded.policy, ""


def _relabel(text: str, revision: Revision | None) -> str:
    """Diagnostics of a revision's copy name `REV:path`, not the scratch directory."""
    if revision is None:
        return text
    root = str(revision.root.resolve())
    return text.replace(root + "/", f"{revision.revision}:").replace(str(revision.root) + "/",
                                                                      f"{revision.revision}:")
