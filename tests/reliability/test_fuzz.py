"""Fuzzing the engine's four doors: the loader (YAML-ish text), the event path (random Pi payloads
through the normalizer into each built-in pack), and the protocol (random lines into a running
`router serve`, plus a corpus of hostile lines).

Fuzzers that already exist elsewhere are not repeated here: arbitrary text and policy-shaped
documents through `compile_files` (tests/lint/test_corpus.py), the normalizer alone
(tests/events/test_normalize.py), expressions (tests/lang/test_expr_compiler.py), queries
(tests/lang/test_query.py), protocol framing (tests/runtime/test_protocol.py) and one robust
policy through the interpreter (tests/engine/test_interpreter.py). This module reuses the
normalizer's payload strategies.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.errors import SourceError
from router.engine.decision import SignalOutcome
from router.engine.interpreter import evaluate
from router.events.normalize import model_catalog, normalize
from router.lang.budget import DEADLINE_ENV, DEADLINE_RANGE_MS
from router.load.loader import load_layers
from router.load.paths import packs_dir
from router.load.source import SourceDoc, parse_source
from router.runtime import protocol
from router.runtime.engine_event import MAX_SIGNALS
from tests.events.test_normalize import CONTEXT, JSONISH, MODEL, PAYLOADS
from tests.reliability.faults import ROBUSTNESS, Case

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# -- the loader ---------------------------------------------------------------------------------------

# YAML's own alphabet, so the fuzzer reaches anchors, aliases, merge keys, tags, flow and block
# collections, block scalars, documents and directives rather than plain text.
TOKENS = st.sampled_from([
    "version: 1\n", "rules:\n", "  - id: a\n", "    on: input\n", "    when: ", "    do: ", "use: ",
    "vars:\n", "signals:\n", "- ", "  ", "    ", "\t", "\n", ": ", ":", "? ", ",", "[", "]", "{", "}",
    "&a ", "*a", "&b ", "*b", "<<: ", "!!str ", "!!int ", "!!binary ", "!tag ", "|\n", ">-\n", "|2\n",
    "'", '"', "\\", "#c\n", "---\n", "...\n", "%YAML 1.2\n", "%TAG ! x\n", "\ufeff", "\x00", "\x85",
    "\u2028", "é", "~", "null", "true", "1e999", "0x1F", ".nan", "-.inf", "2001-12-14", "=", "@",
    "`", "key", "text", "\"{text}\"", "[read]", "{only: [read]}", "input", "tools",
])
YAMLISH = st.lists(TOKENS | st.text(max_size=4), max_size=60).map("".join)
LOADER_BUG = ("loader bug (reported): `a: !!int ` and `a: !!bool ` raise IndexError/KeyError from the "
              "scalar builder instead of a located RT101")
YAML_BREAKS = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def spans_are_valid(diagnostics: list[Diagnostic], text: str) -> bool:
    """Every located diagnostic points at a line and column that exist (1-based).

    Lines are counted as YAML counts them: CR, NEL, LS and PS break lines too.
    """
    lines = len(YAML_BREAKS.split(text)) + 1
    return all(d.span is None or ((d.span.line is None or 1 <= d.span.line <= lines)
               and (d.span.col is None or d.span.col >= 1)) for d in diagnostics)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reliability-fuzz")


@FUZZ
@given(text=YAMLISH)
@example(text="a: !!int ")  # found by this fuzzer: IndexError from the scalar builder, not an RT101
@example(text="a: !!bool ")  # KeyError
def test_fuzz_loader_yamlish_text(scratch: Path, case: Case, text: str) -> None:
    case.describe("loader: random YAML-ish text into `parse_source` and `load_layers`", group="fuzz")
    case.tries += 1
    try:
        doc = parse_source(text, "fuzz.yaml")
    except SourceError as exc:
        assert exc.diagnostics and spans_are_valid(exc.diagnostics, text)
    else:
        assert isinstance(doc, SourceDoc)
        json.dumps(doc.data, default=str)  # plain data
    path = scratch / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    files, diagnostics = load_layers([("file", path)])
    assert spans_are_valid(diagnostics, text)
    assert len(files) <= 1
    case.outcome = "held"


# -- the event path: normalizer -> interpreter, through every built-in pack --------------------------


@pytest.fixture(scope="module")
def packs() -> dict[str, CompiledPolicy]:
    """Each built-in pack, compiled over the default pack as Pi's session would load it."""
    compiled = {}
    default = packs_dir() / "default.yaml"
    for path in sorted(packs_dir().glob("*.yaml")):
        if path.name.endswith(".test.yaml"):
            continue
        layers = [("pack", default)] + ([("pack", path)] if path != default else [])
        policy, diagnostics = compile_files(layers)
        assert policy is not None, [d.message for d in diagnostics]
        compiled[path.stem] = policy
    return compiled


