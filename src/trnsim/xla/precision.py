"""BF16 storage as the Neuron runtime keeps it, with stochastic rounding when NEURON_RT_STOCHASTIC_ROUNDING_EN=1.

Under XLA_USE_BF16=1 (or XLA_DOWNCAST_BF16=1) torch-xla keeps every fp32 tensor on the device in bf16. On a
NeuronCore the engines compute in fp32 and round each result when they write it to HBM: to nearest even,
or stochastically with the runtime's SR switch. Rounding is what makes a bf16 run stall: a weight update
smaller than half a bf16 step is lost to RNE every time, while SR keeps it on average.

trnsim reproduces that at graph boundaries: the worker takes the bf16 switches away from torch-xla (the CPU
runtime would round every op to nearest even), lets the graph compute in fp32, and after each step rounds
every fp32 tensor alive on the device to bf16 with trnsim.numerics' casts (RNE or SR). The graphs are
priced as the device stores them (`as_stored`: f32 arrays as bf16).

SR draws its bits from a stream seeded by NEURON_RT_STOCHASTIC_ROUNDING_SEED, the step and the tensor's
contents, so data-parallel ranks holding equal values round them equally and a run repeats bit for bit.
"""
from __future__ import annotations

import os
import re
import zlib

import numpy as np

from trnsim.numerics import casts, dtypes, modes

FLAGS = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")


def take_flags(environ=os.environ) -> bool:
    """Whether the script asked for bf16 storage; the flags are removed so torch-xla computes in fp32."""
    asked = any(environ.get(f, "0").strip() == "1" for f in FLAGS)
    for f in FLAGS:
        environ.pop(f, None)
    return asked


def as_stored(text: str) -> str:
    """HLO text with its fp32 arrays as the device stores them under bf16 storage."""
    return re.sub(r"\bf32\[", "bf16[", text)


def round_to_bf16(values: np.ndarray, step: int, mode: str | None = None) -> np.ndarray:
    """fp32 values rounded to bf16 (returned as fp32) by the runtime's rounding mode."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    mode = mode or modes.rounding_mode()
    rng = None
    if mode == "stochastic":
        rng = modes.new_stream((modes.env_seed(), step, zlib.crc32(values.tobytes()), values.size))
    return casts.cast(values, dtypes.bfloat16, rounding=mode, rng=rng).astype(np.float32)


def keep_bf16(tensors, step: int, mode: str | None = None) -> int:
    """Round each fp32 tensor (torch, any device) to bf16 in place of its data; returns how many were rounded."""
    import torch

    n = 0
    seen = set()
    for t in tensors:
        if t.dtype != torch.float32 or t._is_view() or id(t) in seen:
            continue
        seen.add(id(t))
        host = t.detach().cpu().numpy()
        t.data = torch.from_numpy(round_to_bf16(host, step, mode)).to(t.device)
        n += 1
    return n
