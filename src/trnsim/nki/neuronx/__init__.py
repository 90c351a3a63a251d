"""`import torch_neuronx` under trnsim: the parts of torch-neuronx a script needs on the simulated device.

    from torch_neuronx import nki_jit                 # an NKI kernel called with torch tensors
    from torch_neuronx.xla_impl import custom_op     # custom C++ operators on the GpSimd engine
"""
from __future__ import annotations

from trnsim.nki import jit as nki_jit  # noqa: F401  (torch_neuronx.nki_jit: the kernel's own nki.jit)
from trnsim.nki.neuronx import xla_impl  # noqa: F401  (torch_neuronx.xla_impl)
