import linecache

import pytest


@pytest.fixture(autouse=True)
def _trn2(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")


def source_at(err) -> str:
    """The user's source line an error points at (its message ends with 'at path:line')."""
    path, line = err.location.rsplit(":", 1)
    return linecache.getline(path, int(line)).strip()


import numpy as np  # noqa: E402

from trnsim.core import NeuronCore, Op  # noqa: E402


@pytest.fixture
def nc():
    """A fresh trn2 NeuronCore; afterwards, every recorded instruction must have a cost description."""
    core = NeuronCore("trn2")
    yield core
    from trnsim.core import REGISTRY
    from trnsim.core.isa.work import PE, Stream, Transfer
    for rec in core.stream:
        cost = REGISTRY[rec.op].cost(rec, core.spec)
        assert isinstance(cost, (Stream, PE, Transfer)) and cost.engine == rec.engine.value, rec


def on_chip(nc, values, dtype=None, space="sbuf"):
    """An SBUF (or PSUM) tensor holding `values`, written by a dma_copy (and a tensor_copy for PSUM)."""
    values = np.asarray(values)
    src = nc.hbm_tensor(values)
    t = nc.tensor(values.shape, dtype or src.dtype, "sbuf")
    nc.issue(Op.DMA_COPY, dst=t, src=src)
    if space == "psum":
        p = nc.tensor(values.shape, dtype or src.dtype, "psum")
        nc.issue(Op.TENSOR_COPY, dst=p, src=t)
        return p
    return t


def read(t):
    """A tensor's values as a numpy copy."""
    return np.array(t.array())
