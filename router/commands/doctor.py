"""`router doctor`: check that Pi, Node, the bridge, the policy and its models fit together."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.commands import doctor_conflicts, policy_note
from router.commands.install import CONFIG_NAME, configured_command, installed_state, serve_command
from router.commands.sidecar_command import Resolved, resolve
from router.compile.compiler import LoadedPolicy, load_layered
from router.diagnostics.diagnostic import has_errors
from router.lint import run_checks
from router.load.loader import describe_files
from router.runtime import warm

PI_VERSION = "1.6.0"
MIN_NODE = (22, 19)
REF = re.compile(r"^[A-Za-z0-9._-]+/[^\s{}]+$")


@dataclass
class Check:
    ok: bool
    label: str
    detail: str = ""
    warn: bool = False  # worth a look, but not a failure

    def render(self) -> str:
        status = "FAIL" if not self.ok else "warn" if self.warn else "ok  "
        return f"{status} {self.label}" + (f": {self.detail}" if self.detail else "")


def _run(argv: list[str], timeout: float = 20.0) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def check_pi(pi: str | None) -> list[Check]:
    if pi is None:
        return [Check(False, "pi", "not found on PATH (npm install -g @earendil-works/pi-coding-agent)")]
    code, out = _run([pi, "--version"])
    version = out.splitlines()[-1] if out else ""
    checks = [Check(code == 0, "pi", f"{pi} {version}".strip())]
    if code == 0 and version != PI_VERSION:
        checks.append(Check(True, "pi version", f"{version} (the router is tested with {PI_VERSION})"))
    node = shutil.which("node")
    if node:
        _, out = _run([node, "--version"])
        match = re.match(r"v(\d+)\.(\d+)", out)
        new_enough = match is not None and (int(match.group(1)), int(match.group(2))) >= MIN_NODE
        note = "" if new_enough else f" on PATH; Pi needs >= {MIN_NODE[0]}.{MIN_NODE[1]}"
        if not new_enough and code == 0:
            note += " (your pi runs, so it starts a newer Node itself)"
        checks.append(Check(new_enough or code == 0, "node", out + note, warn=not new_enough))
    return checks


def _neutral_dir(agent: Path) -> Path:
    """A working directory no project controls: the agent dir, else the home directory."""
    return next((d for d in (agent, Path.home()) if d.is_dir()), Path("/"))


def check_sidecar(cwd: Path, agent: Path, command: list[str] | None = None) -> Check:
    """Start the sidecar (`command`, by default this Python's `router serve`), say hello, time it."""
    started = time.perf_counter()
    try:
        argv = [*(command or serve_command()), "--cwd", str(cwd), "--agent-dir", str(agent)]
        # never in the project: `python -m` would import a module the repository ships first
        process = subprocess.Popen(argv,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   cwd=_neutral_dir(agent), env={**os.environ, "PYTHONSAFEPATH": "1"},
                                   text=True)
    except OSError as exc:
        return Check(False, "sidecar", str(exc))
    try:
        hello = json.dumps({"id": 1, "method": "hello", "params": {"cwd": str(cwd)}})
        out, err = process.communicate(hello + "\n" + json.dumps({"id": 2, "method": "shutdown"}) + "\n",
                                       timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        return Check(False, "sidecar", "no answer within 20 s")
    elapsed = (time.perf_counter() - started) * 1000
    lines = [line for line in out.splitlines() if '"method":"progress"' not in line]  # loading notes
    first = lines[0] if lines else ""
    try:
        reply: Any = json.loads(first)
    except json.JSONDecodeError:
        return Check(False, "sidecar", f"unexpected output: {first[:200]} {err[-300:]}")
    events = reply.get("result", {}).get("events", [])
    detail = f"ready in {elapsed:.0f} ms, forwards {len(events)} event types"
    return Check("result" in reply, "sidecar", detail)


def check_configured(scope: str, target: Path, command: list[str] | None) -> Check:
    """The installed bridge names a sidecar command whose program exists."""
    label = f"sidecar command ({scope})"
    if command is None:
        return Check(False, label, f"{target / CONFIG_NAME} is missing or unreadable: run `router install`")
    program = shutil.which(command[0])
    if program is None:
        return Check(False, label, f"{command[0]} does not exist (a moved or deleted environment?): "
                     "run `router install` with the Python that has the router")
    return Check(True, label, " ".join(command))


def policy_models(policy: Any) -> set[str]:
    """Model refs the policy names literally (actions, vars, signals)."""
    refs: set[str] = set()

    def visit(value: Any) -> None:
        if isinstance(value, str) and REF.match(value) and not value.startswith(("./", "../", "~/")):
            refs.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    for rule in policy.rules:
        for action in rule.actions:
            if action.name in ("model", "route"):
                visit(action.params)
    visit(dict(policy.vars))
    return refs


def check_models(pi: str | None, refs: set[str], virtual: set[str]) -> list[Check]:
    if not refs:
        return []
    if pi is None:
        return [Check(False, "models", "cannot list Pi's models without pi")]
    # --no-approve: Pi must not load this project's extensions (a project bridge would start the
    # sidecar command its files name); the user's extensions still register their models
    _code, out = _run([pi, "--list-models", "--no-approve"], timeout=60)
    known = set()
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            known.add(f"{parts[0]}/{parts[1]}")
    providers = {ref.split("/", 1)[0] for ref in known | virtual}
    checks = []
    for ref in sorted(refs):
        provider = ref.split("/", 1)[0]
        if ref in known or ref in virtual:
            checks.append(Check(True, f"model {ref}"))
        elif provider in providers:
            checks.append(Check(False, f"model {ref}", f"{provider} has no such model in `pi --list-models`"))
        else:
            checks.append(Check(True, f"model {ref}", f"`pi --list-models` lists no {provider} models: "
                                "a provider without credentials or a local server that is not running; until "
                                "Pi lists it, a rule that picks it leaves the model unchanged (a classifier "
                                "on it fails)", warn=True))
    return checks


def check_policy(loaded: LoadedPolicy) -> list[Check]:
    """The layered policy compiles and lints without errors; which files it is made of."""
    lint = loaded.diagnostics + (run_checks(loaded.policy) if loaded.policy else [])
    errors = [d for d in lint if d.severity == "error"]
    rules = len(loaded.policy.rules) if loaded.policy else 0
    return [Check(not has_errors(lint), "policy", f"{rules} rules from {describe_files(loaded.files)}"
                  + (f"; {len(errors)} errors (run `router lint`)" if errors else ""))]


def check_trust(cwd: Path, agent: Path) -> list[Check]:
    """Whether Pi would apply the project policy here, and the exact way to trust it."""
    from router.runtime.project_content import git_tree_file, read_project_content
    from router.trust.store import TrustStore, TrustStoreError, decide, precheck

    if not (cwd / ".pi" / "router.yaml").is_file():
        return []
    try:
        records = TrustStore(agent).projects()
    except TrustStoreError as exc:
        return [Check(False, "project trust", str(exc))]
    first = precheck(cwd, records, git_tree_file)  # as the engine decides: before parsing anything
    if not first.applies:
        return [Check(True, "project trust", str(first.message()), warn=True)]
    content, _ = read_project_content(cwd, agent)
    if content is None:
        return []
    decision = decide(content, cwd, records)
    if decision.applies:
        return [Check(True, "project trust", f"{cwd / '.pi' / 'router.yaml'} is trusted "
                      f"(sha256 {content.digest[:12]}); Pi applies it")]
    return [Check(True, "project trust", str(decision.message()), warn=True)]


def check_project_command(command: list[str] | None, resolved: Resolved) -> Check:
    """How a project's bridge finds the sidecar: resolved on each machine, never from the project's
    files. A command its router-bridge.json names (an older install, or a planted one) is reported
    as text and ignored: neither the bridge nor doctor runs it."""
    label = "sidecar command (project)"
    here = f"here {resolved.describe()}"
    if command is not None:
        return Check(True, label, f"names {' '.join(command)}; ignored: a project cannot choose the "
                     f"sidecar command (project files are not executed); {here}", warn=True)
    if shutil.which(resolved.command[0]) is None:
        return Check(False, label, f"{here}, which does not exist: set ROUTER_PYTHON, or put `router` "
                     "on PATH, or `router install` for the user")
    return Check(True, label, f"resolved on each machine; {here}")


def check_extensions(agent: Path, cwd: Path, policy: Any) -> list[Check]:
    """Other extensions that break Pi beside the bridge: the originals, and same-named tools or commands."""
    names = {item["name"] for item in (*policy.tools, *policy.commands)} if policy is not None else set()
    checks = []
    for extension in doctor_conflicts.installed(agent, cwd):
        label = f"extension {extension.name} ({extension.scope})"
        clash = doctor_conflicts.names_registered(extension, names)
        original = doctor_conflicts.original_of(extension)
        if original is not None:
            pack, registers = doctor_conflicts.ORIGINALS[original]
            clash = sorted({*clash, *(registers & names)})
            both = (f"it registers {', '.join(clash)} as this policy does, so Pi refuses to start"
                    if clash else "it and the router would both decide the same events")
            checks.append(Check(not clash, label, f"the original {original}, which the `{pack}` pack "
                                f"replaces: {both}; remove it: {extension.remove}", warn=True))
        elif clash:
            checks.append(Check(False, label, f"registers {', '.join(clash)} as this policy does, so Pi "
                                f"refuses to start (Tool \"{clash[0]}\" conflicts ...); remove one of "
                                f"them: {extension.remove}"))
    return checks


def pi_folder_trust(agent: Path, cwd: Path) -> tuple[bool | None, str]:
    """Pi's own folder trust for `cwd`: the nearest entry of `<agent>/trust.json` (True, False),
    else its `defaultProjectTrust` setting ("always", "never"; "ask" or none: None), and where
    that was read."""
    store = doctor_conflicts.read_json(agent / "trust.json")
    folder = Path(os.path.realpath(cwd))
    for place in (folder, *folder.parents):
        decision = store.get(str(place))
        if isinstance(decision, bool):
            return decision, f"{agent / 'trust.json'} says {'yes' if decision else 'no'} for {place}"
    default = doctor_conflicts.read_json(agent / "settings.json").get("defaultProjectTrust")
    if default in ("always", "never"):
        return default == "always", f"defaultProjectTrust is {default!r} in {agent / 'settings.json'}"
    return None, "Pi has not decided about this folder"


def check_pi_folder_trust(agent: Path, cwd: Path, installs: list[tuple[str, Path, bool]]) -> list[Check]:
    """A project install of the bridge loads only in a folder Pi trusts (its own trust, not the
    router's): on a second machine nothing else says that it is not loaded."""
    if {scope for scope, _, _ in installs} != {"project"}:  # a user install runs in every folder
        return []
    trusted, why = pi_folder_trust(agent, cwd)
    label = "pi folder trust"
    if trusted:
        return [Check(True, label, f"{why}: Pi loads the project's bridge")]
    fix = ("start `pi` here and choose Trust (or type /trust), or install the bridge for your user "
           "as well: `router install`")
    if trusted is False:
        return [Check(False, label, f"{why}: Pi does not load the project's bridge; {fix}")]
    return [Check(True, label, f"{why}: an interactive pi asks once, while `pi -p` and RPC runs skip the "
                  f"project's bridge without a word; {fix}", warn=True)]


def check_two_copies(installs: list[tuple[str, Path, bool]]) -> list[Check]:
    """One line when the bridge is installed both for the user and for this project."""
    if {scope for scope, _, _ in installs} != {"user", "project"}:
        return []
    return [Check(True, "bridge copies", "installed for the user and for this project; Pi runs only "
                  "the first copy it loads (the user's; the project's under --approve) and the other "
                  "does nothing: keep one (`router install --project --uninstall`)")]


def run(cwd: Path, agent: Path) -> tuple[int, str]:
    pi = shutil.which("pi")
    checks = check_pi(pi)
    installs = installed_state(agent=agent, cwd=cwd)
    if not installs:
        checks.append(Check(False, "bridge", "not installed (run `router install`)"))
    # the command the bridge resolves: the environment, the user's own install, PATH; never a project's files
    resolved = resolve(os.environ, agent)
    for scope, target, current in installs:
        note = "" if current else " is outdated: run `router install`"
        checks.append(Check(current, f"bridge ({scope})", f"{target}{note}"))
        command = configured_command(target)
        if scope == "user":
            checks.append(check_configured(scope, target, command))
        else:
            checks.append(check_project_command(command, resolved))
    checks += check_two_copies(installs)
    checks += check_pi_folder_trust(agent, cwd, installs)
    loaded = load_layered(cwd, agent=agent)
    policy = loaded.policy
    checks += check_policy(loaded)
    checks += check_extensions(agent, cwd, policy)
    checks += [Check(True, "project policy", policy_note.warning_text(item), warn=True)
               for item in policy_note.not_loaded(cwd)]
    checks += check_trust(cwd, agent)
    started = resolved if installs else Resolved(serve_command(), "this interpreter: no bridge is installed")
    checks.append(Check(True, "sidecar from", started.describe()))
    checks.append(check_sidecar(cwd, agent, started.command))
    fine, warm_state = warm.status(started.command, os.environ)
    checks.append(Check(True, "warm sidecar", warm_state, warn=not fine))
    if policy is not None:
        virtual = {f"{v['provider']}/{v['id']}" for v in policy.virtual_models}
        checks += check_models(pi, policy_models(policy), virtual)
    ok = all(c.ok for c in checks)
    return (0 if ok else 1), "\n".join(c.render() for c in checks)
