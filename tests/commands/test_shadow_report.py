"""`router shadow-report` (router/commands/shadow_report.py): outcomes compared, cost delta, examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from router.commands.shadow_report import NO_PROMPT, outcome, render_text, shadow_stats
from router.load.prices import Catalog
from tests.commands.test_log_cli import record, router, write_log

CATALOG = Catalog({"cloud/big": {"cost": {"input": 2, "output": 10}},
                   "cloud/small": {"cost": {"input": 1, "output": 2}}})
LONG = "refactor the parser so that every error names its file, line and column " * 3


def shadow(*would: dict[str, Any], rule: str = "try-local") -> list[dict[str, Any]]:
    return [{"id": rule, "would": list(would), "agrees": False}]


def model(ref: str) -> dict[str, Any]:
    return {"action": "model", "params": {"ref": ref}}


def rec(seq: int, event: str, **extra: Any) -> dict[str, Any]:
    extra.setdefault("fired", ())
    return record(seq, event=event, **extra)


def test_a_shadow_that_chose_the_model_the_session_ran_on_agrees() -> None:
    records = [rec(0, "input", model="local/qwen", shadow=shadow(model("local/qwen"))),
               rec(0, "turn_end", model="local/qwen")]
    [stats] = shadow_stats(records)
    assert (stats.would_fire, stats.agreed, stats.disagreed, stats.agreement) == (1, 1, 0, 1.0)


def test_the_model_compared_is_the_one_that_answered_the_next_turn() -> None:
    """Another rule's `route` sent the turn to cloud/big: a shadow choosing cloud/big agrees, one
    choosing local/qwen does not, whatever the input decision's own model was."""
    records = [rec(0, "input", model="auto/router", shadow=[*shadow(model("cloud/big"), rule="a"),
                                                             *shadow(model("local/qwen"), rule="b")]),
               rec(0, "route", model="cloud/big"), rec(0, "turn_end", model="auto/router")]
    a, b = shadow_stats(records)
    assert (a.agreed, a.disagreed, b.agreed, b.disagreed) == (1, 0, 0, 1)
    examples = [(e.aspect, e.would, e.actual, e.turn) for e in b.examples]
    assert examples == [("model", "local/qwen", "cloud/big", 1)]


def test_tools_and_blocks_are_outcomes_and_a_notify_is_none() -> None:
    tools = {"action": "tools", "params": {"only": ["read"]}}
    records = [rec(0, "input", actions=[{**tools, "rule": "live"}], shadow=shadow(tools, rule="t")),
               rec(1, "tool_call", shadow=shadow({"action": "block", "params": {"reason": "no"}}, rule="b")),
               rec(2, "input", shadow=shadow({"action": "notify", "params": {"text": "hi"}}, rule="n"))]
    t, b, n = shadow_stats(records)
    assert (t.agreed, b.disagreed, n.no_outcome, n.agreement) == (1, 1, 1, None)
    assert b.examples[0].aspect == "block" and b.examples[0].actual == "none"
    assert outcome([model("x"), {"action": "log", "params": {}}]) == {"model": "x"}


def test_the_cost_of_the_turns_on_the_shadows_model_with_its_price_source() -> None:
    tokens = {"input": 1000, "output": 100}
    records = [rec(0, "input", shadow=shadow(model("local/qwen")), text=LONG),
               rec(1, "context", shadow=shadow(model("local/qwen"))),  # the same turn: priced once
               rec(0, "turn_end", model="cloud/big", tokens=tokens),
               rec(2, "input", shadow=shadow(model("cloud/small"))),
               rec(1, "turn_end", model="cloud/big", tokens=tokens),
               rec(3, "input", shadow=shadow(model("cloud/small"))),
               rec(2, "turn_end", model="cloud/big")]  # no tokens: counted, not priced
    [stats] = shadow_stats(records, CATALOG)
    assert stats.actual_cost.usd == 2 * (1000 * 2 + 100 * 10) / 1e6
    assert stats.shadow_cost.usd == (1000 * 1 + 100 * 2) / 1e6
    assert dict(stats.shadow_cost.sources) == {"local": 1, "registry": 1} and stats.no_tokens == 1
    assert stats.cost_delta is not None and round(stats.cost_delta, 9) == round(0.0012 - 0.006, 9)
    text = render_text([stats], decisions=len(records))
    assert ("$0.006000 as run, $0.001200 [1 local (free), 1 registry] on the shadow's model: "
            "delta -$0.004800") in text
    assert "1 turn(s) without tokens in the log, not priced" in text
    first = stats.examples[0]
    assert first.prompt is not None and first.prompt.startswith(LONG[:80]) and "[cut:" in first.prompt
    assert f"session s-aaaa11 turn 1: {json.dumps(first.prompt, ensure_ascii=False)}" in text
    assert stats.examples[1].turn == 2 and stats.examples[1].prompt is None  # its prompt was not kept


