"""Every test of the framework path gets a persistent compile cache of its own: none reads or fills the user's."""
import pytest


@pytest.fixture(autouse=True)
def _own_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(tmp_path / "neuron-compile-cache"))
