"""The e2e harness against a real Pi 1.6.0, with no router code involved."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_provider import FakeProvider, Fault, Reply
from tests.e2e.pi_harness import PiInstall, make_agent_dir, run_print
from tests.e2e.pi_harness import pi_env as build_pi_env
from tests.e2e.pi_rpc import RpcPi

pytestmark = pytest.mark.e2e
RpcFactory = Callable[..., RpcPi]

ASK_EXTENSION = """
export default function (pi) {
  pi.registerCommand("ask", { handler: async (_args, ctx) => {
    const choice = await ctx.ui.select("Pick one", ["Alpha", "Beta"]);
    ctx.ui.notify(`picked:${choice}`, "info");
  }});
}
"""

CLASSIFY_EXTENSION = """
import { readFileSync, writeFileSync } from "node:fs";
export default function (pi) {
  pi.registerCommand("classify-test", { handler: async (args, ctx) => {
    const spec = JSON.parse(readFileSync(args.trim(), "utf8"));
    await ctx.modelRegistry.refresh({ providers: ["llama.cpp"], allowNetwork: true });
    const model = ctx.modelRegistry.findOfType("classifier", "llama.cpp", spec.model);
    const result = model
      ? await ctx.modelRegistry.classify(model, spec.context, { maxRetries: 0 })
      : { stopReason: "error", errorMessage: `no classifier ${spec.model}` };
    writeFileSync(spec.out, JSON.stringify({ api: model?.api, result }));
  }});
}
"""

COMPLEXITY = {
    "type": "choice",
    "instructions": "Is this standard or complex?",
    "criteria": {"standard": "mechanical", "complex": "design"},
}


def write_extension(tmp_path: Path, name: str, source: str) -> Path:
    """Write a throwaway extension file and return its path."""
    path = tmp_path / f"{name}.ts"
    path.write_text(source)
    return path


def run_classify(
    tmp_path: Path, workdir: Path, env: dict[str, str], model: str, context: dict[str, Any]
) -> dict[str, Any]:
    """Run ``/classify-test`` in print mode and return what the extension wrote."""
    out = tmp_path / "classify-out.json"
    spec = tmp_path / "classify-spec.json"
    spec.write_text(json.dumps({"model": model, "context": context, "out": str(out)}))
    extension = write_extension(tmp_path, "classify", CLASSIFY_EXTENSION)
    done = run_print(
        ["--no-session", "--offline", "-e", str(extension), f"/classify-test {spec}"],
        cwd=workdir,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    written: dict[str, Any] = json.loads(out.read_text())
    return written


def test_print_mode_replies_and_logs_request(
    fake_provider: FakeProvider, pi_env: dict[str, str], workdir: Path
) -> None:
    fake_provider.script.push(Reply(text="HI"))

    done = run_print(["--no-session", "hello"], cwd=workdir, env=pi_env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HI"
    [chat] = fake_provider.chat_requests()
    assert chat.model == "fake-local"
    assert {"read", "bash", "edit", "write"} <= set(chat.tools)
    assert "coding assistant" in chat.system
    assert chat.texts("user") == ["hello"]
    assert chat.stream is True


def test_tool_call_result_reaches_next_request(
    fake_provider: FakeProvider, pi_env: dict[str, str], workdir: Path
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("SECRET_CONTENT_4242\n")
    fake_provider.script.push(
        Reply(text="", tool_calls=[{"name": "read", "arguments": {"path": str(notes)}}]),
        Reply(text="done reading"),
    )

    done = run_print(["--no-session", "read the notes"], cwd=workdir, env=pi_env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done reading"
    first, second = fake_provider.chat_requests()
    assert not first.texts("tool")
    assert any("SECRET_CONTENT_4242" in text for text in second.texts("tool"))
    assert second.messages[-2].get("tool_calls") == ["read"]


def test_usage_drives_context_percent(
    tmp_path: Path, fake_provider: FakeProvider, pi_install: PiInstall, rpc_pi: RpcFactory
) -> None:
    agent = make_agent_dir(tmp_path, fake_provider, settings={"defaultModel": "fake-cloud"})
    text = "big\u2028reply"  # a line separator inside JSON must not split the RPC record
    fake_provider.script.push(Reply(text=text, prompt_tokens=120000, completion_tokens=10))
    rpc = rpc_pi(["--no-session", "--offline"], env=build_pi_env(agent, pi_install))

    rpc.prompt_and_wait("hello")
    stats = rpc.command("get_session_stats")

    assert rpc.command("get_last_assistant_text") == {"text": text}
    assert not rpc.events(type_="unparsed")
    usage = stats["contextUsage"]
    assert usage["contextWindow"] == 200000
    assert usage["percent"] == pytest.approx(60.0, abs=0.1)
    assert stats["tokens"]["input"] == 120000
    [chat] = fake_provider.chat_requests()
    assert chat.model == "fake-cloud"


def test_reasoning_stream_and_thinking_level(
    tmp_path: Path, fake_provider: FakeProvider, pi_install: PiInstall, rpc_pi: RpcFactory
) -> None:
    agent = make_agent_dir(tmp_path, fake_provider, settings={"defaultModel": "fake-cloud"})
    fake_provider.script.push(Reply(text="answer", reasoning="thinking hard", chunk_delay_s=0.01))
    rpc = rpc_pi(["--no-session", "--thinking", "high"], env=build_pi_env(agent, pi_install))

    rpc.prompt_and_wait("hi")

    last = rpc.command("get_messages")["messages"][-1]
    assert [
        (part["type"], part.get("thinking") or part.get("text")) for part in last["content"]
    ] == [
        ("thinking", "thinking hard"),
        ("text", "answer"),
    ]
    assert fake_provider.chat_requests()[0].reasoning_effort == "high"


def test_rpc_dialog_is_answered_by_handler(
    tmp_path: Path, pi_env: dict[str, str], rpc_pi: RpcFactory
) -> None:
    extension = write_extension(tmp_path, "ask", ASK_EXTENSION)

    def pick_last(request: dict[str, Any]) -> dict[str, Any] | None:
        return {"value": request["options"][-1]} if request["method"] == "select" else None

    rpc = rpc_pi(
        ["--no-session", "--offline", "-e", str(extension)], env=pi_env, ui_handler=pick_last
    )
    records = rpc.prompt_and_wait("/ask")

    assert rpc.close() == 0
    assert records[-1]["data"]["disposition"] == "handled"
    select, notify = rpc.ui_requests
    assert (select["method"], select["title"], select["options"]) == (
        "select",
        "Pick one",
        ["Alpha", "Beta"],
    )
    assert (notify["method"], notify["message"]) == ("notify", "picked:Beta")


def test_rpc_dialog_default_handler_cancels(
    tmp_path: Path, pi_env: dict[str, str], rpc_pi: RpcFactory
) -> None:
    extension = write_extension(tmp_path, "ask", ASK_EXTENSION)
    rpc = rpc_pi(["--no-session", "--offline", "-e", str(extension)], env=pi_env)

    rpc.prompt_and_wait("/ask")

    assert [r["method"] for r in rpc.ui_requests] == ["select", "notify"]
    assert rpc.ui_requests[1]["message"] == "picked:undefined"


def test_llama_classify_returns_scripted_probabilities(
    tmp_path: Path,
    fake_provider: FakeProvider,
    pi_install: PiInstall,
    agent_dir: Path,
    workdir: Path,
) -> None:
    fake_provider.llama.probs["standard or complex"] = {"complex": 0.8, "standard": 0.2}
    env = build_pi_env(agent_dir, pi_install, llama_base_url=fake_provider.base_url)
    context = {
        "state": {"prompt": "x"},
        "questions": {
            "complexity": COMPLEXITY,
            "risky": {
                "type": "bool",
                "instructions": "Is it risky?",
                "criteria": {"true": "yes", "false": "no"},
            },
            "effort": {
                "type": "score",
                "instructions": "How much effort?",
                "criteria": ["none", "some", "lots"],
            },
        },
    }
    fake_provider.llama.probs["risky"] = {"true": 0.25}
    fake_provider.llama.probs["effort"] = {"0": 0.0, "1": 0.5, "2": 0.5}

    written = run_classify(tmp_path, workdir, env, "chat-small", context)

    result = written["result"]
    assert written["api"] == "llama-cpp-classify"
    assert result["stopReason"] == "stop", result
    complexity = result["answers"]["complexity"]
    assert complexity["choice"] == "complex"
    assert complexity["probabilities"] == pytest.approx({"standard": 0.2, "complex": 0.8})
    assert result["answers"]["risky"]["probability"] == pytest.approx(0.25)
    assert result["answers"]["effort"]["score"] == pytest.approx(1.5)
    [completion, *_] = fake_provider.requests("/completion")
    assert completion.body["model"] == "chat-small"
    assert completion.headers.get("authorization") == "Bearer local"


def test_llama_classify_marker_in_state_overrides_script(
    tmp_path: Path, fake_provider: FakeProvider, pi_install: PiInstall, workdir: Path
) -> None:
    fake_provider.llama.probs["standard or complex"] = {"complex": 0.8}
    agent = make_agent_dir(tmp_path, fake_provider, llama_cpp=True)
    env = build_pi_env(agent, pi_install)
    context = {
        "state": {"prompt": "FAKE_PROBS[standard=0.9,complex=0.1]"},
        "questions": {"c": COMPLEXITY},
    }

    result = run_classify(tmp_path, workdir, env, "chat-small", context)["result"]

    assert result["answers"]["c"]["choice"] == "standard", result
    assert result["answers"]["c"]["probabilities"]["standard"] == pytest.approx(0.9)


def test_decision_model_classify(
    tmp_path: Path,
    fake_provider: FakeProvider,
    pi_install: PiInstall,
    agent_dir: Path,
    workdir: Path,
) -> None:
    fake_provider.llama.probs["standard or complex"] = {"complex": 0.7, "standard": 0.3}
    env = build_pi_env(agent_dir, pi_install, llama_base_url=fake_provider.base_url)

    written = run_classify(
        tmp_path, workdir, env, "decide-1", {"state": {"p": 1}, "questions": {"c": COMPLEXITY}}
    )

    assert written["api"] == "typesafe-system-one"
    answer = written["result"]["answers"]["c"]
    assert answer["choice"] == "complex", written
    assert answer["probabilities"]["complex"] == pytest.approx(0.7)
    [request] = fake_provider.requests("/v1/systemone")
    assert request.body["questions"]["c"]["instructions"] == COMPLEXITY["instructions"]


def test_classify_reports_http_error(
    tmp_path: Path,
    fake_provider: FakeProvider,
    pi_install: PiInstall,
    agent_dir: Path,
    workdir: Path,
) -> None:
    fake_provider.llama.faults["/completion"] = Fault(status=503, body="overloaded")
    env = build_pi_env(agent_dir, pi_install, llama_base_url=fake_provider.base_url)

    result = run_classify(
        tmp_path, workdir, env, "chat-small", {"state": {}, "questions": {"c": COMPLEXITY}}
    )["result"]

    assert result["stopReason"] == "error"
    assert "503" in result["errorMessage"] and "overloaded" in result["errorMessage"]
    assert len(fake_provider.requests("/completion")) == 1


def test_chat_http_500_makes_print_exit_1(
    tmp_path: Path, fake_provider: FakeProvider, pi_install: PiInstall, workdir: Path
) -> None:
    fake_provider.script.default = Reply(status=500, error_body={"error": {"message": "boom-500"}})
    agent = make_agent_dir(tmp_path, fake_provider, settings={"retry": {"enabled": False}})

    done = run_print(["--no-session", "hello"], cwd=workdir, env=build_pi_env(agent, pi_install))

    assert done.returncode == 1
    assert "boom-500" in done.stderr
    assert len(fake_provider.chat_requests()) == 1


def test_agent_retry_recovers_from_one_500(
    tmp_path: Path, fake_provider: FakeProvider, pi_install: PiInstall, workdir: Path
) -> None:
    fake_provider.script.push(Reply(status=500), Reply(text="second try"))
    agent = make_agent_dir(tmp_path, fake_provider, settings={"retry": {"baseDelayMs": 1}})

    done = run_print(["--no-session", "hello"], cwd=workdir, env=build_pi_env(agent, pi_install))

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "second try"
    assert len(fake_provider.chat_requests()) == 2


def test_stop_cuts_delayed_reply_short(fake_provider: FakeProvider) -> None:
    """Fake-only: a reply delayed for minutes does not hold up stop()."""
    fake_provider.script.push(Reply(delay_s=600))
    body = json.dumps({"model": "m", "messages": []}).encode()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            urllib.request.urlopen(
                f"{fake_provider.base_url}/v1/chat/completions", data=body, timeout=30
            )
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            errors.append(exc)

    client = threading.Thread(target=call)
    client.start()
    fake_provider.wait_for_requests(1, timeout=5)
    started = time.monotonic()
    fake_provider.stop()
    client.join(timeout=10)
    assert not client.is_alive()
    assert time.monotonic() - started < 5
    assert errors, "the delayed request should fail once the server stops"


def test_fake_logprobs_are_ln_p(fake_provider: FakeProvider) -> None:
    """Fake-only: /completion returns ln(p) for each label of the final question."""
    prompt = (
        "Question: old\n\nQuestion: Pick\n\nOptions:\nA. x: one\nB. y: two\n\n"
        "Answer with one letter."
    )
    fake_provider.llama.probs["Pick"] = {"x": 0.25, "y": 0.75}
    request = urllib.request.Request(
        f"{fake_provider.base_url}/completion", data=json.dumps({"prompt": prompt}).encode()
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        top = json.loads(response.read())["completion_probabilities"][0]["top_logprobs"]

    assert [entry["token"] for entry in top] == ["A", "B"]
    assert [math.exp(entry["logprob"]) for entry in top] == pytest.approx([0.25, 0.75])
