"""OpenTelemetry from single-prompt `pi -p` runs: every decision a run made reaches a real OTLP/HTTP
receiver on loopback, although Pi exits (and the bridge kills the sidecar) right after the prompt.

The export intervals are set far beyond the run, so only the flush before `shutdown` is answered
can have sent the spans and metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from router.load.paths import project_identity
from router.runtime.decision_log import digest_key
from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig
from tests.runtime.test_otel import Receiver, attributes

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

POLICY = """
rules:
  - id: pick-cloud
    on: input
    do: [{model: fake/fake-cloud}]
  - id: turn-done
    on: turn_end
    do: [{set: {done: true}}]
"""
PRICE = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}  # fake-cloud's, in models.json


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def test_three_pi_p_runs_export_every_decision(rig: RouterRig, receiver: Receiver) -> None:
    rig.policy(POLICY)
    env = {**rig.env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "NO_PROXY": "127.0.0.1",
           "OTEL_METRIC_EXPORT_INTERVAL": "600000", "OTEL_BSP_SCHEDULE_DELAY": "600000"}
    for number in range(3):
        rig.fake.script.push(Reply(text=f"answer {number}"))
        done = rig.print(f"prompt {number}", env=env)
        assert done.returncode == 0, done.stderr
    logged = rig.router("log", "--format", "json", env=env)
    assert logged.returncode == 0, logged.stderr
    records = [json.loads(line) for line in logged.stdout.splitlines()]
    assert len([r for r in records if r["event"] == "input"]) == 3
    assert len(receiver.spans) == len(records)  # every decision of every run, none lost at exit
    assert sorted(s.name for s in receiver.spans) == ["router.decision"] * len(records)
    decisions = [m for m in receiver.metrics if m.name == "router.decisions"]
    assert len(decisions) >= 3  # a metrics export per run before it ended (another at the exit may follow)
    turns = [r for r in records if r["event"] == "turn_end"]
    assert len(turns) == 3 and {r["model"] for r in turns} == {"fake/fake-cloud"}
    for turn in turns:  # the registry's price of the answering model, with its source
        assert turn["price_source"] == "registry"
        expected = sum(turn["tokens"][key] * price for key, price in PRICE.items()) / 1e6
        assert turn["tokens"]["input"] > 0 and turn["cost"] == pytest.approx(expected)
    counted = [(attributes(p.attributes), p.as_int) for m in receiver.metrics if m.name == "router.turns"
               for p in m.sum.data_points]
    assert {(a["router.model"], a["router.price_source"]) for a, _ in counted} == {
        ("fake/fake-cloud", "registry")}
    assert len(counted) >= 3 and {n for _, n in counted} == {1}  # each run's one turn (cumulative sums)
    key = digest_key(Path(env["PI_CODING_AGENT_DIR"]))
    assert {(r["router.project.name"], r["router.project.digest"]) for r in receiver.resources} == {
        tuple((project_identity(rig.work, key) or {}).values())}
    assert {r["project"]["digest"] for r in records} == {(project_identity(rig.work, key) or {})["digest"]}
