"""Start-up off the critical path: the declarations cache (router/bridge/startup.mjs,
router/runtime/declarations_cache.py) registers the policy's virtual models before the sidecar
answers; a changed policy file or a corrupt cache costs only the wait, never a stale decision."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, write_policy

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

GATED = Path(__file__).resolve().parent / "gated_sidecar.py"


def routing(model_id: str, target: str) -> str:
    return f"""
        virtual_models:
          - {{provider: router, id: {model_id}}}
        rules:
          - id: to-target
            on: route
            do:
              - route: {{model: {target}}}
    """


def entries(rig: RouterRig) -> list[Path]:
    directory = rig.agent / "router" / "declarations"
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def cached_models(entry: Path) -> list[str]:
    declared = json.loads(json.loads(entry.read_text())["declarations"])
    return [m["id"] for m in declared["virtual_models"]]


def gated_env(rig: RouterRig, gate: Path, hello_ms: int = 1500) -> dict[str, str]:
    """The rig's environment with a sidecar that answers only while `gate` is absent; a held run
    gives up on the hello after `hello_ms` (an open gate keeps the rig's long wait)."""
    serve = [sys.executable, str(GATED), str(gate)]
    return {**rig.env, "ROUTER_SERVE": json.dumps(serve), "ROUTER_BRIDGE_HELLO_TIMEOUT_MS": str(hello_ms)}


def test_first_run_writes_the_cache_and_the_second_routes_with_it(rig: RouterRig) -> None:
    rig.policy(routing("auto", "fake/fake-cloud"))
    rig.fake.script.push(Reply(text="one"), Reply(text="two"))

    first = rig.print("--model", "router/auto", "hello")
    [entry] = entries(rig)
    second = rig.print("--model", "router/auto", "hello again")

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    data = json.loads(entry.read_text())
    assert json.loads(data["declarations"])["virtual_models"][0]["id"] == "auto"
    assert {str(rig.policy_path), str(rig.agent / "router" / "trust.json")} <= {f[0] for f in data["files"]}
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-cloud", "fake-cloud"]


def test_cached_virtual_model_is_registered_before_the_sidecar_answers(rig: RouterRig,
                                                                       tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    rig.policy(routing("auto", "fake/fake-cloud"))
    rig.fake.script.push(Reply(text="one"), Reply(text="two"))
    first = rig.print("--model", "router/auto", "hello", env=gated_env(rig, gate, hello_ms=60000))
    assert first.returncode == 0, first.stderr  # writes the cache

    gate.write_text("hold")  # the same sidecar command, which now never says hello
    held = rig.print("--model", "router/auto", "hello again", env=gated_env(rig, gate))

    assert held.returncode == 0, held.stderr  # Pi resolved router/auto: registered from the cache
    assert "the policy engine did not start" in held.stderr
    # no engine: Pi's native fallback (the first physical model), never a made-up route
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-cloud", "fake-local"]


def test_without_a_cache_a_silent_sidecar_leaves_no_virtual_model(rig: RouterRig, tmp_path: Path) -> None:
    """Control for the test above: the virtual model came from the cache, not from elsewhere."""
    gate = tmp_path / "gate"
    gate.write_text("hold")
    rig.policy(routing("auto", "fake/fake-cloud"))

    held = rig.print("--model", "router/auto", "hello", env=gated_env(rig, gate))

    assert entries(rig) == []
    assert held.returncode != 0 and rig.fake.chat_requests() == [], held.stderr


def test_a_changed_policy_file_is_picked_up_in_the_same_run(rig: RouterRig) -> None:
    rig.policy(routing("auto", "fake/fake-local"))
    rig.fake.script.push(Reply(text="one"), Reply(text="two"))
    assert rig.print("--model", "router/auto", "hello").returncode == 0
    [before] = entries(rig)
    old = before.read_text()

    rig.policy(routing("smart", "fake/fake-cloud"))  # another virtual model, another target
    done = rig.print("--model", "router/smart", "hello again")

    assert done.returncode == 0, done.stderr
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-local", "fake-cloud"]
    [after] = entries(rig)
    assert after.read_text() != old and "smart" in json.loads(after.read_text())["declarations"]


def test_a_corrupt_cache_costs_only_the_wait(rig: RouterRig) -> None:
    rig.policy(routing("auto", "fake/fake-cloud"))
    rig.fake.script.push(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    assert rig.print("--model", "router/auto", "hello").returncode == 0
    [entry] = entries(rig)
    text = entry.read_text()

    entry.write_text(text[: len(text) // 2])  # cut short: not JSON
    cut = rig.print("--model", "router/auto", "after a cut")
    edited = text.replace('\\"id\\":\\"auto\\"', '\\"id\\":\\"stale\\"')
    assert edited != text
    entry.write_text(edited)  # well-formed JSON, the declarations edited
    wrong = rig.print("--model", "router/auto", "after a wrong entry")

    assert (cut.returncode, wrong.returncode) == (0, 0), cut.stderr + wrong.stderr
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-cloud"] * 3
    assert json.loads(json.loads(entry.read_text())["declarations"])["virtual_models"][0]["id"] == "auto"


def test_trusting_the_project_is_picked_up_in_the_next_run(rig: RouterRig) -> None:
    """The project declares its own virtual model: untrusted, the cache holds the user's
    declarations only; `router trust` changes the trust store, so the next run waits for the
    engine and registers the project's model."""
    rig.policy(routing("auto", "fake/fake-local"))
    write_policy(rig.work / ".pi" / "router.yaml", routing("project", "fake/fake-cloud"))
    rig.fake.script.push(Reply(text="one"), Reply(text="two"))
    untrusted = rig.print("--model", "router/auto", "hello")
    [entry] = entries(rig)
    assert cached_models(entry) == ["auto"]

    assert rig.router("trust", "--yes").returncode == 0
    trusted = rig.print("--model", "router/project", "hello again")

    assert (untrusted.returncode, trusted.returncode) == (0, 0), untrusted.stderr + trusted.stderr
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-local", "fake-cloud"]
    assert cached_models(entry) == ["auto", "project"]
