"""Resolved vars remembered per environment, for a caller that evaluates many events of one policy.

The compiled policy is immutable and `CompiledPolicy.vars_for` is pure; the sidecar keeps one memo
per loaded policy (most events carry the same environment) and passes it to `evaluate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.compile.ir import CompiledPolicy

MAX_ENVIRONMENTS = 64  # distinct environments remembered before the memo starts again


class VarsMemo:
    """`policy.vars_for(env)`, computed once per distinct value of the env variables it reads."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy
        self._by_env: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}

    def vars_for(self, env: Mapping[str, str]) -> dict[str, Any]:
        if not self.policy.env_vars:
            return dict(self.policy.vars)
        key = tuple(sorted((name, env[name]) for name in self.policy.env_names if name in env))
        found = self._by_env.get(key)
        if found is None:
            if len(self._by_env) >= MAX_ENVIRONMENTS:
                self._by_env.clear()
            found = self._by_env[key] = self.policy.vars_for(env)
        return dict(found)
