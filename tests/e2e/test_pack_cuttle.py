"""The built-in `cuttle` pack end to end: routing through its virtual models, as the original
pi-cuttle routes.

The behaviour and the decisions on the open points: docs/packs/cuttle.md.
The fake provider plays the local and cloud models and the llama.cpp classifier (helpers_cuttle);
Pi runs in RPC mode with --offline, or print mode. Commands, failures, the slot broker and
`router import` are in test_pack_cuttle_ops.py.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Fault, Reply
from tests.e2e.helpers_cuttle import (
    BIG,
    CHEAP,
    DELEGATE,
    JUDGE,
    PRICEY,
    ROLE,
    SMALL,
    STRUGGLE,
    base_config,
    chat_models,
    classifier_calls,
    cuttle,
    debug_lines,
    p_complex,
    read_config,
    route_lines,
    setup_cuttle,
)
from tests.e2e.helpers_router import RouterRig, command, read_call

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

FLAVORS = ["auto", "big-local", "orchestrator", "fast-local", "local", "cloud"]
HARD = "Refactor the architecture of the parser"  # the heuristic scores it complex (p=0.75)


# -- virtual models, /cuttle on and off, autoSelect ---------------------------------------------


def test_virtual_models_on_off_and_previous_model(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())
    p_complex(rig, 0.04)
    rpc = cuttle(rig, "--model", BIG)

    listed = {(m["provider"], m["id"]) for m in rpc.command("get_available_models")["models"]}
    assert {("cuttle", f) for f in FLAVORS} <= listed
    assert command(rpc, "/cuttle on") == ["cuttle: on — every turn is routed through cuttle/auto"]
    on_model = rpc.command("get_state")["model"]
    on_file = read_config(rig)
    rpc.prompt_and_wait("list the files")
    assert command(rpc, "/cuttle off") == [f"cuttle: off — back on {BIG}"]
    off_model = rpc.command("get_state")["model"]

    assert (on_model["provider"], on_model["id"]) == ("cuttle", "auto")
    assert on_file["autoSelect"] is True
    assert on_file["catalog"] == base_config()["catalog"]  # the rest of the file is kept
    assert chat_models(rig) == ["local-small"]
    assert (off_model["provider"], off_model["id"]) == ("fake", "local-big")
    assert read_config(rig)["autoSelect"] is False


def test_a_model_on_the_command_line_wins_over_auto_select(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config(autoSelect=True))
    rpc = cuttle(rig, "--model", BIG)

    state = rpc.command("get_state")
    rpc.prompt_and_wait("list the files")

    assert (state["model"]["provider"], state["model"]["id"]) == ("fake", "local-big")
    assert chat_models(rig) == ["local-big"]
    assert classifier_calls(rig) == 0
    assert [line for line in debug_lines(debug) if line.startswith("session_start")] == [
        f"session_start autoSelect=true explicit=true current={BIG}"]


def test_virtual_models_report_a_context_window(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())
    rpc = cuttle(rig)

    windows = {m["id"]: m.get("contextWindow") for m in rpc.command("get_available_models")["models"]
               if m["provider"] == "cuttle"}

    assert windows == dict.fromkeys(FLAVORS, 200000)


def test_auto_select_starts_on_cuttle_auto_and_logs_the_boot(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config(autoSelect=True))
    p_complex(rig, 0.04)
    rpc = cuttle(rig)

    state = rpc.command("get_state")
    rpc.prompt_and_wait("list the files")

    assert (state["model"]["provider"], state["model"]["id"]) == ("cuttle", "auto")
    assert chat_models(rig) == ["local-small"]
    factory, start, route = debug_lines(debug)
    assert factory == (
        f"factory cwd={rig.work} autoSelect=true local={SMALL},{BIG} cloud={PRICEY},{CHEAP} "
        f"sources={rig.agent / 'pi-cuttle.json'} warnings="
    )
    assert start == "session_start autoSelect=true explicit=true current=cuttle/auto"
    assert route == f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04"


# -- the classifier decides ----------------------------------------------------------------------


@pytest.mark.parametrize(("p", "model", "tier"), [(0.86, PRICEY, "cloud"), (0.04, SMALL, "local")])
def test_one_classifier_call_routes_by_p_complex(rig: RouterRig, p: float, model: str, tier: str) -> None:
    debug = setup_cuttle(rig, base_config())
    p_complex(rig, p)
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("design a new storage layer")

    assert chat_models(rig) == [model.split("/")[1]]
    paths = [r.path for r in rig.fake.requests() if r.path != "/v1/chat/completions"]
    assert paths.count("/completion") == paths.count("/apply-template") == 1
    assert "/tokenize" in paths
    [completion] = rig.fake.requests("/completion")
    assert completion.body["model"] == "chat-small"
    assert "Question: Is this turn standard or complex?" in completion.body["prompt"]
    assert "design a new storage layer" in completion.body["prompt"]
    bodies = [json.dumps(r.body) for r in rig.fake.requests("/v1/chat/completions")]
    assert not [b for b in bodies if '"model": "auto"' in b or "cuttle/auto" in b]
    assert route_lines(debug) == [
        f"route result tier={tier} ref={model} reasons=classifier p(complex)={p:.2f}"
    ]


@pytest.mark.parametrize(("reclassify", "second"), [("session", "cloud-pricey"), ("turn", "local-small")])
def test_reclassify_session_sticks_turn_classifies_again(
    rig: RouterRig, reclassify: str, second: str
) -> None:
    setup_cuttle(rig, base_config(policy={"reclassify": reclassify}))
    rpc = cuttle(rig, "--model", "cuttle/auto")

    p_complex(rig, 0.86)
    rpc.prompt_and_wait("design a new storage layer")
    p_complex(rig, 0.04)
    rpc.prompt_and_wait("now list the files")

    assert chat_models(rig) == ["cloud-pricey", second]
    assert classifier_calls(rig) == (1 if reclassify == "session" else 2)


def test_tool_loop_continuation_stays_on_the_turns_model(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config(policy={"reclassify": "turn"}))
    rig.fake.script.push(read_call(rig), Reply(text="read it"))
    rpc = cuttle(rig, "--model", "cuttle/auto", "--thinking", "high")

    p_complex(rig, 0.86)
    rpc.send({"type": "prompt", "message": "design a new storage layer"})
    rig.fake.wait_for_requests(1, path_prefix="/v1/chat/completions")
    p_complex(rig, 0.04)  # a reclassification now would go local
    rpc.wait_event("agent_settled")

    first, second = rig.fake.chat_requests()
    assert (first.model, first.reasoning_effort) == ("cloud-pricey", "high")
    assert (second.model, second.reasoning_effort) == ("cloud-pricey", "high")
    assert any("NOTES" in t for t in second.texts("tool"))
    assert classifier_calls(rig) == 1


# -- classifier failure is never silent -----------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "failure"),
    [
        (Fault(delay_s=3), "Request timed out after 300ms"),
        (Fault(status=500, body="kev is down"), "llama.cpp error (500): kev is down"),
    ],
    ids=["timeout", "http-500"],
)
def test_classifier_failure_falls_back_to_the_heuristic(rig: RouterRig, fault: Fault, failure: str) -> None:
    config = base_config()
    config["classifier"]["timeoutMs"] = 300
    debug = setup_cuttle(rig, config)
    p_complex(rig, 0.04)  # what the classifier would have said: local
    rig.fake.llama.faults["/completion"] = fault
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait(HARD)
    status = command(rpc, "/cuttle status")
    why = command(rpc, "/cuttle why")

    reason = f"heuristic p(complex)=0.75 (classifier failed: {failure})"
    assert chat_models(rig) == ["cloud-cheap"]  # the heuristic decided (0.75 fits cloud-cheap)
    assert route_lines(debug) == [f"route result tier=cloud ref={CHEAP} reasons={reason}"]
    assert f"\nlast classifier failure: {failure}\n" in status[0]
    assert why[0].endswith(f" reason={reason}")


def test_classifier_timeout_is_named_as_a_timeout(rig: RouterRig) -> None:
    config = base_config()
    config["classifier"]["timeoutMs"] = 300
    debug = setup_cuttle(rig, config)
    rig.fake.llama.faults["/completion"] = Fault(delay_s=3)
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait(HARD)

    [line] = route_lines(debug)
    assert re.search(r"classifier failed: .*(timed out|timeout)", line, re.IGNORECASE), line


# -- Phase-2 gates in shadow ---------------------------------------------------------------------


def test_shadow_gates_are_logged_and_never_route(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config(gates={"struggle": {"enabled": True}, "judge": {"enabled": True}}))
    p_complex(rig, 0.04)
    rig.fake.llama.probs[STRUGGLE] = {"Yes": 0.81, "No": 0.19}  # would escalate if promoted
    rig.fake.llama.probs[JUDGE] = {"Yes": 0.12, "No": 0.88}
    rig.fake.script.push(read_call(rig), Reply(text="read it"))
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("list the files")
    report = command(rpc, "/cuttle shadow-report")

    assert chat_models(rig) == ["local-small", "local-small"]
    head = f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04"
    assert route_lines(debug) == [
        f"{head} gates=struggle:p=0.81(shadow)",
        # judge is asked only once the last message is a tool result (the continuation), alone;
        # the continuation's line states the turn's decision and verdicts, with the judge's
        f"{head} gates=struggle:p=0.81(shadow),judge:p=0.12(shadow)",
    ]
    prompts = [r.body["prompt"] for r in rig.fake.requests("/completion")]
    questions = [prompt.rsplit("Question: ", 1)[1].split("\n")[0] for prompt in prompts]
    assert questions == [
        "Is this turn standard or complex?",
        "Is this request likely to cause the model to struggle?",
        "Did the last subagent or tool result satisfy the request?",
    ]
    records = [json.loads(x) for x in (rig.agent / "pi-cuttle" / "shadow.jsonl").read_text().splitlines()]
    assert [[g["name"] for g in r["gates"]] for r in records] == [["struggle"], ["judge"]]
    assert report == [
        "shadow gates, last 7 days:\n"
        "struggle: 1 verdicts, mean p=0.81, agreement with the tier 0%\n"
        "judge: 1 verdicts, mean p=0.12, agreement with the tier 100%"
    ]


@pytest.mark.parametrize(("gate", "probs", "p", "model", "note"), [
    ("role", {"worker": 0.8}, 0.04, BIG, "role:worker routes as big-local"),
    ("role", {"oracle": 0.8}, 0.04, CHEAP, "role:oracle routes as cloud"),
    ("delegate", {"Yes": 0.81, "No": 0.19}, 0.4, CHEAP, "delegate:p=0.81 routes as orchestrator"),
])
def test_a_promoted_role_or_delegate_gate_picks_the_flavor(
    rig: RouterRig, gate: str, probs: dict[str, float], p: float, model: str, note: str
) -> None:
    debug = setup_cuttle(rig, base_config(gates={gate: {"enabled": True, "shadow": False}}))
    p_complex(rig, p)
    rig.fake.llama.probs[ROLE if gate == "role" else DELEGATE] = probs
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("plan the next step")
    [why] = command(rpc, "/cuttle why")

    assert chat_models(rig) == [model.split("/")[1]]
    [line] = route_lines(debug)
    assert line.startswith(f"route result tier={'local' if model == BIG else 'cloud'} ref={model} "
                           f"reasons=classifier p(complex)={p:.2f}; {note} gates={gate}:p=")
    assert "(shadow)" not in line
    assert why.startswith("flavor=auto ") and why.endswith(note)


def test_a_promoted_judge_gate_escalates_an_unsatisfying_tool_result(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config(gates={"judge": {"enabled": True, "shadow": False}}))
    p_complex(rig, 0.04)
    rig.fake.llama.probs[JUDGE] = {"Yes": 0.2, "No": 0.8}  # the tool result did not satisfy it
    rig.fake.script.push(read_call(rig), Reply(text="read it on the cloud"), Reply(text="next"))
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("read the notes")
    rpc.prompt_and_wait("thanks")

    assert chat_models(rig) == ["local-small", "cloud-cheap", "local-small"]  # the next turn flips back
    local = f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04"
    assert route_lines(debug) == [
        local,
        f"route result tier=cloud ref={CHEAP} reasons=classifier p(complex)=0.04; judge:p=0.20 escalated "
        "gates=judge:p=0.20",
        local,
    ]


def test_every_routed_request_has_a_debug_line(rig: RouterRig) -> None:
    """A classified turn, its judge continuation (the guide's fifth example line), a reused session
    decision, its continuation and a compaction summary: one line each."""
    debug = setup_cuttle(rig, base_config(gates={"struggle": {"enabled": True}, "judge": {"enabled": True}}))
    p_complex(rig, 0.96)
    rig.fake.llama.probs[STRUGGLE] = {"Yes": 0.81, "No": 0.19}
    rig.fake.llama.probs[JUDGE] = {"Yes": 0.12, "No": 0.88}
    rig.fake.script.push(read_call(rig), Reply(text="read it"), read_call(rig), Reply(text="read it again"))
    rig.fake.script.default = Reply(text="SUMMARY")
    rig.settings(compaction={"keepRecentTokens": 10})  # something to summarize
    rpc = cuttle(rig, "--model", "cuttle/auto", session=True)

    rpc.prompt_and_wait("design a new storage layer")
    rpc.prompt_and_wait("and read the notes again")
    rpc.command("compact", 60)

    decision = f"route result tier=cloud ref={PRICEY} reasons=classifier p(complex)=0.96"
    assert route_lines(debug) == [
        f"{decision} gates=struggle:p=0.81(shadow)",
        f"{decision} gates=struggle:p=0.81(shadow),judge:p=0.12(shadow)",
        decision,  # the second turn reuses the session's decision (no classifier call)
        f"{decision} gates=judge:p=0.12(shadow)",
        f"route result tier=cloud ref={PRICEY} reasons=direct request (outside the agent loop): "
        "the turn's model",
    ]
    # the four requests of the agent loop, then the summary (Pi routes a compaction once)
    assert chat_models(rig)[:4] == ["cloud-pricey"] * 4


def test_a_plain_continuation_has_its_line(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config())
    p_complex(rig, 0.04)
    rig.fake.script.push(read_call(rig), Reply(text="read it"))
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("list the files")

    line = f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04"
    assert route_lines(debug) == [line, line]  # the user turn and its continuation


# -- which model within the tier, thinking, subagents ------------------------------------------


@pytest.mark.parametrize(
    ("p", "model"),
    [(0.04, "local-small"), (0.4, "local-big"), (0.6, "cloud-cheap"), (0.86, "cloud-pricey")],
)
def test_local_by_capacity_cloud_by_cost(rig: RouterRig, p: float, model: str) -> None:
    # capacities: local-small 8k/32k = 0.25, local-big 1.0; cloud-cheap 160k/200k = 0.8 ($1/$2),
    # cloud-pricey 1.0 ($3/$15): the smallest local that fits, the cheapest cloud that fits
    setup_cuttle(rig, base_config())
    p_complex(rig, p)

    done = rig.print("--offline", "--model", "cuttle/auto", "a task")

    assert done.returncode == 0, done.stderr
    assert chat_models(rig) == [model]


def test_thinking_map_with_the_users_level_as_ceiling(rig: RouterRig) -> None:
    steps = [(0.2, "off"), (0.4, "low"), (0.6, "medium")]
    levels = {"enabled": True, "default": "high", "map": [{"score": s, "level": v} for s, v in steps]}
    setup_cuttle(rig, base_config(thinkingLevels=levels, policy={"reclassify": "turn"}))
    rpc = cuttle(rig, "--model", "cuttle/auto", "--thinking", "high")

    p_complex(rig, 0.55)
    rpc.prompt_and_wait("first")
    p_complex(rig, 0.9)
    rpc.prompt_and_wait("second")
    rpc.command("set_thinking_level", level="low")
    rpc.prompt_and_wait("third")

    assert [(c.model, c.reasoning_effort) for c in rig.fake.chat_requests()] == [
        ("cloud-cheap", "medium"),  # mapped below the user's high
        ("cloud-pricey", "high"),  # the default, equal to the ceiling
        ("cloud-pricey", "low"),  # the default, capped by the user's low
    ]


def test_subagent_uses_policy_subagent(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config(policy={"threshold": 0.5, "subagent": {"threshold": 0.9}}))
    p_complex(rig, 0.86)  # cloud for the main session (test_one_classifier_call_routes_by_p_complex)
    rpc = cuttle(rig, "--model", "cuttle/auto", env={**rig.env, "PI_SUBAGENT_CHILD": "1"})

    rpc.prompt_and_wait("design a new storage layer")
    [why] = command(rpc, "/cuttle why")

    assert chat_models(rig) == ["local-big"]
    assert why == (  # the local model has no thinking levels: Pi sends it off
        f"flavor=auto tier=local model={BIG} thinking=off (sent medium; {BIG} has no thinking levels) "
        "p(complex)=0.86 subagent=true reason=classifier p(complex)=0.86"
    )
