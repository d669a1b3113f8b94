"""OpenTelemetry: a real sidecar exports a span and metrics per decision to an OTLP/HTTP receiver.

The receiver is a tiny http.server on 127.0.0.1 that decodes the protobuf requests with
opentelemetry-proto (a dependency of the exporter). Without the environment variable, the
sidecar never imports OpenTelemetry at all.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from router.load.paths import project_identity
from router.runtime import protocol
from router.runtime.decision_log import digest_key
from tests.runtime.test_server import ROOT, Reader

SECRET_PROMPT = "the secret plan for the launch"
POLICY = """\
version: 1
provides: {model_choice: {tier: cu.tier}}
rules:
  - id: to-big
    on: input
    match: "contains(text, 'plan')"
    do:
      - model: fake/big
      - set: {cu.tier: cloud}
  - id: note
    on: input
    group: notes
    do: [{notify: "seen: {text}"}]
  - id: guard
    on: tool_call
    match: "tool.name == 'bash'"
    do: [{block: {reason: "no shell"}}]
"""


class Receiver:
    """Collects OTLP/HTTP export requests (traces and metrics), decoded."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.metrics: list[Any] = []
        self.resources: list[dict[str, Any]] = []
        self.raw = b""
        self.got_spans = threading.Event()
        self.got_metrics = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self, path: str, body: bytes) -> None:
        self.raw += body
        if path == "/v1/traces":
            traces = ExportTraceServiceRequest.FromString(body)
            for resource_spans in traces.resource_spans:
                self.resources.append(attributes(resource_spans.resource.attributes))
                for scope in resource_spans.scope_spans:
                    self.spans.extend(scope.spans)
            self.got_spans.set()
        elif path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in metrics.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    self.metrics.extend(scope.metrics)
            self.got_metrics.set()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(items: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in items if isinstance(kv, KeyValue)}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def event(text: str | None, seq_session: str = "s-otel", cwd: str = "/w") -> dict[str, Any]:
    payload: dict[str, Any] = {"text": text, "source": "rpc"} if text is not None else {
        "toolName": "bash", "toolCallId": "c1", "input": {"command": "ls"}}
    return {"type": "input" if text is not None else "tool_call", "payload": payload,
            "ctx": {"cwd": cwd, "sessionId": seq_session, "model": {"provider": "fake", "id": "m1"}}}


