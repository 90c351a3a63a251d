import linecache

import pytest


@pytest.fixture(autouse=True)
def _trn2(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")


def source_at(err) -> str:
    """The user's source line an error points at (its message ends with 'at path:line')."""
    path, line = err.location.rsplit(":", 1)
    return linecache.getline(path, int(line)).strip()
