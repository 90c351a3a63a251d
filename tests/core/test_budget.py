"""The launch's instruction budget bounds runs with values; a timing-only run is bounded by memory alone."""
import pytest

import trnsim.core.limits as limits
from trnsim import flags
from trnsim.core import NeuronCore, Op
from trnsim.core.limits import Budget, BudgetError


def issue(nc, n):
    t = nc.tensor((128, 8), "float32")
    for _ in range(n):
        nc.issue(Op.MEMSET, dst=t, value=0.0)


def test_default_budget_bounds_values_runs_not_timing_only(monkeypatch):
    """With the default bound lowered to 100, a values run stops at the 101st instruction and a timing-only
    run of the same 250 goes on."""
    monkeypatch.setattr(limits, "DEFAULT_INSTRUCTIONS", 100)
    with pytest.raises(BudgetError, match="more than 100 instructions"):
        issue(NeuronCore("trn1", values=True, budget=Budget()), 250)
    nc = NeuronCore("trn1", values=False, budget=Budget())
    issue(nc, 250)
    assert len(nc.stream) == 250


@pytest.mark.parametrize("from_env", [False, True])
def test_a_budget_the_user_set_holds_in_timing_only_runs(monkeypatch, from_env):
    """max_instructions (or TRNSIM_MAX_INSTRUCTIONS) given by the user bounds a timing-only run too."""
    if from_env:
        monkeypatch.setenv(flags.MAX_INSTRUCTIONS.name, "60")
    budget = Budget() if from_env else Budget(instructions=60)
    with pytest.raises(BudgetError, match="more than 60 instructions"):
        issue(NeuronCore("trn1", values=False, budget=budget), 100)
