"""The `cuttle` pack end to end: failures, `/cuttle` commands, the slot broker, `router import`.

Routing itself is in test_pack_cuttle.py; the shared setup is helpers_cuttle.py.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_cuttle import (
    BIG,
    CHEAP,
    CLASSIFIER,
    PRICEY,
    SMALL,
    Concurrency,
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
from tests.e2e.helpers_router import RouterRig, command, is_notify, rpc_pid, ui_requests, wait_until

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

CHAT = "/v1/chat/completions"


# -- failures -------------------------------------------------------------------------------------


def test_local_failure_retries_on_the_cloud_then_flips_back(rig: RouterRig) -> None:
    # Pi's retry on (one retry, short delay): the local 500 is retried through route(reason=retry)
    debug = setup_cuttle(rig, base_config(), retry={"enabled": True, "maxRetries": 1, "baseDelayMs": 10})
    p_complex(rig, 0.04)
    rig.fake.script.push(Reply(status=500), model="local-small")
    rpc = cuttle(rig, "--model", "cuttle/auto")

    records = rpc.prompt_and_wait("list the files")
    [why] = command(rpc, "/cuttle why")
    rpc.prompt_and_wait("and the hidden ones")

    assert chat_models(rig) == ["local-small", "cloud-cheap", "local-small"]
    assert [r["type"] for r in records if r["type"].startswith("auto_retry")] == [
        "auto_retry_start", "auto_retry_end"
    ]
    error = '500: {"message":"fake provider error 500","type":"server_error"}'
    assert route_lines(debug) == [
        f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04",
        f"route result tier=cloud ref={CHEAP} reasons=escalation after a failure on {SMALL}: {error}",
        # the next user turn flips back to the session's local decision
        f"route result tier=local ref={SMALL} reasons=classifier p(complex)=0.04",
    ]
    assert f"tier=cloud model={CHEAP} " in why
    assert classifier_calls(rig) == 1  # the retry reuses the turn's score


@pytest.mark.parametrize(
    ("flavor", "local", "expected"),
    [("big-local", [SMALL, BIG], "local-big"), ("fast-local", [BIG, SMALL], "local-small"),
     ("cloud", [SMALL, BIG], "cloud-pricey")],
)
def test_flavors_pick_within_their_tier(rig: RouterRig, flavor: str, local: list[str], expected: str) -> None:
    config = base_config()
    config["catalog"]["local"] = local
    setup_cuttle(rig, config)
    p_complex(rig, 0.86)

    done = rig.print("--offline", "--model", f"cuttle/{flavor}", "a task")

    assert done.returncode == 0, done.stderr
    assert chat_models(rig) == [expected]


def test_big_local_falls_back_to_the_next_largest_local_model(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config(), retry={"enabled": True, "maxRetries": 2, "baseDelayMs": 10})
    rig.fake.script.push(Reply(status=500), model="local-big")
    rpc = cuttle(rig, "--model", "cuttle/big-local")

    rpc.prompt_and_wait("orchestrate the work")
    [why] = command(rpc, "/cuttle why")

    assert chat_models(rig) == ["local-big", "local-small"]  # never the cloud
    error = '500: {"message":"fake provider error 500","type":"server_error"}'
    assert route_lines(debug) == [
        f"route result tier=local ref={BIG} reasons=big-local: largest local model",
        f"route result tier=local ref={SMALL} reasons=big-local: next-largest local model after a failure on "
        f"{BIG}: {error}",
    ]
    assert why.startswith(f"flavor=big-local tier=local model={SMALL} thinking=off (sent medium; ")
    assert " p(complex)=n/a (not classified) " in why
    assert classifier_calls(rig) == 0


def test_big_local_without_a_local_model_fails_the_request(rig: RouterRig) -> None:
    config = base_config()
    config["catalog"]["local"] = ["fake/not-installed"]
    setup_cuttle(rig, config)
    rpc = cuttle(rig, "--model", "cuttle/big-local")

    records = rpc.prompt_and_wait("orchestrate the work")

    assert rig.fake.chat_requests() == []  # never the cloud
    ends = [r["message"] for r in records if r["type"] == "message_end"]
    [answer] = [m for m in ends if m["role"] == "assistant"]
    assert answer["stopReason"] == "error"
    assert answer["errorMessage"] == (
        "cuttle/big-local: no local model is available (catalog.local: fake/not-installed)"
    )


# -- /cuttle why, stats, shadow-report, config, init, doctor ------------------------------------


def test_why_stats_config_and_config_set(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config(policy={"reclassify": "turn"}))
    rig.fake.script.push(Reply(prompt_tokens=1000, completion_tokens=100), model="local-small")
    rig.fake.script.push(Reply(prompt_tokens=2000, completion_tokens=300), model="cloud-pricey")
    rpc = cuttle(rig, "--model", "cuttle/auto")
    path = rig.agent / "pi-cuttle.json"

    p_complex(rig, 0.04)
    rpc.prompt_and_wait("list the files")
    p_complex(rig, 0.86)
    rpc.prompt_and_wait("design a new storage layer")
    [why] = command(rpc, "/cuttle why")
    [stats] = command(rpc, "/cuttle stats")
    [empty] = command(rpc, "/cuttle shadow-report 3")
    [config] = command(rpc, "/cuttle config")
    [updated] = command(rpc, "/cuttle config set policy.threshold 0.7")

    assert why == (
        f"flavor=auto tier=cloud model={PRICEY} thinking=medium p(complex)=0.86 subagent=false "
        "reason=classifier p(complex)=0.86"
    )
    # the local request priced at the cheapest cloud model ($1 in, $2 out per 1M): 0.001 + 0.0002
    assert stats == (
        "cuttle stats, last 7 days: 2 requests; local 50% (1), cloud 1\n"
        "tokens: local 1000 in / 100 out; cloud 2000 in / 300 out\n"
        f"estimated saved vs all-cloud ({CHEAP}): $0.0012"
    )
    assert empty == "No shadow verdicts in the last 3 days."
    assert config.startswith(f"cuttle config (edit {path}, or /cuttle config set KEY VALUE):\n")
    assert f"\nclassifier: {json.dumps(base_config()['classifier'])}\n" in config
    assert f'\ncatalog.local: ["{SMALL}", "{BIG}"]\n' in config
    assert updated == (
        f"cuttle: policy.threshold = 0.7 (in {path}); it applies from the next routing decision"
    )
    assert read_config(rig)["policy"] == {"reclassify": "turn", "threshold": 0.7}
    # the next routing decision: p=0.6 is now local
    p_complex(rig, 0.6)
    rpc.prompt_and_wait("one more")
    assert chat_models(rig)[-1] == "local-big"


def test_init_wizard_writes_the_file(rig: RouterRig) -> None:
    setup_cuttle(rig, None)
    answers = {
        "Classifier model": CLASSIFIER,
        "Local models": f" {BIG}, {SMALL} ",
        "Cloud models": CHEAP,
        "Threshold": "0.6",
    }

    def answer(request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("method") == "input":
            return {"value": next(v for k, v in answers.items() if request["title"].startswith(k))}
        return None

    rpc = cuttle(rig, "--model", BIG, ui_handler=answer)

    [done] = command(rpc, "/cuttle init")

    path = rig.agent / "pi-cuttle.json"
    assert done == f"cuttle: wrote {path}; run /cuttle doctor to probe it"
    assert [r["title"] for r in ui_requests(rpc, "input")] == [
        "Classifier model (e.g. llama.cpp/Kev-9B)",
        "Local models, comma-separated",
        "Cloud models, comma-separated",
        "Threshold for cloud (0-1)",
    ]
    written = read_config(rig)
    assert written["classifier"]["model"] == CLASSIFIER
    assert written["catalog"]["local"] == [BIG, SMALL]
    assert written["catalog"]["cloud"] == [CHEAP]
    assert written["policy"] == {"threshold": 0.6}
    # the written file routes: p=0.55 is below the new threshold
    p_complex(rig, 0.55)
    command(rpc, "/cuttle on")
    rpc.prompt_and_wait("a task")
    assert chat_models(rig) == ["local-big"]


def test_configuration_warnings_in_the_factory_line_status_and_doctor(rig: RouterRig) -> None:
    config = base_config(maxConcurrent=-2)
    config["classifier"]["model"] = "lama.cpp/chat-small"  # a typo of the provider
    config["policy"]["threshhold"] = 0.4
    config["policy"]["localBias"] = 0.9
    policy = "use: [cuttle]\nvars:\n  cuttle:\n    gates: {judge: {enabeld: true}}\n"
    debug = setup_cuttle(rig, config, policy=policy)
    path = rig.agent / "pi-cuttle.json"
    rpc = cuttle(rig, "--model", "cuttle/auto")
    # the classifier Pi cannot have is said at session start too (before the commands' answers)
    rpc.wait_record(is_notify("cuttle: unknown classifier model lama.cpp/chat-small"))

    [status] = command(rpc, "/cuttle status")
    [doctor] = command(rpc, "/cuttle doctor", timeout=60)

    warnings = [
        f"{path}: unknown key policy.threshhold (did you mean policy.threshold?)",
        "router.yaml vars.cuttle: unknown key gates.judge.enabeld (did you mean gates.judge.enabled?)",
        "policy.localBias = 0.9 is outside 0..0.5 (it is used within 0..0.5)",
        "maxConcurrent = -2 is not a whole number of 0 or more (no cap is used)",
        "unknown classifier model lama.cpp/chat-small: Pi has no provider lama.cpp (did you mean llama.cpp?)",
    ]
    [factory] = [line for line in debug.read_text().splitlines() if line.startswith("factory ")]
    assert factory.endswith(" warnings=" + ";".join(warnings))
    assert "\nwarnings: " + "; ".join(warnings) + "\n" in status
    assert doctor.splitlines()[-5:] == [f"warning: {w}" for w in warnings]


def project_config(rig: RouterRig, config: dict[str, Any]) -> Path:
    path = rig.work / ".pi" / "pi-cuttle.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


def trust_project(rig: RouterRig) -> None:
    """The router's trust of the project's content: its .pi/router.yaml with the pi-cuttle.json."""
    (rig.work / ".pi" / "router.yaml").write_text("version: 1\n")
    done = rig.router("trust", "--yes")
    assert done.returncode == 0, done.stderr
    assert ".pi/pi-cuttle.json" in done.stdout  # pinned with the policy


def test_a_trusted_projects_file_wins_over_the_users_and_is_written_back(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config())  # threshold 0.5
    project = project_config(rig, {"policy": {"threshold": 0.9}})
    trust_project(rig)
    p_complex(rig, 0.8)
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("a task")
    [set_project] = command(rpc, "/cuttle config set policy.threshold 0.85")
    [set_user] = command(rpc, "/cuttle config set maxConcurrent 3")
    [status] = command(rpc, "/cuttle status")

    assert chat_models(rig) == ["local-big"]  # 0.8 is below the project's 0.9: local (by capacity)
    [factory] = [line for line in debug_lines(debug) if line.startswith("factory ")]
    assert f" sources={rig.agent / 'pi-cuttle.json'},{project} warnings=" in factory
    assert set_project == f"cuttle: policy.threshold = 0.85 (in {project}); it applies from the next " \
        "routing decision"
    assert json.loads(project.read_text()) == {"policy": {"threshold": 0.85}}
    assert set_user.endswith(f"(in {rig.agent / 'pi-cuttle.json'}); it applies from the next routing "
                             "decision")
    assert read_config(rig)["maxConcurrent"] == 3 and read_config(rig)["policy"]["threshold"] == 0.5
    assert status.endswith(f"\nconfig files: {rig.agent / 'pi-cuttle.json'}, {project}")


def test_an_untrusted_projects_file_is_ignored(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())
    project = project_config(rig, {"policy": {"threshold": 0.9}, "catalog": {"cloud": [PRICEY]}})
    p_complex(rig, 0.8)
    rpc = cuttle(rig, "--model", "cuttle/auto")

    rpc.prompt_and_wait("a task")
    [status] = command(rpc, "/cuttle status")
    [done] = command(rpc, "/cuttle config set policy.threshold 0.7")

    assert chat_models(rig) == ["cloud-cheap"]  # the user's threshold and catalog
    assert status.endswith(f"; ignored: {project} (not trusted: it is read with a trusted .pi/router.yaml, "
                           "see router trust)")
    assert json.loads(project.read_text())["policy"] == {"threshold": 0.9}  # never written
    assert done.endswith(f"(in {rig.agent / 'pi-cuttle.json'}); it applies from the next routing decision")


def test_router_yaml_vars_cuttle_wins_and_is_not_written(rig: RouterRig) -> None:
    policy = "use: [cuttle]\nvars:\n  cuttle:\n    autoSelect: false\n    policy: {threshold: 0.3}\n"
    setup_cuttle(rig, base_config(autoSelect=True), policy=policy)
    project_config(rig, {"policy": {"threshold": 0.9}})
    trust_project(rig)
    p_complex(rig, 0.4)
    rpc = cuttle(rig, "--model", BIG)

    assert rpc.command("get_state")["model"]["id"] == "local-big"  # vars.cuttle's autoSelect: false wins
    [on] = command(rpc, "/cuttle on")
    rpc.prompt_and_wait("a task")
    [refused] = command(rpc, "/cuttle config set policy.threshold 0.8")

    assert on.startswith("cuttle: on, for this session only: autoSelect comes from vars.cuttle in "
                         "router.yaml (false), which wins over pi-cuttle.json")
    assert chat_models(rig) == ["cloud-cheap"]  # 0.4 is above vars.cuttle's 0.3
    assert refused.startswith("cuttle: nothing changed: policy.threshold comes from vars.cuttle in "
                              "router.yaml")
    assert read_config(rig)["autoSelect"] is True and read_config(rig)["policy"]["threshold"] == 0.5


def test_doctor_reports_the_failure_when_the_fake_is_down(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())
    rpc = cuttle(rig, "--model", "cuttle/auto")
    [healthy] = command(rpc, "/cuttle doctor")

    rig.fake.stop()
    [down] = command(rpc, "/cuttle doctor", timeout=60)

    assert healthy.startswith("cuttle doctor:\nok   classifier llama.cpp/chat-small (")
    assert "FAIL" not in healthy
    lines = down.splitlines()
    assert lines[0] == "cuttle doctor:"
    assert len(lines) == 6  # the classifier and the four catalog models
    assert all(line.startswith("FAIL ") for line in lines[1:]), down
    assert lines[1].startswith(f"FAIL classifier {CLASSIFIER} (")
    assert "ECONNREFUSED" in lines[1] or "Connection error" in lines[1], lines[1]
    assert lines[2].startswith(f"FAIL model {SMALL} (")


# -- the slot broker ------------------------------------------------------------------------------


IN_OPEN = 0x20
INOTIFY_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class OpenWatch:
    """Counts the opens of each file in ``directory`` from now on (Linux inotify)."""

    def __init__(self, directory: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if libc.inotify_add_watch(self.fd, os.fsencode(directory), IN_OPEN) < 0:
            error = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(error, f"inotify_add_watch failed on {directory}")
        self.opens: Counter[str] = Counter()

    def poll(self) -> Counter[str]:
        """Read the events that arrived; the open counts so far."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.opens
            offset = 0
            while offset < len(data):
                _wd, _mask, _cookie, length = INOTIFY_EVENT.unpack_from(data, offset)
                start = offset + INOTIFY_EVENT.size
                self.opens[data[start : start + length].rstrip(b"\0").decode()] += 1
                offset = start + length

    def __enter__(self) -> OpenWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


