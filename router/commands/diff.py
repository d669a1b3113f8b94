"""`router diff OLD NEW --sessions PATH...`: two policies on the same recorded sessions."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from router.commands import report
from router.commands.replay import Options as Options
from router.commands.replay import baseline_of, load_policy, read_inputs, warn_problems
from router.compile.ir import CompiledPolicy
from router.replay import diff
from router.replay.report_data import from_runs
from router.replay.runner import SessionRun
from router.replay.sources import Inputs, replay_all

RENDER = {"text": diff.render_text, "markdown": diff.render_markdown, "json": diff.render_json}


def run(old: str, new: str, options: Options, *, fmt: str, fail_on_change: bool) -> tuple[int, str]:
    inputs = read_inputs(options)
    if not inputs.sessions:
        warn_problems(inputs, [])
        return 1, "error: no Pi session files found in " + ", ".join(str(p) for p in options.paths)
    runs, policies = [], []
    with tempfile.TemporaryDirectory(prefix="router-diff-") as scratch:
        for index, spec in enumerate((old, new)):
            path, problem = policy_file(spec, Path(scratch) / str(index))
            if path is None:
                return 1, f"error: {problem}"
            policy, errors = load_policy([path])
            if policy is None:
                return 1, f"error: {spec} does not compile:\n{errors}"
            runs.append(replay_all(policy, inputs, progress=options.progress))
            policies.append(policy)
    warn_problems(inputs, runs[1])
    result = diff.compare(old, new, runs[0], runs[1])
    if options.html is not None:
        failed = _write_html(options.html, options, inputs, runs[1], policies[1], result)
        if failed:
            return 1, failed
    return (1 if fail_on_change and result.changed else 0), RENDER[fmt](result)


def policy_file(spec: str, scratch: Path) -> tuple[Path | None, str]:
    """A policy file for `spec`: an existing path as it is, else `REV:PATH` read with `git show`
    (an argument list, no shell) into `scratch`."""
    path = Path(spec)
    if path.is_file():
        return path, ""
    revision, sep, inner = spec.partition(":")
    if not sep or not revision or not inner:
        return None, (f"{spec}: no such policy file (a git revision is written REV:PATH, "
                      "e.g. main:.pi/router.yaml)")
    try:
        shown = subprocess.run(["git", "show", "--end-of-options", spec], capture_output=True, timeout=30,
                               check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{spec}: cannot run git: {exc}"
    if shown.returncode != 0:
        reason = shown.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"{spec}: git show failed: {reason[-1] if reason else f'exit {shown.returncode}'}"
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / Path(inner).name
    target.write_bytes(shown.stdout)
    return target, ""


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
