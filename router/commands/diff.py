"""`router diff OLD NEW --sessions PATH...`: two policies on the same recorded sessions."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from router.commands.replay import Options as Options
from router.commands.replay import load_policy, read_inputs, warn_problems
from router.replay import diff
from router.replay.sources import replay_all

RENDER = {"text": diff.render_text, "markdown": diff.render_markdown, "json": diff.render_json}


def run(old: str, new: str, options: Options, *, fmt: str, fail_on_change: bool) -> tuple[int, str]:
    inputs = read_inputs(options)
    if not inputs.sessions:
        warn_problems(inputs, [])
        return 1, "error: no Pi session files found in " + ", ".join(str(p) for p in options.paths)
    runs = []
    with tempfile.TemporaryDirectory(prefix="router-diff-") as scratch:
        for index, spec in enumerate((old, new)):
            path, problem = policy_file(spec, Path(scratch) / str(index))
            if path is None:
                return 1, f"error: {problem}"
            policy, errors = load_policy([path])
            if policy is None:
                return 1, f"error: {spec} does not compile:\n{errors}"
            runs.append(replay_all(policy, inputs, progress=options.progress))
    warn_problems(inputs, runs[1])
    result = diff.compare(old, new, runs[0], runs[1])
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
