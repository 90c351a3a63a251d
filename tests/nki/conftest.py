import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def trn(monkeypatch):
    """Select the NKI target for a test: trn("trn3")."""
    def set_target(name):
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", name)
    set_target("trn2")
    return set_target
