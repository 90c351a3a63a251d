"""`kernel.with_schedule(edges)` adds order the timing model does not honour: it says so by name, and the kernel
still runs with its values unchanged."""
import warnings

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.language as nl
from trnsim.core import ScheduleWarning


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.multiply(t, 2.0))
    return out


def test_with_schedule_warns_and_keeps_values():
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    with pytest.warns(ScheduleWarning, match="does not honour schedule edges") as caught:
        k = double.with_schedule([])
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScheduleWarning)
        np.testing.assert_array_equal(k(x), x * 2)