OUTCOMES = st.builds(SignalOutcome, result=JSONISH) | st.builds(
    SignalOutcome, error=st.text(min_size=1, max_size=20))


@FUZZ
@given(data=st.data())
def test_fuzz_interpreter_random_events_through_packs(
    packs: dict[str, CompiledPolicy], case: Case, data: st.DataObject
) -> None:
    case.describe("normalizer and interpreter: random Pi payloads through each built-in pack",
                  group="fuzz")
    case.tries += 1
    name = data.draw(st.sampled_from(sorted(packs)))
    policy = packs[name]
    event_type = data.draw(st.sampled_from(sorted(policy.by_event)))
    payload: Any = data.draw(st.none() | PAYLOADS[event_type])  # None too: the bridge may send null
    ctx: Any = data.draw(st.none() | CONTEXT)
    models = model_catalog(data.draw(st.none() | st.lists(MODEL, max_size=3)))
    env = data.draw(st.dictionaries(st.sampled_from(sorted(policy.env_names) or ["X"]),
                                    st.text(max_size=8), max_size=3))
    state = data.draw(st.dictionaries(st.text(max_size=8), JSONISH, max_size=4))
    event = normalize(event_type, payload, ctx, env=env, models=models)

    outcomes: dict[str, SignalOutcome] = {}
    for _ in range(MAX_SIGNALS):
        decision = evaluate(policy, event, state=state, outcomes=outcomes)
        if decision.pending is None:
            break
        outcomes[decision.pending.name] = data.draw(OUTCOMES)
    assert all(error.code.startswith("RT4") for error in decision.errors), decision.errors
    protocol.encode({"actions": [{"action": e.action, "params": e.params} for e in decision.effects],
                     "state": decision.state})  # whatever was decided can go over the wire
    case.outcome = "held"


# -- the protocol: a running `router serve` ---------------------------------------------------------

SERVE_POLICY = """\
version: 1
rules:
  - id: read-only
    on: input
    do:
      - tools: {only: [read]}
      - set: {seen: "{text}"}
"""