def test_without_a_kept_prompt_the_example_says_the_log_holds_digests_only() -> None:
    records = [rec(0, "input", model="cloud/big", shadow=shadow(model("local/qwen")))]
    text = render_text(shadow_stats(records), decisions=1)
    assert NO_PROMPT in text and "cost n/a (no turn_end record follows its decisions)" in text


def test_the_command_prints_outcomes_in_text_and_json(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    rules = [{"id": "live", "origin": "x:1", "fired": True},
             {"id": "try-local", "origin": "x:5", "fired": False}]
    write_log(directory, rec(0, "input", rules=rules, model="local/qwen", shadow=shadow(model("local/qwen"))),
              rec(1, "input", rules=rules, session="s-bbbb2222", model="cloud/big",
                  shadow=shadow(model("local/qwen"))))
    no_models = str(tmp_path / "no")
    done = router("shadow-report", "--log", str(directory), "--format", "json", "--models", no_models)
    assert done.returncode == 0, done.stderr
    [rule] = json.loads(done.stdout)["rules"]
    assert (rule["agreed"], rule["disagreed"], rule["agreement"]) == (1, 1, 0.5)
    assert rule["examples"] == [{"aspect": "model", "would": "local/qwen", "actual": "cloud/big",
                                 "session": "s-bbbb22", "turn": None, "prompt": None}]
    text = router("shadow-report", "--log", str(directory), "--models", str(tmp_path / "no")).stdout
    assert text.splitlines()[2].split() == ["try-local", "2", "2", "1", "1", "0", "50%"]


def test_the_command_prices_with_the_policys_prices_as_replay_does(tmp_path: Path) -> None:
    """`router shadow-report` (and `router report`) price with the `provides.prices` of the policy
    in force, before models.json: a shadow's model only the policy prices gets its price."""
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "router.yaml").write_text("version: 1\nprovides:\n  prices:\n"
                                       "    team/cheap: {input: 0.5, output: 1}\n"
                                       "    box/qwen: {local: true}\n")
    big = {"id": "big", "cost": {"input": 2, "output": 10}}
    (agent / "models.json").write_text(json.dumps({"providers": {"cloud": {
        "baseUrl": "https://api.example.invalid", "models": [big]}}}))
    tokens = {"input": 1000, "output": 100, "cache_read": 0, "cache_write": 0}
    directory = tmp_path / "log"
    write_log(directory, rec(0, "input", shadow=shadow(model("team/cheap"))),
              rec(0, "turn_end", model="cloud/big", tokens=tokens),
              rec(1, "input", shadow=shadow(model("box/qwen"))),
              rec(1, "turn_end", model="cloud/big", tokens=tokens))
    done = router("shadow-report", "--log", str(directory), "--format", "json",
                  env={"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    [rule] = json.loads(done.stdout)["rules"]
    assert rule["cost"]["shadow"]["priced_by"] == {"local": 1, "policy": 1}
    assert rule["cost"]["shadow"]["usd"] == round((1000 * 0.5 + 100 * 1) / 1e6, 6)
    assert rule["cost"]["actual"]["priced_by"] == {"registry": 2}
    (agent / "router.yaml").write_text("version: 1\nrules: [oops\n")
    broken = router("shadow-report", "--log", str(directory), "--format", "json",
                    env={"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)})
    assert broken.returncode == 0 and "does not compile" in broken.stderr
    assert json.loads(broken.stdout)["rules"][0]["cost"]["shadow"]["unknown_turns"] == 2  # neither priced
