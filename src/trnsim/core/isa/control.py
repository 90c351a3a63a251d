"""Sequencer instructions: 32-bit registers for dynamic control flow, and the LNC 2 core barrier.

Registers live in the sequencers, not in memory, so they are attributes of the instruction (`reg`,
`src`), not memory operands. A register loaded from never-written memory is marked; using it for control
flow (a loop bound, a while condition) is the error, as a memory checker would report it.
Register instructions are `control`: they run in timing-only mode too, so loops on registers issue the same
instructions either way; a register loaded from memory there has no known value (Register.known).
"""
from __future__ import annotations

import numpy as np

from trnsim.core.errors import DTypeError, GenerationError, OperandTypeError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define
from trnsim.core.isa.work import Stream


def _none(rec, spec):
    return Stream(rec.engine.value, 0, 0)


def _set(reg, x):
    """Give register `reg` the value of a number or of another register."""
    if hasattr(x, "poisoned"):
        reg.value, reg.poisoned, reg.known = x.value, x.poisoned, x.known
    elif not hasattr(type(x), "__index__"):
        raise OperandTypeError(f"a register takes an integer or another register; got {type(x).__name__} "
                               f"{str(x)[:40]!r}")
    else:
        reg.value, reg.poisoned, reg.known = int(x), False, True


define(Op.REGISTER_ALLOC, Engine.SYNC, lambda ins, nc: None, lambda ins, nc: _set(ins.reg, ins.attrs.get("value") or 0),
       _none, writes=(), control=True)
define(Op.REGISTER_MOVE, Engine.SYNC, lambda ins, nc: None, lambda ins, nc: _set(ins.reg, ins.attrs["value"]), _none,
       writes=(), control=True)


def _one_element(ins, name):
    """One element of at most 32 bits; the scalar loads and stores of NKI 0.7 (`wide`) take int32 or int64."""
    v = ins.operands[name]
    if ins.attrs.get("wide"):
        if v.size != 1 or v.dtype.name not in ("int32", "int64"):
            raise ShapeError(f"{ins.op.value}: {name} {v.name!r} {list(v.shape)} {v.dtype.name} must be a 1x1 "
                             f"nl.int32 or nl.int64 tensor (unsigned dtypes: use the signed one of the same width)")
        return
    if v.size != 1 or v.dtype.itemsize > 4:
        raise ShapeError(f"{ins.op.value}: {name} {v.name!r} {list(v.shape)} {v.dtype.name} must be one element of "
                         f"at most 32 bits")


def _load_semantics(ins, nc):
    if not nc.values:  # memory holds no values in a timing-only run
        ins.reg.value, ins.reg.poisoned, ins.reg.known = 0, False, False
        return
    v = ins.src
    x = v.array().reshape(-1)[0]
    if not v.dtype.is_int and not np.isfinite(x):
        raise DTypeError(f"{ins.op.value}: {v.name!r} holds {float(x)}, which no integer register value stands for")
    ins.reg.value = int(x) if v.dtype.is_int else int(np.float32(x))
    ins.reg.poisoned, ins.reg.known = v.poisoned(), True


define(Op.REGISTER_LOAD, Engine.SYNC, lambda ins, nc: _one_element(ins, "src"), _load_semantics, _none, writes=(),
       control=True)


def _store_semantics(ins, nc):
    v, x = ins.dst, ins.attrs["value"]
    value, poisoned = (x.value, x.poisoned) if hasattr(x, "poisoned") else (int(x), False)
    v.store(np.full(v.shape, value).astype(v.dtype.np), np.ones(v.shape, bool) if poisoned else None)


define(Op.REGISTER_STORE, Engine.SYNC, lambda ins, nc: _one_element(ins, "dst"), _store_semantics, _none)


def _barrier_check(ins, nc):
    if 2 not in nc.lnc_configs:
        raise GenerationError(f"core_barrier synchronises the 2 cores of an LNC 2; {nc.target} has LNC "
                              f"{', '.join(map(str, nc.lnc_configs))} only")
    cores = tuple(ins.attrs.get("cores") or (0, 1))
    if sorted(cores) != [0, 1]:
        raise ShapeError(f"core_barrier: cores must be (0, 1); got {cores}")


def _barrier_semantics(ins, nc):
    if nc.barrier is not None:
        nc.barrier.wait(nc.program_id)


define(Op.CORE_BARRIER, Engine.SYNC, _barrier_check, _barrier_semantics, _none, writes=())