class Serve:
    """One `router serve` subprocess with a reader thread; restarted when it has died."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (directory / "agent").mkdir(parents=True, exist_ok=True)
        (directory / "agent" / "router.yaml").write_text(SERVE_POLICY)
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.ids = itertools.count(1)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "router", "serve", "--cwd", str(self.directory),
             "--agent-dir", str(self.directory / "agent")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # what is tested is that the engine survives; a loaded machine must not turn its own
            # deadline into a failed probe (docs/development.md, "Make the slow side deterministic")
            env={**os.environ, DEADLINE_ENV: str(DEADLINE_RANGE_MS[1])})
        self.lines = queue.Queue()
        out = self.proc.stdout
        assert out is not None
        threading.Thread(target=self._read, args=(out, self.lines), daemon=True).start()
        self.request("hello", {"protocol": 1, "cwd": str(self.directory), "hasUI": False})

    @staticmethod
    def _read(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()

    def send(self, data: bytes) -> None:
        """Write raw bytes; a dead sidecar shows up in the next answer."""
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 20) -> dict[str, Any]:
        """Send a request; return its answer. Every line read on the way must be a JSON object."""
        request_id = f"probe-{next(self.ids)}"
        self.send(json.dumps({"id": request_id, "method": method, "params": params}).encode() + b"\n")
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no answer to {method} within {timeout}s") from None
            if line is None:
                raise AssertionError(f"router serve exited ({self.exit_reason()})")
            message = json.loads(line)
            assert isinstance(message, dict), line[:200]
            if message.get("id") == request_id:
                return message

    def probe(self) -> None:
        """The sidecar is alive and its engine answers an input event with the policy's action."""
        answer = self.request("event", {"type": "input", "payload": {"text": "probe"}, "ctx": {}})
        actions = (answer.get("result") or {}).get("actions")
        assert actions and actions[0]["action"] == "tools", answer

    def exit_reason(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        done = self.proc.poll() is not None
        tail = self.proc.stderr.read()[-400:].decode("utf-8", "replace") if done else ""
        return f"code {self.proc.returncode}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("serve-fuzz"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


IDS = st.none() | st.integers() | st.text(max_size=6) | st.floats() | st.booleans() | st.lists(
    st.integers(), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
METHODS = st.sampled_from(["hello", "event", "cancel", "progress", "classify", "log", "nope", ""]) | st.text(
    max_size=6).filter(lambda m: m != "shutdown")  # shutdown ends the sidecar: that is its job
EVENT_PARAMS = st.fixed_dictionaries({"type": st.sampled_from(sorted(PAYLOADS)) | st.text(max_size=6)},
                                     optional={"payload": JSONISH, "ctx": JSONISH | CONTEXT})
MESSAGES = st.fixed_dictionaries({}, optional={"id": IDS, "method": METHODS,
                                               "params": JSONISH | EVENT_PARAMS, "result": JSONISH,
                                               "error": JSONISH})
LINES = st.one_of(
    MESSAGES.map(lambda m: json.dumps(m).encode()),
    JSONISH.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass").replace(b"\n", b" ")),
)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, min_size=1, max_size=5))
@example(lines=[b'{"id": [], "method": "hello"}'])  # found by this fuzzer: TypeError, the sidecar exits
def test_fuzz_protocol_random_lines_into_serve(serve: Serve, case: Case, lines: list[bytes]) -> None:
    case.describe("protocol: random lines into a running `router serve`", group="fuzz")
    case.tries += 1
    serve.ensure()
    serve.send(b"".join(line + b"\n" for line in lines))
    serve.probe()  # alive, answering valid JSON, the policy still in force
    case.outcome = "held"


# -- the protocol: a corpus of hostile lines ---------------------------------------------------------

HOSTILE_LINES: dict[str, tuple[bytes, str]] = {
    "not JSON": (b"this is not JSON {", ""),
    "invalid UTF-8": (b"\xff\xfe\x80{}", ""),
    "a lone surrogate escape": (b'{"id": 1, "method": "event", "params": {"type": "input", '
                                b'"payload": {"text": "\\ud800"}}}', ""),
    "NaN and 1e999": (b'{"id": 2, "method": "event", "params": {"type": "input", "payload": '
                      b'{"text": NaN, "images": 1e999}}}', ""),
    "a 5,000-digit number": (b'{"id": 3, "method": "nope", "params": {"n": ' + b"9" * 5000 + b"}}", ""),
    "JSON nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, ROBUSTNESS),
    "an object nested 100,000 deep": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, ROBUSTNESS),
    "a request id that is a list": (b'{"id": [1], "method": "event", "params": {"type": "input"}}',
                                    ROBUSTNESS),
    "`cancel` of an id that is an object": (b'{"method": "cancel", "params": {"id": {"a": 1}}}',
                                            ROBUSTNESS),
    "a 70 MiB line": (b'{"id": 4, "method": "nope", "params": {"x": "' + b"x" * (70 * 1024 * 1024)
                      + b'"}}', ROBUSTNESS),
    "a NUL byte and a BOM": (b"\xef\xbb\xbf{\x00}", ""),
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.xfail(strict=False, reason=reason)] if reason else [], id=name)
    for name, (_, reason) in HOSTILE_LINES.items()])
def test_hostile_line_into_serve(tmp_path: Path, case: Case, name: str) -> None:
    case.describe(name, group="protocol")
    case.tries = 1
    server = Serve(tmp_path)
    server.start()
    try:
        server.send(HOSTILE_LINES[name][0] + b"\n")
        server.probe()
        server.probe()
    finally:
        server.stop()
    case.outcome = "held"
