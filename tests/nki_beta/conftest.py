import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def trn2(monkeypatch):
    """Every beta-API test runs on Trn2 unless it sets another target."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    monkeypatch.delenv("TRNSIM_STRICT", raising=False)
