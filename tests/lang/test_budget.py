"""The evaluation budget's clock (router/lang/budget.py)."""

from __future__ import annotations

import threading

import pytest

from router.lang.budget import DEFAULT_BUDGET, DRY_RUN_BUDGET, Budget, BudgetExceeded, BudgetLimits


@pytest.mark.parametrize("cpu_clock", [True, False])
def test_a_dry_run_budget_counts_cpu_time_so_a_wait_never_spends_it(cpu_clock: bool) -> None:
    """A loaded machine makes wall time pass without the evaluation running: a dry run's budget
    (DRY_RUN_BUDGET counts CPU) is not spent by it, the sidecar's (wall, the bridge's clock) is."""
    budget = Budget(BudgetLimits(time_ms=10, rule_ms=10, cpu_clock=cpu_clock))
    with budget.running():
        threading.Event().wait(0.05)  # 50 ms of wall time, next to no CPU time of this thread
        if cpu_clock:
            budget.check()
        else:
            with pytest.raises(BudgetExceeded):
                budget.check()
    assert DRY_RUN_BUDGET.cpu_clock and not DEFAULT_BUDGET.cpu_clock
