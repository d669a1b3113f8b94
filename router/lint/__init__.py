"""`router lint`: semantic checks over a compiled policy, one registered function per code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic

Check = Callable[[CompiledPolicy], Iterator[Diagnostic]]


@dataclass(frozen=True)
class CheckSpec:
    code: str
    run: Check


CHECKS: dict[str, CheckSpec] = {}


def check(code: str) -> Callable[[Check], Check]:
    """Register a lint check that reports diagnostics with `code`."""

    def register(run: Check) -> Check:
        CHECKS[code] = CheckSpec(code, run)
        return run

    return register


def run_checks(policy: CompiledPolicy) -> list[Diagnostic]:
    """Every registered check's diagnostics for the policy."""
    from router.lint import checks  # noqa: F401  (registers the checks)

    return [d for spec in CHECKS.values() for d in spec.run(policy)]
