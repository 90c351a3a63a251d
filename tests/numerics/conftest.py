"""Every numerics test starts from RNE and the default seed, whatever the shell has set."""
import pytest

from trnsim.numerics import modes


@pytest.fixture(autouse=True)
def clean_rounding_env(monkeypatch):
    monkeypatch.delenv(modes.ENV_ENABLE, raising=False)
    monkeypatch.delenv(modes.ENV_SEED, raising=False)
    modes.reset_streams()
