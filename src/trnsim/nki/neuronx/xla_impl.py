"""`torch_neuronx.xla_impl`: the XLA side of torch-neuronx (custom C++ operators)."""
from __future__ import annotations

from trnsim.nki.neuronx import custom_op  # noqa: F401  (torch_neuronx.xla_impl.custom_op)
