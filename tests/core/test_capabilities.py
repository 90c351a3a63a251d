"""Generation differences are catalog capabilities: the checks read them, never a version number."""
import dataclasses

import numpy as np
import pytest

from trnsim import specs
from trnsim.core.errors import GenerationError
from trnsim.core.isa.opcodes import Op
from trnsim.core.machine import NeuronCore
from trnsim.specs import catalog


def test_every_generation_names_the_same_capabilities():
    keys = {k: set(c.capabilities) for k, c in catalog.neuroncores().items()}
    first = next(iter(keys.values()))
    assert all(k == first for k in keys.values()), keys


def test_having_names_the_generations():
    assert specs.having("mx") == "NeuronCore-v4 or newer"
    assert specs.having("hwdge") == "NeuronCore-v3 or newer"


def _with(nc, **caps):
    """The core as if its generation's catalog entry said `caps`."""
    nc.spec = dataclasses.replace(nc.spec, capabilities={**nc.spec.capabilities, **caps})
    return nc


def test_a_check_follows_the_catalog_not_the_version():
    nc = NeuronCore("trn2")
    src = nc.hbm_tensor(np.ones((128, 64), np.float32))
    dst = nc.tensor((128, 64), "float32", "sbuf")
    nc.issue(Op.DMA_COPY, dst=dst, src=src, dge_mode="hwdge")
    _with(nc, hwdge=False)
    with pytest.raises(GenerationError, match="hwdge needs NeuronCore-v3 or newer"):
        nc.issue(Op.DMA_COPY, dst=dst, src=src, dge_mode="hwdge")


def test_an_instruction_needs_its_capability():
    nc = _with(NeuronCore("trn2"), mx=True)  # a v3 that had MX data paths would take quantize_mx
    src = nc.tensor((32, 16), "bfloat16", "sbuf")
    src.store(np.ones((32, 16), src.dtype.np))
    dst = nc.tensor((32, 4), "float8_e4m3fn_x4", "sbuf")
    scale = nc.tensor((32, 4), "uint8", "sbuf")
    nc.issue(Op.QUANTIZE_MX, dst=dst, src=src, dst_scale=scale)
    _with(nc, mx=False)
    with pytest.raises(GenerationError, match="quantize_mx needs NeuronCore-v4"):
        nc.issue(Op.QUANTIZE_MX, dst=dst, src=src, dst_scale=scale)