def serve(tmp_path: Path, env: dict[str, str], events: list[dict[str, Any]], *,
          killed_after_shutdown: bool = False, policy: str = POLICY,
          hello: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run a real `router serve`: hello, the events, shutdown; the event answers. With
    `killed_after_shutdown`, SIGKILL it as soon as `shutdown` is answered (what the bridge does
    when Pi exits after a `pi -p` run)."""
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    agent.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    (agent / "router.yaml").write_text(policy)
    argv = [sys.executable, "-m", "router", "serve", "--cwd", str(cwd), "--agent-dir", str(agent)]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    full_env.update({"PI_CODING_AGENT_DIR": str(agent), "NO_PROXY": "127.0.0.1", **env})
    answers = []
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env=full_env) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)
        try:
            params = {"cwd": str(cwd), **(hello or {})}
            process.stdin.write(protocol.encode({"id": 0, "method": "hello", "params": params}))
            process.stdin.flush()
            assert reader.answer()["id"] == 0
            for number, params in enumerate(events, start=1):
                process.stdin.write(protocol.encode({"id": number, "method": "event", "params": params}))
                process.stdin.flush()
                answers.append(reader.answer()["result"])
            process.stdin.write(protocol.encode({"id": 99, "method": "shutdown", "params": {}}))
            process.stdin.flush()
            assert reader.answer() == {"id": 99, "result": {}}
            if killed_after_shutdown:
                process.kill()
            assert process.wait(timeout=60) == (-9 if killed_after_shutdown else 0)
        finally:
            if process.poll() is None:
                process.kill()
    return answers


def test_a_span_and_metrics_per_decision_reach_the_otlp_receiver(tmp_path: Path, receiver: Receiver) -> None:
    answers = serve(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                               "OTEL_METRIC_EXPORT_INTERVAL": "600000"},
                    [event(SECRET_PROMPT), event(None), event("hello")])
    assert [a["fired"] for a in answers] == [["to-big", "note"], ["guard"], ["note"]]
    assert not [w for a in answers for w in a["warnings"]]
    assert receiver.got_spans.wait(30) and receiver.got_metrics.wait(30)  # flushed at exit

    assert receiver.resources[0]["service.name"] == "pi-policy-router"
    spans = [(span.name, attributes(span.attributes)) for span in receiver.spans]
    assert [name for name, _ in spans] == ["router.decision"] * 3
    first, second, third = (attrs for _, attrs in spans)
    assert first["router.event"] == "input" and first["router.rules"] == ["to-big", "note"]
    assert first["router.model"] == "fake/big" and first["router.tier"] == "cloud"
    assert first["router.policy"].startswith("sha256:") and first["router.session"] == "s-otel"
    assert isinstance(first["router.latency_ms"], float)
    assert second["router.event"] == "tool_call" and second["router.rules"] == ["guard"]
    assert third["router.model"] == "fake/m1" and third["router.seq"] == 1
    assert all(span.end_time_unix_nano >= span.start_time_unix_nano for span in receiver.spans)

    metrics = {m.name: m for m in receiver.metrics}
    assert set(metrics) == {"router.decisions", "router.model.choices", "router.decision.latency"}
    by_rule = {(attributes(p.attributes)["router.event"], attributes(p.attributes)["router.rule"]): p.as_int
               for p in metrics["router.decisions"].sum.data_points}
    assert by_rule == {("input", "to-big"): 1, ("input", "note"): 2, ("tool_call", "guard"): 1}
    choices = {(attributes(p.attributes)["router.model"], attributes(p.attributes)["router.tier"]): p.as_int
               for p in metrics["router.model.choices"].sum.data_points}
    assert choices == {("fake/big", "cloud"): 1, ("fake/m1", ""): 2}
    latency = metrics["router.decision.latency"]
    assert latency.unit == "ms" and sum(p.count for p in latency.histogram.data_points) == 3
    assert SECRET_PROMPT.encode() not in receiver.raw and b"the secret" not in receiver.raw


def test_the_resource_names_the_project_policy_and_packs_under_what_the_environment_sets(
        tmp_path: Path, receiver: Receiver) -> None:
    import hashlib

    from router import __version__

    serve(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                     "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,team=pay%20ments,"
                                                 "service.name=ignored-by-service-name",
                     "OTEL_SERVICE_NAME": "routers-of-team-a"},
          [event("hello", cwd=str(tmp_path / "proj"))])
    assert receiver.got_spans.wait(30) and receiver.got_metrics.wait(30)
    [resource, *_] = receiver.resources
    assert resource["service.name"] == "routers-of-team-a"  # OTEL_SERVICE_NAME wins, as in the SDK
    assert resource["service.version"] == __version__
    assert (resource["deployment.environment"], resource["team"]) == ("ci", "pay ments")
    assert resource["router.project.name"] == "proj"
    root = str((tmp_path / "proj").resolve()).encode()
    keyed = project_identity(tmp_path / "proj", digest_key(tmp_path / "agent"))  # the log's key
    unkeyed = hashlib.sha256(root).hexdigest()[:12]
    assert resource["router.project.digest"] == (keyed or {})["digest"] != unkeyed
    span = attributes(receiver.spans[0].attributes)
    assert resource["router.policy.digest"] == span["router.policy"]
    assert resource["router.packs"] == ["default"]
    assert resource["router.pack.default.version"].startswith(__version__ + "+")
    by_default = Receiver()
    try:
        serve(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": by_default.endpoint}, [event("hello")])
        assert by_default.got_spans.wait(30)
        assert by_default.resources[0]["service.name"] == "pi-policy-router"
    finally:
        by_default.close()


def test_everything_is_exported_before_shutdown_is_answered(tmp_path: Path, receiver: Receiver) -> None:
    # a `pi -p` run: Pi exits right after session_shutdown and the bridge kills the sidecar; long
    # export intervals, so only the flush on `shutdown` can have sent them
    serve(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                     "OTEL_METRIC_EXPORT_INTERVAL": "600000", "OTEL_BSP_SCHEDULE_DELAY": "600000"},
          [event(SECRET_PROMPT), event("hello")], killed_after_shutdown=True)
    assert receiver.got_spans.is_set() and receiver.got_metrics.is_set()  # before the answer, not after
    assert len(receiver.spans) == 2
    assert {m.name for m in receiver.metrics} == {"router.decisions", "router.model.choices",
                                                  "router.decision.latency"}


def test_hello_announces_the_shutdown_wait_the_flush_needs(tmp_path: Path, receiver: Receiver,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from router.runtime.server import SHUTDOWN_MS, TELEMETRY_FLUSH_MS
    from tests.runtime.test_server import Rig

    assert Rig(tmp_path / "plain", "version: 1\n").hello()["shutdown_ms"] == SHUTDOWN_MS
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    exporting = Rig(tmp_path / "otel", "version: 1\n")
    assert exporting.hello()["shutdown_ms"] == SHUTDOWN_MS + 2 * TELEMETRY_FLUSH_MS
    exporting.engine.observer.close()


def test_without_an_endpoint_opentelemetry_is_never_imported(tmp_path: Path) -> None:
    script = f"""
import asyncio, json, sys
from pathlib import Path
from tests.runtime.test_server import Rig
rig = Rig(Path({str(tmp_path)!r}), {POLICY!r})
rig.hello()
rig.event({json.dumps(event(SECRET_PROMPT))})
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_missing_extra_is_one_warning_and_decisions_go_on(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(  # as if the extra were not installed
        "import sys\nsys.modules['opentelemetry.sdk'] = None\n")
    answers = serve(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                               "PYTHONPATH": str(blocker)}, [event("hello"), event("again")])
    assert [a["fired"] for a in answers] == [["note"], ["note"]]
    warned = [w for a in answers for w in a["warnings"] if "OpenTelemetry" in w]
    assert len(warned) == 1 and "pip install 'pi-policy-router[otel]'" in warned[0]


def test_resource_attributes_order_ours_then_the_environments() -> None:
    from router.runtime.otel import resource_attributes

    found = resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": " team = a%2Cb , bad, =x, router.packs=mine"},
                                {"router.packs": ["default"], "router.project.name": "shop"})
    assert found["team"] == "a,b" and found["router.packs"] == "mine"  # what the user sets wins
    assert found["service.name"] == "pi-policy-router" and found["router.project.name"] == "shop"
    assert "bad" not in found and "" not in found


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(st.characters(blacklist_characters=",=%"), min_size=1, max_size=12)
                       .filter(lambda k: k.strip() == k and k != ""),
                       st.text(max_size=20), max_size=5))