@pytest.mark.parametrize(("cap", "peak"), [(1, 1), (0, 2)], ids=["maxConcurrent-1", "no-cap-control"])
def test_slot_broker_caps_in_flight_turns_across_processes(rig: RouterRig, cap: int, peak: int) -> None:
    setup_cuttle(rig, base_config(maxConcurrent=cap))
    p_complex(rig, 0.04)
    tracker = Concurrency(hold_s=60.0)
    rig.fake.script.fn = tracker
    first = cuttle(rig, "--model", "cuttle/auto")
    second = cuttle(rig, "--model", "cuttle/auto")
    marks = [first.mark(), second.mark()]

    first.send({"type": "prompt", "message": "first task"})
    try:  # the first request is held until the second process is seen waiting (or, uncapped, sending)
        assert tracker.first.wait(20), "the first request never arrived"
        if cap:
            # the first turn holds slot 0; a second open of slot-0.lock is the other process retrying
            # after a refusal: it waits for the slot
            with OpenWatch(rig.agent / "pi-cuttle" / "slots") as watch:
                second.send({"type": "prompt", "message": "second task"})
                wait_until(lambda: watch.poll()["slot-0.lock"] >= 2 or tracker.second.is_set(), 30,
                           "the second process to wait for the slot")
            assert not tracker.second.is_set(), "the second turn went out while the first held the only slot"
        else:
            second.send({"type": "prompt", "message": "second task"})
            assert tracker.second.wait(30), "the uncapped second request never arrived"
    finally:
        tracker.release.set()
    second.wait_event("agent_settled", timeout=60, since=marks[1])
    first.wait_event("agent_settled", timeout=30, since=marks[0])

    assert not tracker.held_too_long
    assert tracker.seen == 2
    assert tracker.peak == peak


