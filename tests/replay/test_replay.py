"""`router replay`, `router diff` and `router eval` on session files and decision logs the tests
write in Pi's and the decision log's formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from router.commands.explain import load
from router.replay import diff
from router.replay.runner import SessionRun
from router.replay.sources import gather, replay_all
from router.replay.summary import summarize
from tests.replay_sessions import SessionWriter, record, write_log, write_models

ROUTER = Path(sys.executable).parent / "router"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path
ROOT = Path(__file__).resolve().parent.parent.parent

CLOUD_FOR_HARD = """
version: 1
rules:
  - id: tools-read
    on: input
    do: [{tools: {only: [read]}}]
  - id: cloud-for-hard
    on: input
    group: model
    when: "'hard' in text"
    do: [{model: fake/cloud}]
  - id: local-otherwise
    on: input
    group: model
    do: [{model: fake/local}]
"""

CLASSIFIED = """
version: 1
signals:
  p:
    classify:
      model: llama.cpp/kev
      questions: {complexity: {type: score, instructions: "how complex?"}}
    transform: "result.complexity"
    fallback: "0.1"
rules:
  - id: cloud-when-complex
    on: input
    when: "signals.p >= 0.5"
    do: [{model: fake/cloud}]
"""


def session(writer_id: str = "s1") -> SessionWriter:
    """Two prompts: an easy one answered by the local model, a hard one by the cloud model (the
    model change written right before the hard prompt, as a rule's change is)."""
    return (SessionWriter(id=writer_id).start("fake/local")
            .user("read the notes").assistant("fake/local", "", calls=[{"name": "read", "id": "c1"}])
            .result("read", call_id="c1").assistant("fake/local", "done")
            .model("fake/cloud").user("a hard one", quick=True).assistant("fake/cloud", "thought", cost=0.5))


def replay(tmp_path: Path, policy_text: str, *, log: Path | None = None) -> tuple[list[SessionRun], Any]:
    policy_file = write(tmp_path / "policy.yaml", policy_text)
    policy = load([policy_file], cwd=tmp_path).policy
    assert policy is not None
    inputs = gather([tmp_path / "sessions"], log=log or tmp_path / "nolog", models=tmp_path / "models.json",
                    agent=tmp_path / "agent")
    runs = replay_all(policy, inputs, progress=False)
    return runs, summarize(runs, inputs.catalog, "fake/cloud")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    session().write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    return tmp_path


def test_rules_models_tools_and_costs_of_a_replay(corpus: Path) -> None:
    runs, total = replay(corpus, CLOUD_FOR_HARD)
    [run] = runs
    assert (total.sessions, total.turns) == (1, 3)
    assert dict(total.rules) == {"tools-read": 2, "local-otherwise": 1, "cloud-for-hard": 1}
    assert dict(total.models) == {"fake/local": 2, "fake/cloud": 1}
    assert dict(total.tiers) == {"local": 2, "cloud": 1}
    assert dict(total.tools) == {"read": 3}
    # tokens 1000 in + 100 out at $3/$15 per million; the local turns (a loopback provider without
    # a price) are free, and counted as priced by being local
    both = {"local": 2, "registry": 1}
    assert total.estimated.to_dict() == {"usd": 0.0045, "turns": 3, "unknown_turns": 0, "priced_by": both}
    assert total.recorded.to_dict() == {"usd": 0.5, "turns": 3, "unknown_turns": 0, "priced_by": both}
    assert total.baseline.to_dict() == {"usd": 0.0135, "turns": 3, "unknown_turns": 0,
                                        "priced_by": {"registry": 3}}
    assert total.estimated.text() == "$0.004500 [2 local (free), 1 registry]"
    assert [t.model for t in sorted(run.turns.values(), key=lambda t: t.number) if t.answered] == \
        ["fake/local", "fake/local", "fake/cloud"]


def test_a_policy_without_the_model_rule_keeps_the_local_model(corpus: Path) -> None:
    # the recorded change to the cloud model came with the prompt: a rule's doing, not replayed
    _, total = replay(corpus, "version: 1\nrules:\n  - {id: r, on: input, do: [{tools: {only: [read]}}]}\n")
    assert dict(total.models) == {"fake/local": 3}


def test_a_users_model_change_is_kept(tmp_path: Path) -> None:
    (SessionWriter().start("fake/local").user("one").assistant("fake/local")
     .model("fake/cloud").user("two").assistant("fake/cloud")).write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    _, total = replay(tmp_path, "version: 1\nrules:\n  - {id: note, on: model_select, do: [{notify: x}]}\n")
    assert dict(total.models) == {"fake/local": 1, "fake/cloud": 1}
    assert dict(total.rules) == {"note": 1}


def test_signals_come_from_the_log_else_from_the_fallback(corpus: Path) -> None:
    log = write_log(corpus / "log" / "decisions.jsonl", [
        record("s1", "input", 1, signals={"p": {"value": 0.9, "source": "live"}}),
        record("s1", "input", 0, signals={"p": {"source": "error", "error": "timeout"}})])
    runs, total = replay(corpus, CLASSIFIED, log=log)
    assert dict(total.signals) == {"recorded": 1, "recorded_failure": 1}
    assert dict(total.rules) == {"cloud-when-complex": 1}
    assert runs[0].logged
    _, without = replay(corpus, CLASSIFIED)
    assert dict(without.signals) == {"fallback": 2}
    assert dict(without.rules) == {}


def test_a_session_the_log_knows_uses_its_model_actions_to_tell_rules_from_the_user(corpus: Path) -> None:
    # the log has the session but no model action: the change to the cloud model was the user's
    log = write_log(corpus / "log" / "decisions.jsonl", [record("s1", "input", 0)])
    _, total = replay(corpus, "version: 1\nrules:\n  - {id: r, on: turn_end, do: [{notify: x}]}\n", log=log)
    assert dict(total.models) == {"fake/local": 2, "fake/cloud": 1}


def test_questions_answers_blocks_and_compactions(tmp_path: Path) -> None:
    (SessionWriter().start("fake/local")
     .user("pick")
     .assistant("fake/local", "", calls=[{"name": "ask", "id": "q"}, {"name": "bash", "id": "b"}])
     .result("ask", call_id="q").result("bash", call_id="b").assistant("fake/local", "ok")
     .compaction()).write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    _, total = replay(tmp_path, """
        version: 1
        tools:
          - {name: ask, description: ask, parameters: {type: object}}
        rules:
          - {id: answer, on: question, do: [{answer: {value: "yes"}}]}
          - {id: no-bash, on: tool_call, match: "tool.name == 'bash'", do: [{block: "no"}]}
          - {id: compact, on: agent_settled, do: [{compact: {}}]}
          - {id: done, on: compaction_done, match: "by_router", do: [{notify: compacted}]}
    """)
    assert (total.answers, total.blocked, total.compactions) == (1, 1, 1)
    assert total.rules["done"] == 1


def test_virtual_models_are_routed_by_route_rules(tmp_path: Path) -> None:
    (SessionWriter().start("cuttle/auto").user("easy").assistant("fake/local")
     .user("hard please").assistant("fake/cloud")).write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    _, total = replay(tmp_path, """
        version: 1
        virtual_models: [{provider: cuttle, id: auto}]
        rules:
          - {id: hard, on: route, when: "'hard' in last_user_text", do: [{route: {model: fake/cloud}}]}
          - {id: easy, on: route, do: [{route: {model: fake/local}}]}
    """)
    assert dict(total.rules) == {"easy": 1, "hard": 1}
    assert dict(total.models) == {"fake/local": 1, "fake/cloud": 1}


def test_diff_reports_exactly_the_turns_that_change(corpus: Path) -> None:
    old, _ = replay(corpus, CLOUD_FOR_HARD)
    new, _ = replay(corpus, CLOUD_FOR_HARD.replace("'hard' in text", "'notes' in text"))
    result = diff.compare("old", "new", old, new)
    assert [(c.turn, c.changes) for c in result.changes] == [
        (1, {"model": ("fake/local", "fake/cloud")}), (2, {"model": ("fake/local", "fake/cloud")}),
        (3, {"model": ("fake/cloud", "fake/local")})]
    assert result.rules == {}  # each rule fires once either way, on the other prompt
    same = diff.compare("old", "old", old, old)
    assert not same.changed and "no turn changes" in diff.render_text(same)
    markdown = diff.render_markdown(result)
    assert "| `s1` | 1 | model | fake/local | fake/cloud |" in markdown


PRICED_BY_POLICY = """
provides:
  prices:
    fake/cloud: {input: 1, output: 10}
    fake/local: {input: 0.5, output: 0.5, local: true}
"""


def test_a_policys_prices_come_before_the_registrys(corpus: Path) -> None:
    _, total = replay(corpus, CLOUD_FOR_HARD + PRICED_BY_POLICY)
    # 1000 in + 100 out: fake/cloud at $1/$10 per million (not the registry's $3/$15) = $0.002,
    # fake/local at $0.5/$0.5 = $0.00055 per turn, both priced by the policy
    assert total.estimated.to_dict() == {"usd": 0.0031, "turns": 3, "unknown_turns": 0,
                                         "priced_by": {"policy": 3}}
    assert total.estimated.text() == "$0.003100 [3 policy]"
    assert dict(total.tiers) == {"local": 2, "cloud": 1}  # declared local, though priced


def test_diff_prices_each_side_with_its_own_policys_prices(corpus: Path) -> None:
    old, _ = replay(corpus, CLOUD_FOR_HARD)
    new, _ = replay(corpus, CLOUD_FOR_HARD.replace("'hard' in text", "'notes' in text")
                    + "provides:\n  prices:\n    fake/cloud: {input: 1, output: 10}\n")
    result = diff.compare("old", "new", old, new)
    # new: turns 1 and 2 on fake/cloud at the policy's $0.002, turn 3 local (free);
    # old: turn 3 on fake/cloud at the registry's $0.0045
    assert result.new_cost.to_dict() == {"usd": 0.004, "turns": 3, "unknown_turns": 0,
                                         "priced_by": {"local": 1, "policy": 2}}
    assert result.delta == pytest.approx(-0.0005)
    assert "new $0.004000 [1 local (free), 2 policy]" in diff.render_text(result)



def test_session_start_has_the_sessions_model_so_the_deepseek_pack_starts(tmp_path: Path) -> None:
    (SessionWriter().start("deepseek/deepseek-chat").user("hello").assistant("deepseek/deepseek-chat")
     ).write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    _, total = replay(tmp_path, "version: 1\nuse: [deepseek]\n")
    assert total.rules["ds-start"] == 1


def at(entry_time: str, item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "time": entry_time}


def test_failed_compactions_are_rebuilt_from_the_decision_log(tmp_path: Path) -> None:
    # entries at 10:00:01 … 10:00:09; Pi wrote no entry for either failure
    writer = (SessionWriter().start("fake/local").user("one").assistant("fake/local")
              .user("two").assistant("fake/local").user("three").assistant("fake/local"))
    writer.write(tmp_path / "sessions")
    write_models(tmp_path / "models.json")
    log = write_log(tmp_path / "log" / "decisions.jsonl", [
        # the bridge compacted after the first answer, and the next prompt came with no compaction:
        at("2026-01-01T10:00:05.500Z", record("s1", "agent_settled", 0,
                                              actions=[{"action": "compact", "params": {}}])),
        at("2026-01-01T10:00:06.500Z", record("s1", "input", 1)),
        # Pi's own compaction failed after the second answer (a rule of the recorded policy saw it)
        at("2026-01-01T10:00:08.200Z", record("s1", "compaction_failed", 0)),
    ])
    runs, total = replay(tmp_path, """
        version: 1
        rules:
          - {id: ours, on: compaction_failed, when: "by_router and reason == 'manual'", do: [{notify: x}]}
          - {id: pis, on: compaction_failed, when: "not by_router", do: [{notify: y}]}
    """, log=log)
    assert (total.rules["ours"], total.rules["pis"]) == (1, 1)
    [run] = runs
    failed = [r for r in run.records if r["event"] == "compaction_failed"]
    assert [r["turn"] for r in failed] == [1, 2]  # after the answer each followed
    anyone = "version: 1\nrules:\n  - {id: any, on: compaction_failed, do: [{notify: z}]}\n"
    _, unlogged = replay(tmp_path, anyone)
    assert unlogged.rules["any"] == 0  # without the log nothing says a compaction failed


# --- the console script ---------------------------------------------------------------------

def router(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {**os.environ, "NO_COLOR": "1", "PI_CODING_AGENT_DIR": str(cwd / "agent"), **(env or {})}
    return subprocess.run([str(ROUTER), *args], cwd=cwd, env=base, capture_output=True, text=True,
                          timeout=120, check=False, stdin=subprocess.DEVNULL)


def test_cli_replay_json_and_bad_lines(corpus: Path) -> None:
    write(corpus / "policy.yaml", CLOUD_FOR_HARD)
    bad = corpus / "sessions" / "broken.jsonl"
    bad.write_text(session("s2").text() + "{oops\n")
    done = router("replay", "sessions", "--policy", "policy.yaml", "--models", "models.json", "-f", "json",
                  cwd=corpus)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["sessions"], body["decisions"]) == (2, 4)
    assert body["models"] == {"fake/local": 4, "fake/cloud": 2}
    assert body["rules"] == {"tools-read": 4, "local-otherwise": 2, "cloud-for-hard": 2}
    assert body["events"] > body["decisions"]
    assert "warning: sessions/broken.jsonl:12: not JSON" in done.stderr
    one = router("replay", "sessions", "--policy", "policy.yaml", "--session", "s2", cwd=corpus)
    assert "total: 1 sessions" in one.stdout


def test_cli_replay_of_a_file_that_is_no_session_is_a_clear_error(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello world\n")
    done = subprocess.run([str(ROUTER), "replay", str(notes)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert "warning: notes.txt: not a Pi session file: none of its lines is a session entry (line 1: not " \
        "JSON (Expecting value)); skipped" in done.stderr.splitlines()
    assert done.stdout.startswith(f"error: no Pi session files found in {notes} (")


def test_cli_replay_without_sessions_is_a_clear_error(tmp_path: Path) -> None:
    done = router("replay", "nowhere", cwd=tmp_path)
    assert done.returncode == 1
    assert "warning: nowhere: no such file or directory" in done.stderr
    assert "error: no Pi session files found in nowhere" in done.stdout + done.stderr


def test_cli_diff_of_a_git_revision_and_fail_on_change(corpus: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=corpus, check=True)
    write(corpus / "policy.yaml", CLOUD_FOR_HARD)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "policy.yaml"], cwd=corpus, check=True)
    subprocess.run([*git, "commit", "-qm", "p"], cwd=corpus, check=True)
    write(corpus / "policy.yaml", CLOUD_FOR_HARD.replace("'hard' in text", "False"))
    args = ["diff", "HEAD:policy.yaml", "policy.yaml", "--sessions", "sessions", "--models", "models.json"]
    done = router(*args, "--fail-on-change", cwd=corpus)
    assert done.returncode == 1, done.stderr
    assert "turn 3" in done.stdout and "model: fake/cloud -> fake/local" in done.stdout
    assert "cost:" in done.stdout
    body = json.loads(router(*args, "-f", "json", cwd=corpus).stdout)
    assert body["changed"] == 1 and body["changes"][0]["changes"]["model"] == {"old": "fake/cloud",
                                                                               "new": "fake/local"}
    # the new side runs the turn on the free local model (loopback, no price): the saving shows
    assert (body["cost"]["delta_usd"], body["cost"]["unpriced_turns"]) == (-0.0045, 0)
    assert body["cost"]["old"] == {"usd": 0.0045, "turns": 3, "unknown_turns": 0,
                                   "priced_by": {"local": 2, "registry": 1}}
    assert body["cost"]["new"] == {"usd": 0.0, "turns": 3, "unknown_turns": 0, "priced_by": {"local": 3}}
    assert "delta -$0.004500 over 3 turns" in done.stdout
    missing = router("diff", "nope:policy.yaml", "policy.yaml", "--sessions", "sessions", cwd=corpus)
    assert missing.returncode == 2 and "nope:policy.yaml: no such revision 'nope'" in missing.stdout


def test_cli_eval_values_and_located_errors(tmp_path: Path) -> None:
    event = ROOT / "examples" / "events" / "turn_end.json"
    ok = router("eval", "usage.percent >= 90 and tool_calls == 1", "--event", str(event), cwd=tmp_path)
    assert (ok.returncode, ok.stdout.strip()) == (0, "true")
    query = router("eval", "model.ref", "--jmespath", "--event", str(event), cwd=tmp_path)
    assert query.stdout.strip() == '"fake/fake-cloud"'
    unknown = router("eval", "usag.percent", "--event", str(event), cwd=tmp_path)
    assert unknown.returncode == 1
    assert "<expr>:1:1: error: unknown name 'usag' [RT302]" in unknown.stdout
    assert "did you mean 'usage'?" in unknown.stdout
    broken = router("eval", "[model", "--jmespath", "--event", str(event), cwd=tmp_path)
    assert "[RT201]" in broken.stdout and "Traceback" not in broken.stderr
    bad_event = write(tmp_path / "e.yaml", "type: turn_end\nturn_index: many\n")
    located = router("eval", "turn_index", "--event", str(bad_event), cwd=tmp_path)
    assert located.returncode == 1 and "e.yaml:2" in located.stdout + located.stderr


def test_readme_replay_of_the_corpus_on_a_fresh_machine(tmp_path: Path) -> None:
    # no agent dir, no models.json of the user's: the corpus carries its prices
    done = router("replay", str(ROOT / "examples" / "sessions"), cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "total: 3 sessions" in done.stdout
    assert "fake/cloud-pricey" in done.stdout


def test_a_model_pi_does_not_have_leaves_the_model_as_it_was(corpus: Path) -> None:
    _, total = replay(corpus, CLOUD_FOR_HARD.replace("do: [{model: fake/cloud}]", "do: [{model: other/big}]"))
    assert dict(total.models) == {"fake/local": 3}
    assert total.errors["model not available"] == 1
