"""Sequencer instructions: 32-bit registers for dynamic control flow, and the LNC 2 core barrier.

Registers live in the sequencers, not in memory, so they are attributes of the instruction (`reg`,
`src`), not memory operands. A register loaded from never-written memory is marked; using it for control
flow (a loop bound, a while condition) is the error, as a memory checker would report it.
"""
from __future__ import annotations

import numpy as np

from trnsim.core.errors import GenerationError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define


def _none(rec, spec):
    return {"engine": rec.engine.value, "partitions": 0, "elements": 0}


def _reg_value(x):
    return (x.value, x.poisoned) if hasattr(x, "poisoned") else (int(x), False)


def _alloc_semantics(ins, nc):
    ins.reg.value, ins.reg.poisoned = _reg_value(ins.attrs.get("value") or 0)


define(Op.REGISTER_ALLOC, Engine.SYNC, lambda ins, nc: None, _alloc_semantics, _none, writes=())


def _move_semantics(ins, nc):
    ins.reg.value, ins.reg.poisoned = _reg_value(ins.attrs["value"])


define(Op.REGISTER_MOVE, Engine.SYNC, lambda ins, nc: None, _move_semantics, _none, writes=())


def _one_element(ins, name):
    v = ins.operands[name]
    if v.size != 1 or v.dtype.itemsize > 4:
        raise ShapeError(f"{ins.op.value}: {name} {v.name!r} {list(v.shape)} {v.dtype.name} must be one element of "
                         f"at most 32 bits")


def _load_semantics(ins, nc):
    v = ins.src
    x = v.array().reshape(-1)[0]
    ins.reg.value = int(x) if v.dtype.is_int else int(np.float32(x))
    ins.reg.poisoned = v.poisoned()


define(Op.REGISTER_LOAD, Engine.SYNC, lambda ins, nc: _one_element(ins, "src"), _load_semantics, _none, writes=())


def _store_semantics(ins, nc):
    v = ins.dst
    value, poisoned = _reg_value(ins.attrs["value"])
    v.store(np.full(v.shape, value).astype(v.dtype.np), np.ones(v.shape, bool) if poisoned else None)


define(Op.REGISTER_STORE, Engine.SYNC, lambda ins, nc: _one_element(ins, "dst"), _store_semantics, _none)


def _barrier_check(ins, nc):
    if nc.gen < 3:
        raise GenerationError(f"core_barrier synchronises the 2 cores of an LNC 2 (Trn2/Trn3); this core is v{nc.gen}")
    cores = tuple(ins.attrs.get("cores") or (0, 1))
    if sorted(cores) != [0, 1]:
        raise ShapeError(f"core_barrier: cores must be (0, 1); got {cores}")


def _barrier_semantics(ins, nc):
    if nc.barrier is not None:
        nc.barrier.wait(nc.program_id)


define(Op.CORE_BARRIER, Engine.SYNC, _barrier_check, _barrier_semantics, _none, writes=())
