"""`router replay` over sessions of several projects: each is replayed with its project's trusted
policy (router/commands/replay_policies.py), and a recorded policy digest that differs warns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.commands import replay_policies
from router.commands.explain import load
from router.load.paths import project_identity
from router.replay.log_reader import read_logs
from router.replay.session_file import read_session
from router.runtime.decision_log import digest_key
from router.runtime.decision_record import policy_digest
from tests.replay_sessions import SessionWriter, record, write_log, write_models

ROUTER = Path(sys.executable).parent / "router"


def project(root: Path, rule: str) -> Path:
    (root / ".pi").mkdir(parents=True)
    (root / ".pi" / "router.yaml").write_text(
        f"version: 1\nrules:\n  - {{id: {rule}, on: input, group: proj, do: [{{notify: {rule}}}]}}\n")
    return root


def router(*args: str, cwd: Path, agent: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PI_CODING_AGENT_DIR": str(agent), "HOME": str(cwd)}
    return subprocess.run([str(ROUTER), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False, stdin=subprocess.DEVNULL)


def corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Projects shop (trusted) and blog (not), one session each, a third session elsewhere."""
    agent, here = tmp_path / "agent", tmp_path / "here"
    shop, blog = project(tmp_path / "shop", "shop-rule"), project(tmp_path / "blog", "blog-rule")
    here.mkdir()
    (agent).mkdir()
    (agent / "router.yaml").write_text("version: 1\nrules:\n  - {id: mine, on: input, do: [{notify: m}]}\n")
    for name, cwd in (("s-shop", shop), ("s-blog", blog), ("s-here", here)):
        (SessionWriter(id=name, cwd=str(cwd)).start("fake/local").user("hi").assistant("fake/local")
         ).write(tmp_path / "sessions")
    write_models(tmp_path / "sessions" / "models.json")
    done = router("trust", "--yes", str(shop), cwd=here, agent=agent)
    assert done.returncode == 0, done.stdout + done.stderr
    return agent, here, tmp_path / "sessions"


def test_each_session_is_replayed_with_its_trusted_projects_policy(tmp_path: Path) -> None:
    agent, here, sessions = corpus(tmp_path)
    done = router("replay", str(sessions), "--log", str(tmp_path / "nolog"), "-f", "json", cwd=here,
                  agent=agent)
    assert done.returncode == 0, done.stderr
    fired = {s["id"]: s["rules"] for s in json.loads(done.stdout)["per_session"]}
    assert fired == {"s-shop": {"mine": 1, "shop-rule": 1}, "s-blog": {"mine": 1}, "s-here": {"mine": 1}}
    assert f"note: {tmp_path}/blog/.pi/router.yaml is not trusted" in done.stderr
    given = router("replay", str(sessions), "--log", str(tmp_path / "nolog"), "--policy",
                   str(tmp_path / "blog" / ".pi" / "router.yaml"), "-f", "json", cwd=here, agent=agent)
    assert {s["id"]: s["rules"] for s in json.loads(given.stdout)["per_session"]} == {
        "s-shop": {"blog-rule": 1}, "s-blog": {"blog-rule": 1}, "s-here": {"blog-rule": 1}}
    assert "note:" not in given.stderr


def test_a_recorded_policy_digest_that_differs_warns_once_per_group(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    agent, here, sessions = corpus(tmp_path)
    monkeypatch.chdir(here)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    current = load([], cwd=here).policy
    assert current is not None
    same, other = policy_digest(current), "sha256:" + "ab" * 32
    log = write_log(tmp_path / "log" / "decisions.jsonl", [
        {**record("s-here", "input", 0), "policy": same},
        {**record("s-blog", "input", 0), "policy": other}])
    found = [read_session(p) for p in sorted(sessions.glob("*.jsonl"))]
    groups, _ = replay_policies.groups(found, current, given=False, agent=agent)
    assert [sorted(s.id for s in g.sessions) for g in groups] == [["s-blog", "s-here"], ["s-shop"]]
    [line] = replay_policies.digest_warnings(groups, read_logs([log]))
    assert line == (f"warning: 1 session (blog) recorded under policy sha256:abababababab are replayed with "
                    f"{same[:19]} (the current policy): decisions may differ from the recorded ones")


def test_replayed_sessions_carry_their_project_as_the_live_record_does(tmp_path: Path) -> None:
    """Each session of the replay's JSON, and the `--summary`'s projects, carry `{name, digest}`
    keyed with the agent's decision-log key, the digest a live record of the same project has."""
    agent, here, sessions = corpus(tmp_path)
    done = router("replay", str(sessions), "--log", str(tmp_path / "nolog"), "-f", "json", cwd=here,
                  agent=agent)
    assert done.returncode == 0, done.stderr
    key = digest_key(agent)
    expected = {name: project_identity(tmp_path / cwd, key) for name, cwd in
                (("s-shop", "shop"), ("s-blog", "blog"), ("s-here", "here"))}
    expected["s-here"] = {**(expected["s-here"] or {}), "name": "~"}  # `router` runs with HOME there
    assert {s["id"]: s["project"] for s in json.loads(done.stdout)["per_session"]} == expected
    assert expected["s-shop"] == {"name": "shop", "digest": expected["s-shop"]["digest"]}  # type: ignore[index]
    summary = router("replay", str(sessions), "--log", str(tmp_path / "nolog"), "--summary", "-f", "json",
                     cwd=here, agent=agent)
    assert summary.returncode == 0, summary.stderr
    counted = json.loads(summary.stdout)["projects"]
    assert sorted((p["name"], p["digest"], p["sessions"]) for p in counted) == \
        sorted((p["name"], p["digest"], 1) for p in expected.values() if p is not None)


def test_stamp_gives_each_replayed_decision_its_sessions_project() -> None:
    from router.replay.runner import SessionRun

    runs = [SessionRun("a", "/s/a.jsonl", records=[{"event": "input"}, {"event": "turn_end"}]),
            SessionRun("b", "/s/b.jsonl", records=[{"event": "input"}])]
    replay_policies.stamp(runs, {"/s/a.jsonl": {"name": "shop", "digest": "0123456789ab"}})
    assert [r.get("project") for r in runs[0].records] == [{"name": "shop", "digest": "0123456789ab"}] * 2
    assert "project" not in runs[1].records[0]
