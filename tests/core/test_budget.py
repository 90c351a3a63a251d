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


def test_charging_at_once_reads_and_stops_where_charging_each_would(monkeypatch):
    """A stamped loop counts its records at once up to the next memory reading or bound (Budget.at_once) and
    charges that one alone, at its line: memory is read after the same instructions, and the same one raises,
    as when each is charged."""
    monkeypatch.setattr(limits, "_CHECK_EVERY", 8)
    readings = []
    monkeypatch.setattr(Budget, "grown", lambda self: readings.append(self.issued) or 0)
    for start in range(20):
        for bound in (None, 25, 30):
            for count in (1, 5, 13, 40):
                readings.clear()
                b = Budget(instructions=bound if bound is not None else 10 ** 9)
                b.max_instructions, b.issued = bound, start
                raised = False
                try:
                    counted = b.at_once(count)
                    for j in range(count):
                        if j >= counted:
                            b.charge("k.py:1")
                            counted = j + 1 + b.at_once(count - j - 1)
                except BudgetError:
                    raised = True
                last = start + count if bound is None else min(start + count, bound + 1)
                assert raised == (bound is not None and start + count > bound)
                assert b.issued == last
                assert readings == [n for n in range(start + 1, last + 1) if n % 8 == 0 and not (raised and n == last)]
