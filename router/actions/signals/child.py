"""`child`: a tool-less `pi --print` run; the prompt goes to its stdin, the system prompt to a
private file (`--system-prompt` takes a path), so neither shows in the process table."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind, timeout
from router.trust.capabilities import FS_READ, PROCESS_SPAWN

# `system_prompt` needs fs.read: Pi reads a prompt that names a file
KIND = kind("child", "executor", "a child `pi --print` run", 45000, timeout_field="timeout_ms",
            capabilities={"pi_bin": PROCESS_SPAWN, "system_prompt": FS_READ})

CHILD_FLAGS = ("--print", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
               "--no-prompt-templates", "--no-themes", "--no-context-files", "--thinking", "off")


class ChildSignal(Params):
    """Run a tool-less child `pi --print …` and read its stdout."""

    prompt: str = Field(description="template: written to the child's stdin (never its command line)")
    system_prompt: str | None = Field(None, description="template: passed to the child in a private file")
    provider: str | None = None
    model: str | None = None
    pi_bin: str | None = Field(None, description="template: the pi binary (default: pi on PATH)")
    timeout_ms: int | str = 45000


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    params = request.params
    pi_bin = str(params.get("pi_bin") or local.which("pi") or "pi")
    if not _is_pi(pi_bin):
        return SignalOutcome(error=f"child: {pi_bin!r} is not a pi binary (its name must be pi, "
                             "pi-… or pi.…); the rules run no other program")
    argv = [str(pi_bin), *CHILD_FLAGS]
    for flag in ("provider", "model"):
        if params.get(flag):
            argv += [f"--{flag}", str(params[flag])]
    prompt = str(params.get("prompt") or "").encode()
    with _private_file(str(params.get("system_prompt") or "")) as system_prompt:
        if system_prompt is not None:
            argv += ["--system-prompt", str(system_prompt)]
        return await _run(local, argv, prompt, timeout(request))


async def _run(local: SignalLocal, argv: list[str], stdin: bytes, timeout_ms: int) -> SignalOutcome:
    """Run `argv` with `stdin` written and closed; kill its process group at the deadline."""
    try:
        done = await local.run_process(argv, stdin, cwd=local.cwd or None, timeout=timeout_ms / 1000)
    except OSError as exc:  # the name, not the path: the path may come from the environment
        return SignalOutcome(error=f"child failed to start: {Path(argv[0]).name}: {exc.strerror or exc}")
    if done is None:
        return SignalOutcome(error=f"timeout after {timeout_ms}ms")
    code, out, err = done
    if code != 0:
        detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return SignalOutcome(error=f"child exited with code {code}"
                             + (f": {detail[0]}" if detail[0] else ""))
    return SignalOutcome(result=out.decode(errors="replace").strip())


def _is_pi(path: str) -> bool:
    name = Path(path).name
    return name == "pi" or name.startswith(("pi-", "pi.", "pi_"))


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[Path | None]:
    """`text` in a file only this user can read (0600, in a 0700 directory), removed afterwards;
    None for an empty text."""
    if not text:
        yield None
        return
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="router-child-"))
    try:
        path = directory / "system-prompt.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)