def test_percent_encoded_resource_attributes_come_back_as_given(pairs: dict[str, str]) -> None:
    from urllib.parse import quote

    from router.runtime.otel import resource_attributes

    text = ",".join(f"{k}={quote(v, safe='')}" for k, v in pairs.items())
    found = resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": text}, {})
    for key, value in pairs.items():
        assert found[key] == value  # encoded, even whitespace is kept


PRICED_POLICY = """\
version: 1
provides:
  prices:
    team/mine: {input: 2, output: 8}
    box/qwen: {local: true}
rules:
  - {id: turn, on: turn_end, do: [{notify: done}]}
"""


def turn(model: str, tokens: tuple[int, int]) -> dict[str, Any]:
    usage = {"input": tokens[0], "output": tokens[1], "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 9.9}}
    return {"type": "turn_end", "payload": {"turnIndex": 0, "answeredBy": model, "usage": usage},
            "ctx": {"cwd": "/w", "sessionId": "s-cost", "model": {"provider": "fake", "id": "m1"}}}


def test_turns_and_their_cost_are_exported_by_model_and_price_source(tmp_path: Path,
                                                                     receiver: Receiver) -> None:
    """`router.turns` counts every answered turn by where its price came from (`unknown` when its
    model has none); `router.cost` adds up the priced ones only, priced as the decision log does."""
    models = [{"provider": "fake", "id": "cloud", "cost": {"input": 3, "output": 15, "cacheRead": 0,
                                                           "cacheWrite": 0}},
              {"provider": "fake", "id": "free", "cost": {"input": 0, "output": 0}}]
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    turns = [turn("fake/cloud", (1_000_000, 100_000)), turn("team/mine", (500_000, 0)),
             turn("box/qwen", (10, 10)), turn("fake/free", (10, 10)), turn("fake/cloud", (0, 100_000))]
    serve(tmp_path, env, turns, policy=PRICED_POLICY, hello={"models": models})
    assert receiver.got_metrics.wait(30)  # flushed before shutdown was answered
    metrics = {m.name: m for m in receiver.metrics}

    def by(name: str) -> dict[tuple[str, str], float]:
        points = metrics[name].sum.data_points
        return {(attributes(p.attributes)["router.model"], attributes(p.attributes)["router.price_source"]):
                (p.as_double if p.HasField("as_double") else p.as_int) for p in points}

    assert by("router.turns") == {("fake/cloud", "registry"): 2, ("team/mine", "policy"): 1,
                                  ("box/qwen", "local"): 1, ("fake/free", "unknown"): 1}
    cost = by("router.cost")
    assert set(cost) == {("fake/cloud", "registry"), ("team/mine", "policy"), ("box/qwen", "local")}
    assert cost[("fake/cloud", "registry")] == pytest.approx(3.0 + 1.5 + 1.5)  # not Pi's 9.9 per turn
    assert cost[("team/mine", "policy")] == pytest.approx(1.0) and cost[("box/qwen", "local")] == 0
    assert metrics["router.cost"].unit == "USD"
    records = [json.loads(line) for line in (tmp_path / "agent" / "router" / "log" / "decisions.jsonl")
               .read_text().splitlines()]
    assert [(r.get("cost"), r.get("price_source")) for r in records] == [
        (pytest.approx(4.5), "registry"), (pytest.approx(1.0), "policy"), (0.0, "local"), (None, None),
        (pytest.approx(1.5), "registry")]
