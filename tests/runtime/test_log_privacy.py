"""The engine's own records keep no conversation (router/runtime/log_privacy.py, docs/security.md).

The canary test sends distinctive strings (long `CANARY…` ones and short ones of 4-7 letters) as a
prompt, a tool command, a tool result, a context message and an environment value the policy
reads, through every function of the language (enumerated from the registry: a new function is
covered, or this test fails asking for a way to call it), in `let:`, `when`, f-string and
single-expression templates of notify, status, set, block, input and log actions and in a
signal, then scans every file the engine wrote under the agent dir and the project, and the spans
and metrics an in-memory OpenTelemetry exporter got, for the canary in any form.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.diagnostics.errors import ExpressionError
from router.engine.decision import Decision, Effect
from router.lang.budget import DEADLINE_ENV, DEADLINE_RANGE_MS
from router.lang.expr.evaluator import run_expression
from router.lang.expr.expression import compile_expression
from router.lang.functions import registry
from router.load.paths import log_files
from router.replay.log_files import read_records
from router.runtime.decision_log import DecisionLog, LogSettings
from router.runtime.decision_record import build_record
from router.runtime.log_privacy import ENUMS, Stubber, literals_of
from router.runtime.server import Engine
from tests.runtime.test_server import FakeConnection, Rig

# --- the canary policy --------------------------------------------------------------------------

SOURCES = {  # event type -> where its conversation text is, as an expression
    "input": "text", "tool_call": "tool.input.command", "tool_result": "tool.text",
    "context": "last_user_text",
}
CALLS = (  # ways to call a function with the text `s` (those its arity takes and that compile)
    "{f}(s)", "{f}(s, s)", "{f}(s, 2)", "{f}(s, '-')", "{f}(s, 'a', s)", "{f}(', ', [s])", "{f}([s])",
    "{f}([s, s])",
    "{f}({{'k': s}})", "{f}({{'k': s}}, 'k')", "{f}(s, [s])", "{f}([s], [s])", "{f}(s, '-', '+')",
    "{f}(s, 'i')", "{f}([s], 'first_fit', {{}})", "{f}({{'answers': [{{'value': s}}]}}, [])",
)
NEEDS_NO_TEXT: frozenset[str] = frozenset()  # functions no call of CALLS reaches (none)


def calls_of(name: str, most: int = 2) -> list[str]:
    """The first `most` calls of CALLS that function `name` takes (its arity) and that compile."""
    spec = registry.FUNCTIONS[name]
    found = []
    for pattern in CALLS:
        call = pattern.format(f=name)
        arguments = _arguments(call)
        if arguments < spec.min_args or (spec.max_args is not None and arguments > spec.max_args):
            continue
        try:
            expression = compile_expression(call)
        except Exception:
            continue
        try:  # a call that gives a value made from `s` first, then those that fail (an error's text)
            value = run_expression(expression, {"s": "CANARYabc"})
            found.append((0 if "canaryabc" in json.dumps(value).lower() else 1, call))
        except ExpressionError:
            found.append((2, call))
    return [call for _, call in sorted(found, key=lambda pair: pair[0])][:most]


def _arguments(call: str) -> int:
    """How many top-level arguments a call of CALLS passes."""
    depth, count, inner, quoted = 0, 1, call[call.index("(") + 1:-1], False
    for char in inner:
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            count += 1
    return count


PAIRS = {**{event_type: (event_type, source) for event_type, source in SOURCES.items()},
         "env": ("input", "env.CANARY_ENV")}  # one canary test each: its rules -> (event type, source)


def canary_policy(data_file: Path,
                  pairs: list[tuple[str, str]] | None = None) -> tuple[str, dict[str, list[str]]]:
    """A user policy sending `s` (the event's text, or the environment value) through every
    function, and the calls it makes of each (`pairs`: the event types and sources, all by default)."""
    lines = ["version: 1", "env: [CANARY_ENV]", "signals:", "  said:",
             "    complete: {prompt: \"{text}\", timeout_ms: 3000}", "    fallback: \"'none'\"",
             "rules:"]
    covered: dict[str, list[str]] = {}
    number = 0
    for event_type, source in pairs if pairs is not None else list(PAIRS.values()):
        for origin in (source,):
            for name in registry.function_names():
                for call in calls_of(name):
                    covered.setdefault(name, []).append(call)
                    number += 1
                    text = json.dumps("{upper(s)} {v}")
                    actions = [f"notify: {json.dumps('got {v} for {s}')}",
                               f"status: {{key: k{number}, text: {json.dumps('{v}')}}}",
                               f"set: {{n{number}: {json.dumps('{v}')}}}",
                               f"log: {{text: {text}, file: {json.dumps(str(data_file))}}}"]
                    if event_type == "tool_call":
                        actions.append(f"block: {{reason: {json.dumps('no: {v}')}}}")
                    if event_type == "input":
                        actions.append(f"input: {{action: transform, text: {json.dumps('{v}')}}}")
                    lines += [f"  - id: r{number}", f"    on: {event_type}", "    continue: true", "    let:",
                              f"      s: {json.dumps(origin)}", f"      v: {json.dumps(call)}",
                              f"    when: {json.dumps(f'v != {json.dumps(name)} or s != null')}",
                              "    do:", *[f"      - {a}" for a in actions]]
    lines += ["  - id: said", "    on: input", "    continue: true",
              "    when: \"signals.said != null\"",
              "    do: [{notify: \"{signals.said}\"},",
              "         {status: {key: said, text: \"{lower(signals.said)}\"}}]"]
    return "\n".join(lines) + "\n", covered


def events_of(canary: str) -> list[dict[str, Any]]:
    ctx = {"cwd": "/w", "sessionId": "s-canary", "model": {"provider": "fake", "id": "m1"},
           "activeTools": ["bash"], "allTools": ["bash"]}
    return [
        {"type": "input", "payload": {"text": f"my password is {canary}", "source": "rpc"}, "ctx": ctx},
        {"type": "tool_call", "payload": {"toolName": "bash", "toolCallId": "c1",
                                          "input": {"command": f"export AWS_SECRET={canary} && deploy"}},
         "ctx": ctx},
        {"type": "tool_result", "payload": {"toolName": "bash", "toolCallId": "c1", "text": canary,
                                            "input": {"command": canary}}, "ctx": ctx},
        {"type": "context", "payload": {"messages": [{"role": "user", "text": canary}]}, "ctx": ctx},
    ]


def forms(canary: str) -> set[str]:
    """The canary in any form it could be written in."""
    raw = canary.encode()
    found = {canary, canary.upper(), canary.lower(), canary.casefold(), canary[::-1],
             canary[::-1].upper(), canary[::-1].lower(), raw.hex(), raw.hex().upper(),
             base64.b64encode(raw).decode().rstrip("="), json.dumps(canary)[1:-1],
             json.dumps(canary, ensure_ascii=True)[1:-1]}
    return {f for f in found if len(f) >= 4}


class MemoryTelemetry:
    """The sidecar's Telemetry with in-memory exporters (what would go over OTLP, kept here)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from router.runtime import otel

        self.spans, self.metrics = InMemorySpanExporter(), InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.telemetry = otel.Telemetry.__new__(otel.Telemetry)
        telemetry = typing.cast(Any, self.telemetry)
        telemetry.tracer_provider = tracer_provider
        telemetry.meter_provider = MeterProvider(metric_readers=[self.metrics])
        telemetry.tracer = tracer_provider.get_tracer("router")
        meter = telemetry.meter_provider.get_meter("router")
        telemetry.decisions = meter.create_counter(otel.DECISIONS)
        telemetry.choices = meter.create_counter(otel.MODEL_CHOICES)
        telemetry.latency = meter.create_histogram(otel.LATENCY)

    def text(self) -> str:
        spans = [json.loads(span.to_json()) for span in self.spans.get_finished_spans()]
        data = self.metrics.get_metrics_data()
        return json.dumps(spans) + (data.to_json() if data is not None else "")


@pytest.fixture(scope="module")
def canary_rules() -> Iterator[tuple[str, dict[str, list[str]], Path]]:
    with tempfile.TemporaryDirectory() as root:
        data_file = Path(root) / "policy-data.log"
        text, covered = canary_policy(data_file)
        yield text, covered, data_file


@pytest.fixture(scope="module")
def canary_policies() -> Iterator[dict[str, tuple[str, Path]]]:
    """The canary policy split by source (PAIRS), so that pytest-xdist spreads the canary test."""
    with tempfile.TemporaryDirectory() as root:
        found = {}
        for name, pair in PAIRS.items():
            data_file = Path(root) / f"policy-data-{name}.log"
            found[name] = (canary_policy(data_file, [pair])[0], data_file)
        yield found


class KeptRig(Rig):
    """A Rig over the directories of the previous example, their files gone but the policy (its
    stamp unchanged) and the engine's compiled-policy cache: the engine starts as a sidecar does
    after the first, from that cache (a full compile of the canary policy each example, eight
    times over, was most of the test's time)."""

    def __init__(self, root: Path, policy: str, **replies: Any) -> None:
        self.agent, self.cwd = root / "agent", root / "proj"
        self.policy = self.agent / "router.yaml"
        cache = self.agent / "router" / "cache"
        for path in sorted(root.rglob("*"), reverse=True) if root.exists() else []:
            if path.is_file() and path != self.policy and cache not in path.parents:
                path.unlink()
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.agent.mkdir(exist_ok=True)
        if not self.policy.exists() or self.policy.read_text() != policy:
            self.policy.write_text(policy)
        self.connection = FakeConnection(replies)
        self.engine = Engine(self.connection, cwd=self.cwd, agent=self.agent, extra=[])  # type: ignore[arg-type]


RUNS: list[tuple[int, int]] = []


def run_canaries(policy: str, data_file: Path, canary: str, env_canary: str,
                 root: Path) -> tuple[str, list[str]]:
    """Drive the engine with the canary events; every file it wrote and what telemetry got.
    The directories of the previous run under `root` are used again (KeptRig)."""
    previous = {name: os.environ.get(name) for name in ("CANARY_ENV", DEADLINE_ENV)}
    os.environ["CANARY_ENV"] = env_canary
    # the engine's deadline at its longest: on a busy machine the 1.5 s one skips the rules that
    # cannot block (RT404), and the test would prove nothing of the calls it skipped
    os.environ[DEADLINE_ENV] = str(DEADLINE_RANGE_MS[1])
    try:
        rig = KeptRig(root, policy, complete={"text": f"you said {canary}"})
        memory = MemoryTelemetry()
        rig.engine.observer.telemetry = memory.telemetry
        rig.hello()
        fired = 0
        for event in events_of(canary):
            fired += len(rig.event(event).get("fired", []))  # an event no rule of this policy is on: none
        rig.engine.observer.close()
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    written = [p for p in root.rglob("*") if p.is_file() and p != rig.policy]
    texts = [p.read_bytes().decode("utf-8", "replace") for p in written]
    names = [str(p.relative_to(root)) for p in written]
    RUNS.append((fired, len(written)))
    assert any(n.startswith("agent/router/log/decisions") for n in names)
    return memory.text(), [f"{n}\n{t}" for n, t in zip(names, texts, strict=True)]


def assert_no_canary(found: list[str], canaries: list[str]) -> None:
    for canary in canaries:
        for form in forms(canary):
            leaks = [text.split("\n", 1)[0] for text in found if form in text]
            assert not leaks, f"{form!r} (of {canary!r}) found in {leaks}"


HEX = "0123456789abcdef"
LETTERS = "QXZJKVW"  # no hex digit, rare in paths and JSON keys: a short canary is still distinctive
long_canaries = st.text(HEX, min_size=12, max_size=24).map(lambda h: f"CANARY{h}")
short_canaries = st.text(LETTERS + LETTERS.lower(), min_size=4, max_size=7).filter(
    lambda t: len(set(t.lower())) > 2)


@pytest.mark.parametrize("source", list(PAIRS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(canary=st.one_of(long_canaries, short_canaries), env_canary=st.one_of(long_canaries, short_canaries))
def test_no_canary_reaches_a_file_the_engine_wrote_nor_telemetry(
        canary_policies: dict[str, tuple[str, Path]], source: str, tmp_path: Path, canary: str,
        env_canary: str) -> None:
    policy, data_file = canary_policies[source]
    data_file.unlink(missing_ok=True)
    telemetry, files = run_canaries(policy, data_file, canary, env_canary, root=tmp_path / "engine")
    assert_no_canary([*files, telemetry], [canary, env_canary])
    # the boundary: a file the policy itself writes (its `log` action's) holds what it asked for
    assert (env_canary if source == "env" else canary).upper() in data_file.read_text()


def test_the_canary_policy_covers_every_function_of_the_language(
        canary_rules: tuple[str, dict[str, list[str]], Path]) -> None:
    policy, covered, _ = canary_rules
    missing = sorted(set(registry.function_names()) - set(covered) - NEEDS_NO_TEXT)
    assert not missing, f"add to CALLS a way to call {missing} with a text"
    [compiled, diagnostics] = compile_files([("user", _write(policy))])[:2]
    assert compiled is not None, diagnostics
    calls = sum(len(set(c)) for c in covered.values())
    print(f"canary coverage: {len(covered)} functions, {calls} calls, "
          f"{len(compiled.rules)} rules over {len(SOURCES)} event types and the environment")
    assert len(covered) == len(registry.FUNCTIONS)


def _write(text: str) -> Path:
    fd, name = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return Path(name)


def test_a_function_that_returns_the_text_is_really_evaluated() -> None:
    """The canary test would prove nothing if the calls failed: most give a value from `s`."""
    results = {}
    for name in registry.function_names():
        for call in calls_of(name):
            try:
                value = run_expression(compile_expression(call), {"s": "CANARYabc"})
            except ExpressionError:
                continue
            shown = json.dumps(value).lower()
            if "canaryabc" in shown or "cbayranac" in shown or shown.strip('"') in ("ca", "bc"):
                results[name] = call
    print(f"canary coverage: {len(results)} functions give a value made from the text")
    assert {"upper", "lower", "replace", "join", "split", "head", "tail", "trim", "regex_find",
            "to_json", "not_null", "to_array", "merge", "zip"} <= set(results)


# --- the record builder -------------------------------------------------------------------------

POLICY = """\
version: 1
vars: {cloud: fake/cloud}
provides: {model_choice: {tier: cu.tier}}
rules:
  - id: r
    on: input
    do:
      - notify: {text: "hi {text}", level: warning}
      - notify: "a fixed text"
      - model: "{vars.cloud}"
      - set: {cu.tier: "{text}", mood: fixed}
      - thinking: {level: high}
"""


def compiled(text: str = POLICY) -> Any:
    policy, diagnostics = compile_files([("user", _write(text))])[:2]
    assert policy is not None, diagnostics
    return policy


def record_for(effects: list[Effect], settings: LogSettings | None = None, **event: Any) -> dict[str, Any]:
    policy, settings = compiled(), settings or LogSettings()
    decision = Decision("input", effects=tuple(effects), fired=("r",))
    return build_record(policy=policy, event={"type": "input", **event}, decision=decision, session="s",
                        seq=0, latency_ms=1.0, policy_hash="sha256:x", settings=settings,
                        secrets={"TOKEN": "tok-123456"}, key=b"k" * 32)


def test_the_record_keeps_literals_enums_and_known_names_and_stubs_any_other_text() -> None:
    record = record_for([Effect("notify", {"text": "hi Secret", "level": "warning"}, "r"),
                         Effect("notify", {"text": "a fixed text"}, "r"),
                         Effect("model", {"ref": "fake/cloud"}, "r"),
                         Effect("set", {"cu.tier": "Secret", "mood": "fixed"}, "r"),
                         Effect("thinking", {"level": "high"}, "r")], text="Secret")
    params = [a["params"] for a in record["actions"]]
    assert params[0]["level"] == "warning" and params[0]["text"].startswith("<text:9:")
    assert params[1] == {"text": "a fixed text"}  # the policy's own words
    assert params[2] == {"ref": "fake/cloud"} and record["model"] == "fake/cloud"
    assert params[3]["mood"] == "fixed" and params[3]["cu.tier"].startswith("<text:6:")
    assert record["tier"] == params[3]["cu.tier"] and params[4] == {"level": "high"}
    assert "Secret" not in json.dumps(record) and "text" not in record


def test_a_model_of_the_catalog_is_kept_and_an_unknown_one_stubbed() -> None:
    known = record_for([Effect("model", {"ref": "acme/big"}, "r")], models={"acme/big": {}})
    unknown = record_for([Effect("model", {"ref": "acme/Secret"}, "r")], models={"acme/big": {}})
    assert known["model"] == "acme/big" and unknown["model"].startswith("<text:11:")


def test_equal_texts_have_equal_stubs_and_the_digest_is_keyed() -> None:
    one = Stubber(b"a" * 32, frozenset(), frozenset(), {})
    other = Stubber(b"b" * 32, frozenset(), frozenset(), {})
    assert one.stub("pass") == one.stub("pass") != one.stub("pasS")
    assert one.stub("pass") != other.stub("pass")  # a guess hashed without the key finds nothing
    assert one.error("RT402 regex 'pass' does not compile").startswith("RT402 <text:")


def test_keep_text_in_your_own_file_keeps_the_text_but_never_an_environment_value() -> None:
    effects = [Effect("notify", {"text": "hi Secret tok-123456"}, "r")]
    kept = record_for(effects, LogSettings(keep_text=("actions", "prompt")), text="Secret")
    assert kept["actions"][0]["params"]["text"] == "hi Secret <$TOKEN>" and kept["text"] == "Secret"
    assert LogSettings(prompts=True).kept == {"prompt", "actions", "signals", "errors"}


def test_a_project_keep_text_is_ignored_with_a_located_warning(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\nrules:\n  - {id: u, on: input, do: [{notify: 'u {text}'}]}\n")
    (rig.cwd / ".pi").mkdir()
    (rig.cwd / ".pi" / "router.yaml").write_text(
        "version: 1\ndecision_log: {keep_text: [prompt, actions]}\n")
    from tests.runtime.test_server import trust_project

    trust_project(rig)
    hello = rig.hello()
    assert [w for w in hello["warnings"]
            if "decision_log" in w and "router.yaml:2:1:" in w and "[RT606]" in w]
    rig.event({"type": "input", "payload": {"text": "a secret prompt"}, "ctx": {"sessionId": "s"}})
    [record] = read_records(log_files(rig.agent / "router" / "log"))
    assert "a secret prompt" not in json.dumps(record) and "text" not in record


def test_the_enum_table_matches_the_literal_parameters_of_every_action() -> None:
    from router.actions import ACTIONS

    expected = {}
    for name, spec in ACTIONS.items():
        for field, info in spec.params.model_fields.items():
            args = [a for a in typing.get_args(info.annotation) if a is not type(None)] or [info.annotation]
            for arg in args:
                if typing.get_origin(arg) is typing.Literal:
                    expected[(name, field)] = frozenset(typing.get_args(arg))
    assert {k: v for k, v in ENUMS.items() if k in expected} == expected
    assert literals_of(compiled()) >= {"a fixed text", "fake/cloud", "fixed", "r"}


# --- the directory: never through a link --------------------------------------------------------


@pytest.mark.parametrize("linked", ["router", "router/log"])
def test_a_link_on_the_logs_path_is_refused_once_and_never_written_through(
        tmp_path: Path, linked: str) -> None:
    rig = Rig(tmp_path, "version: 1\nrules:\n  - {id: u, on: input, do: [{notify: 'u'}]}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if linked == "router/log":
        (rig.agent / "router").mkdir()
    (rig.agent / linked).symlink_to(elsewhere)
    rig.hello()
    answers = [rig.event({"type": "input", "payload": {"text": "x"}, "ctx": {"sessionId": "s"}})
               for _ in range(3)]
    warned = [w for a in answers for w in a["warnings"] if w.startswith("decision log:")]
    assert len(warned) == 1 and "symbolic link" in warned[0] and "[RT607]" in warned[0]
    assert str(rig.agent / linked) in warned[0]
    assert all(a["fired"] == ["u"] for a in answers)
    # nothing of the decision log through it, not even a directory (the policy cache and router.log
    # of a linked `router` directory are not this test's: docs/security.md names them)
    assert [p for p in elsewhere.rglob("*")
            if p.name in ("log", ".digest-key") or "decisions" in p.name] == []


def test_files_are_0600_and_directories_0700(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path / "agent" / "router" / "log", LogSettings(), root=tmp_path / "agent")
    (tmp_path / "agent").mkdir()
    old = os.umask(0)
    try:
        assert log.write({"v": 2}) is None and len(log.digest_key()) == 32
    finally:
        os.umask(old)
    for directory in (tmp_path / "agent" / "router", tmp_path / "agent" / "router" / "log"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for name in ("decisions.jsonl", ".decisions.lock", ".digest-key"):
        assert stat.S_IMODE((tmp_path / "agent" / "router" / "log" / name).stat().st_mode) == 0o600


# --- the sidecar, end to end --------------------------------------------------------------------


def test_the_sidecar_over_its_protocol_writes_no_prompt_to_its_log(tmp_path: Path) -> None:
    import subprocess
    import sys

    from router.runtime import protocol
    from tests.runtime.test_server import ROOT, Reader

    rig = Rig(tmp_path, "version: 1\nrules:\n  - id: shout\n    on: input\n    let: {loud: 'upper(text)'}\n"
              "    do: [{notify: '{loud}'}, {log: {text: 'said {replace(text, \"a\", \"b\")}'}}]\n")
    prompt = "hunter2 is my password"
    argv = [sys.executable, "-m", "router", "serve", "--cwd", str(rig.cwd), "--agent-dir", str(rig.agent)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env={**os.environ, "PI_CODING_AGENT_DIR": str(rig.agent)}) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)
        try:
            for message in ({"id": 1, "method": "hello", "params": {"cwd": str(rig.cwd)}},
                            {"id": 2, "method": "event", "params": {
                                "type": "input", "payload": {"text": prompt, "source": "rpc"},
                                "ctx": {"cwd": str(rig.cwd), "sessionId": "s-e2e"}}}):
                process.stdin.write(protocol.encode(message))
                process.stdin.flush()
                answer = reader.answer()
                assert answer["id"] == message["id"]
            assert answer["result"]["actions"][0]["params"]["text"] == prompt.upper()
            process.stdin.write(protocol.encode({"id": 3, "method": "shutdown", "params": {}}))
            process.stdin.flush()
            assert reader.message() == {"id": 3, "result": {}}
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()
    [record] = read_records(log_files(rig.agent / "router" / "log"))
    assert record["v"] == 2 and record["rules"][0]["id"] == "shout"
    notify = record["actions"][0]["params"]["text"]
    assert notify.startswith(f"<text:{len(prompt)}:") and "hunter2" not in json.dumps(record).lower()
    router = Path(sys.executable).parent / "router"  # the installed console script
    out = subprocess.run([str(router), "log", "--log", str(rig.agent / "router" / "log")],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert "s-e2e" in out.stdout and "shout: notify(" in out.stdout and "hunter2" not in out.stdout.lower()


def test_a_turn_end_record_names_the_model_that_answered_and_its_tokens() -> None:
    record = record_for([], type="turn_end", model={"ref": "auto/router"}, answered_by="fake/cloud",
                        models={"fake/cloud": {"provider": "fake", "id": "cloud",
                                               "cost": {"input": 5.0, "output": 10.0}}},
                        message_usage={"input": 1200, "output": 300, "cache_read": 0, "cache_write": 0,
                                       "cost": 0.0081})
    assert record["model"] == "fake/cloud" and record["cost"] == pytest.approx(0.009)  # at its price
    assert record["price_source"] == "registry"
    assert record["tokens"] == {"input": 1200, "output": 300, "cache_read": 0, "cache_write": 0}
    assert "tokens" not in record_for([])
