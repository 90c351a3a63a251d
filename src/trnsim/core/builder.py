"""The hook points of the NeuronCore: where a builder may change how an instruction's meaning is computed,
never what it computes.

A core holds one builder (`NeuronCore.builder`). This one is the reference: checks run on every issue, a
matmul adds its product into PSUM as it is issued, a load copies its bytes at once, a tensor is indexed
afresh every time. A builder that overrides these methods (the speed layer, chosen once per launch by the
front end) must leave every value, instruction and latency as this one gives them (tests/replay compares
the two); this module never imports it.
"""
from __future__ import annotations

import numpy as np

from trnsim import numerics
from trnsim.core.errors import KernelError
from trnsim.core.isa.opcodes import Engine
from trnsim.core.isa.psum import add_product
from trnsim.core.isa.registry import Instruction, generic_check, workload_engines


class Builder:
    """The reference behaviour at each hook point."""

    def checked(self, nc, d, op, engine, operands: dict, attrs: dict, location):
        """(instruction, whether it touches PSUM, signature number, operand placements) for an instruction
        about to be recorded: its checks run (`check`). A builder may keep verdicts by signature; the
        reference numbers none (Record.sig None) and lets the record take its own placements."""
        ins, psum = check(nc, d, op, engine, operands, attrs, location)
        return ins, psum, None, None

    def another(self):
        """The builder of another core of the same launch (an LNC 2 pair)."""
        return self

    def loop(self, nc, indices):
        """A kernel loop's indices as the core runs them: the reference runs every iteration's body."""
        return indices

    def tensor(self, v):
        """A new tensor's view, as the core gives it out (a builder may keep its parts by index: View._parts)."""
        return v

    def stationary(self, nc, v, rows: int):
        """(stationary tile `v` as [rows, -1]: FP32, or an owned copy of its bytes where this builder's
        matmul_into widens them; a key naming its bytes or None)."""
        return numerics.widen(v.array().reshape(rows, -1)), None

    def moving(self, nc, v, rows: int):
        """The moving tile as [rows, N]: an owned copy of its bytes (widened when multiplied)."""
        return np.array(v.array().reshape(rows, -1))

    def matmul_into(self, ins, nc, a, b, am, bm, akey=None) -> None:
        """Add a.T @ b into PSUM now (isa/psum.py: add_product)."""
        add_product(ins, nc, a, b, am, bm)

    def flush(self, nc) -> None:
        """Land PSUM work owed by earlier matmuls (the reference owes none)."""

    def copy(self, nc, dst, src) -> bool:
        """A plain copy of all of `src` into `dst` (tensor_copy, dma_copy), about to be made: True when the
        builder took it (values it owes `src`, now owed `dst`, converted as the copy converts); the reference
        copies now."""
        return False

    def sync(self, nc) -> None:
        """The end of a launch: owed work lands and kept conversions go."""
        self.flush(nc)

    def load(self, nc, dst, src) -> bool:
        """A plain DMA of HBM view `src` into all of tile `dst`, about to be copied: True when the builder took
        it (to copy later); the reference copies now."""
        return False

    def loaded(self, nc, dst, src) -> None:
        """A plain DMA copied all of `src` into `dst` (a builder may note where the tile's bytes came from)."""


REFERENCE = Builder()


def check(nc, d, op, engine, operands: dict, attrs: dict, location) -> tuple:
    """The instruction (its engine picked) and its checks run, charged to the budget: (instruction, whether it
    touches PSUM)."""
    named = _engine(engine)
    eng = named or (d.pick(operands, attrs, nc) if d.pick else None) or d.engines[0]
    ins = Instruction(op, eng, operands, attrs, location, d.writes)
    nc.budget.charge(ins.location)
    psum = generic_check(d, ins, nc)
    d.check(ins, nc)
    if named is None:  # the compiler's to place: the scheduler picks among these (registry.workload_engine)
        choices = workload_engines(d, ins, nc)
        if choices is not None:
            attrs["choices"] = choices
    return ins, psum


def _engine(engine):
    if engine is None:
        return None
    name = getattr(engine, "name", str(engine)).lower().removesuffix("_engine")
    if name in ("unknown", "0", "none"):
        return None
    if name == "act":
        name = "scalar"
    if name in ("pool", "gpsimd"):
        name = "gpsimd"
    try:
        return Engine(name)
    except ValueError:
        raise KernelError(f"unknown engine {engine!r}; engines: {', '.join(e.value for e in Engine)}") from None
