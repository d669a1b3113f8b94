"""Regenerate the session corpus in this directory from real Pi 1.6.0 runs (run by hand).

    python3 examples/sessions/generate.py

Each scenario starts a real Pi (RPC mode, the e2e harness: tests/e2e/pi_harness.py) with the
router's bridge and the loopback fake provider (tests/e2e/fake_provider.py) playing every
model, switches on one built-in pack and sends a few prompts:

- decision: the model calls `decision_request`; the child agent is off, so the pack's fallback
  answers (the recommended option) and audits;
- deepseek: on deepseek-v4-pro, a build task (react band, core tools, then the full set after the
  first call) and a review task (spec band);
- cuttle: `/cuttle on` routes through cuttle/auto; the llama.cpp classifier scores the first
  prompt standard (local model) and the second complex (cloud model).

Pi's session files are copied here as `<scenario>.jsonl`, with the decision log of the run
(`<agent>/router/log/decisions*.jsonl`) when the router wrote one, and one models.json with the
fake models' prices (its address and key neutral). Machine paths (the temporary directory, this
checkout, Pi's install, $HOME) are replaced by neutral ones, so the files hold no machine paths
and no secrets. `router replay examples/sessions` reads them back.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.conftest import started_rpcs  # noqa: E402
from tests.e2e.fake_provider import FakeProvider, Reply  # noqa: E402
from tests.e2e.helpers_cuttle import base_config, p_complex, setup_cuttle  # noqa: E402
from tests.e2e.helpers_decision import POLICY as DECISION_POLICY  # noqa: E402
from tests.e2e.helpers_decision import Provider, decide, decision_env  # noqa: E402
from tests.e2e.helpers_deepseek import PRO  # noqa: E402
from tests.e2e.helpers_deepseek import setup as setup_deepseek  # noqa: E402
from tests.e2e.helpers_router import RouterRig, command, make_rig, read_call  # noqa: E402
from tests.e2e.pi_harness import ensure_pi  # noqa: E402

PROJECT = "/home/user/project"
NEUTRAL = {"agent": "/home/user/.pi/agent", "work": PROJECT, "tmp": "/home/user/tmp",
           "root": "/opt/pi-policy-router", "pi": "/opt/pi", "home": "/home/user"}
DEEPSEEK = {"id": "deepseek-v4-pro", "name": "deepseek-v4-pro", "reasoning": True, "input": ["text"],
            "contextWindow": 128000, "maxTokens": 16384,
            "cost": {"input": 0.5, "output": 2, "cacheRead": 0.05, "cacheWrite": 0.5}}
Scenario = Callable[[RouterRig], None]


def decision(rig: RouterRig) -> None:
    rig.policy(DECISION_POLICY)
    question = {"question": "Which database should the service use?",
                "options": ["Postgres", "SQLite (Recommended)"]}
    Provider(rig, [decide(question), Reply(text="Going with SQLite."), Reply(text="Done.")])
    rpc = rig.rpc(session=True, env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0"))
    rpc.prompt_and_wait("set up the storage layer")
    rpc.prompt_and_wait("now write the migration")


def deepseek(rig: RouterRig) -> None:
    setup_deepseek(rig)
    rig.fake.script.push(read_call(rig), Reply(text="Built it."), Reply(text="The parser looks fine."))
    rpc = rig.rpc(*PRO, session=True)
    rpc.prompt_and_wait("build a new command-line tool")
    rpc.prompt_and_wait("review the parser for bugs")


def cuttle(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config(policy={"mode": "complexity", "threshold": 0.5, "reclassify": "turn"}))
    rig.fake.script.push(Reply(text="Here are the files."), read_call(rig), Reply(text="Refactored."))
    rpc = rig.rpc("--offline", session=True)
    command(rpc, "/cuttle on")
    p_complex(rig, 0.04)
    rpc.prompt_and_wait("list the files")
    p_complex(rig, 0.93)
    rpc.prompt_and_wait("Refactor the architecture of the parser")


SCENARIOS: dict[str, Scenario] = {"decision": decision, "deepseek": deepseek, "cuttle": cuttle}


def run(name: str, scenario: Scenario, tmp: Path, out: Path) -> None:
    work = tmp / "work"
    work.mkdir(parents=True)
    install = ensure_pi()
    with FakeProvider(log_path=tmp / "requests.jsonl") as fake, started_rpcs(tmp, install, work) as start:
        rig = make_rig(tmp, fake, install, work, start)
        base_url = fake.base_url
        scenario(rig)
    places = {str(tmp / "agent"): NEUTRAL["agent"], str(work): NEUTRAL["work"], str(tmp): NEUTRAL["tmp"],
              str(ROOT): NEUTRAL["root"], str(install.root): NEUTRAL["pi"], str(Path.home()): NEUTRAL["home"],
              base_url: "http://127.0.0.1:8080"}
    files = sorted((tmp / "sessions").rglob("*.jsonl"))
    for index, path in enumerate(files):
        suffix = f"-{index + 1}" if len(files) > 1 else ""
        (out / f"{name}{suffix}.jsonl").write_text(scrub(path.read_text(), places))
    for log in sorted((tmp / "agent" / "router" / "log").glob("decisions*.jsonl")):
        target = out / log.name.replace("decisions", f"decisions.{name}", 1)  # decisions.<scenario>.jsonl
        target.write_text(scrub(log.read_text(), places))
    if name == "cuttle":  # the widest catalog: every model the scenarios use, with prices
        write_models(tmp / "agent" / "models.json", out / "models.json", places)


def write_models(source: Path, target: Path, places: dict[str, str]) -> None:
    """The cuttle run's models.json (the fake provider's local and cloud models) plus the deepseek
    scenario's model, with a neutral address and key."""
    data = json.loads(scrub(source.read_text(), places))
    for provider in data.get("providers", {}).values():
        provider["apiKey"] = "none"
        models = provider.get("models", [])
        if provider.get("api") == "openai-completions" and DEEPSEEK["id"] not in {m["id"] for m in models}:
            provider["models"] = [*models, DEEPSEEK]
    target.write_text(json.dumps(data, indent=2) + "\n")


def scrub(text: str, places: dict[str, str]) -> str:
    """Neutral paths for machine ones, longest first (so a path inside another goes first)."""
    for real in sorted(places, key=len, reverse=True):
        text = text.replace(real, places[real])
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:8080", text)


def main() -> int:
    for stale in HERE.glob("*.jsonl"):
        stale.unlink()
    for name, scenario in SCENARIOS.items():
        tmp = Path(tempfile.mkdtemp(prefix=f"router-corpus-{name}-"))
        try:
            run(name, scenario, tmp, HERE)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{name}: done")
    total = sum(p.stat().st_size for p in HERE.iterdir() if p.is_file())
    print(f"{HERE.name}: {total // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
