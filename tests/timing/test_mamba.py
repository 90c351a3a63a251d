"""The fused Mamba example kernels compute the selective scan (numpy recurrence), and time in order."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import mamba  # noqa: E402


@pytest.mark.parametrize("kernel", mamba.KERNELS, ids=lambda k: k.__name__)
def test_mamba_matches_the_recurrence(kernel, monkeypatch):
    monkeypatch.setattr(mamba, "SEQ_TILE", 32)  # v3: two sequence tiles, the scan carried across them
    args = mamba.inputs(channels=256, seq=64, state=4, rng=np.random.default_rng(1))
    np.testing.assert_allclose(kernel(*args), mamba.reference(*args), rtol=2e-4, atol=2e-5)
