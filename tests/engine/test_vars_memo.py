"""engine.vars_memo: resolved vars remembered per environment, the compiled policy left immutable."""

from __future__ import annotations

from pathlib import Path

from router.engine.interpreter import evaluate
from router.engine.vars_memo import MAX_ENVIRONMENTS, VarsMemo
from tests.helpers import compile_ok

POLICY = """
vars:
  limit: {env: LIMIT, type: number, default: 5}
rules:
  - id: show
    on: input
    do:
      - notify: "limit={vars.limit}"
"""


def test_the_memo_gives_what_the_policy_resolves_and_computes_once_per_environment(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = VarsMemo(policy)
    assert memo.vars_for({"LIMIT": "7"}) == policy.vars_for({"LIMIT": "7"}) == {"limit": 7}
    first = memo._by_env[(("LIMIT", "7"),)]
    memo.vars_for({"LIMIT": "7", "OTHER": "x"})  # a variable the policy does not read changes nothing
    assert memo._by_env == {(("LIMIT", "7"),): first}
    assert memo.vars_for({}) == {"limit": 5}


def test_a_caller_cannot_change_what_the_memo_remembers(tmp_path: Path) -> None:
    memo = VarsMemo(compile_ok(tmp_path, POLICY))
    memo.vars_for({"LIMIT": "1"})["limit"] = 99
    assert memo.vars_for({"LIMIT": "1"}) == {"limit": 1}


def test_the_memo_starts_again_after_many_environments(tmp_path: Path) -> None:
    memo = VarsMemo(compile_ok(tmp_path, POLICY))
    for n in range(MAX_ENVIRONMENTS + 1):
        memo.vars_for({"LIMIT": str(n)})
    assert len(memo._by_env) == 1


def test_evaluate_with_and_without_a_memo_decides_alike(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    event = {"type": "input", "text": "hi", "source": "interactive", "env": {"LIMIT": "3"}}
    memo = VarsMemo(policy)
    with_memo = [evaluate(policy, event, vars_memo=memo).effects for _ in range(2)]
    assert with_memo[0] == with_memo[1] == evaluate(policy, event).effects
    assert with_memo[0][0].params["text"] == "limit=3"