def test_a_killed_process_does_not_keep_its_slot(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config(maxConcurrent=1))
    p_complex(rig, 0.04)
    holding = threading.Event()

    def reply(body: dict[str, Any]) -> Reply:
        if "HOLD THE SLOT" in json.dumps(body.get("messages")):
            holding.set()
            return Reply(text="never seen", delay_s=60)  # cut short when the fake stops
        return Reply(text="got the slot")

    rig.fake.script.fn = reply
    holder = cuttle(rig, "--model", "cuttle/auto")
    other = cuttle(rig, "--model", "cuttle/auto")
    holder.send({"type": "prompt", "message": "HOLD THE SLOT"})
    assert holding.wait(20)

    os.kill(rpc_pid(holder), signal.SIGKILL)
    started = time.monotonic()
    other.prompt_and_wait("my turn", timeout=60)
    waited = time.monotonic() - started

    assert waited < 15, f"the slot was not recovered (waited {waited:.1f}s)"
    assert rig.fake.chat_requests()[-1].texts("user") == ["my turn"]
    states = [r["entry"]["data"]["state"] for r in other.events(type_="entry_appended")
              if r["entry"].get("customType") == helpers_router.STATE_ENTRY]
    assert states and states[-1]["cu"].get("slot_wait") is None


# -- router import --------------------------------------------------------------------------------


def test_router_import_moves_the_json_into_router_yaml(rig: RouterRig) -> None:
    debug = setup_cuttle(rig, base_config())
    source = rig.agent / "pi-cuttle.json"

    done = rig.router("import", str(source), "--target", str(rig.policy_path))
    assert done.returncode == 0, done.stderr
    source.unlink()
    p_complex(rig, 0.86)
    rpc = cuttle(rig, "--model", "cuttle/auto")
    rpc.prompt_and_wait("design a new storage layer")

    policy = YAML(typ="safe").load(rig.policy_path.read_text())
    assert policy["use"] == ["cuttle"]
    assert policy["vars"]["cuttle"] == base_config()
    assert chat_models(rig) == ["cloud-pricey"]
    [factory] = [line for line in debug.read_text().splitlines() if line.startswith("factory ")]
    assert factory.endswith(f"cloud={PRICEY},{CHEAP} sources=router.yaml vars.cuttle warnings=")
    assert route_lines(debug) == [f"route result tier=cloud ref={PRICEY} reasons=classifier p(complex)=0.86"]


def test_a_classifier_on_a_provider_without_classifiers_is_a_warning_at_session_start(rig: RouterRig) -> None:
    """`fake` is a models.json provider: it lists no classifier models and cannot discover any
    (llama.cpp can, so the usual configuration says nothing): said at the start, not at the first turn."""
    config = base_config()
    config["classifier"]["model"] = "fake/kev"
    setup_cuttle(rig, config)
    rpc = cuttle(rig, "--model", "cuttle/auto")

    notice = rpc.wait_record(is_notify("cuttle: unknown classifier model fake/kev"))

    assert notice["message"] == (
        "cuttle: unknown classifier model fake/kev: provider fake lists no classifier models and discovers "
        "none at run time (classifiers come from providers such as llama.cpp); until it is fixed, "
        "cuttle/auto routes by the keyword heuristic (/cuttle doctor asks the classifier)")
    assert notice.get("notifyType") == "warning", notice
    [status] = command(rpc, "/cuttle status")
    assert "provider fake lists no classifier models" in status


def test_the_llama_cpp_classifier_is_no_warning_at_session_start(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())
    rpc = cuttle(rig, "--model", "cuttle/auto")

    [status] = command(rpc, "/cuttle status")  # answered after the session start's notices

    assert "unknown classifier model" not in status
    assert not [n for n in helpers_router.notices(rpc) if "unknown classifier model" in n]
