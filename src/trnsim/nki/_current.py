"""The core the calling kernel runs on (per thread: an LNC 2 launch runs one thread per core) and `issue`,
the call every front-end instruction goes through into it.

Apart from _frontend, which stays Python (its launch frame is where liveness.drop_dead_names stops), so
that these run compiled (trnsim/compiled.py).
"""
from __future__ import annotations

import threading

from trnsim.core import NeuronCore, Op, fast
from trnsim.core.errors import OperandTypeError
from trnsim.core.isa.registry import NAME

_state = threading.local()


def core() -> NeuronCore:
    """The core running the calling kernel; outside a kernel, a default one (so helpers work in a REPL)."""
    nc = getattr(_state, "core", None)
    if nc is None:
        nc = _state.core = NeuronCore(builder=fast.builder())
    return nc


def issue(opcode: Op, /, engine=None, name=None, **kw):
    """One instruction on the calling kernel's core; `name` (an nki.isa call's `name=`) is kept in its record's
    attributes, where `Kernel.with_schedule` edges find it."""
    if name is not None:
        kw[NAME] = named(name)
    return core().submit(opcode, engine, kw)


def named(name) -> str:
    """An instruction's `name=`: text, or refused by name."""
    if type(name) is not str:
        raise OperandTypeError(f"name= of an instruction is a str (what with_schedule edges name it by); got "
                               f"{type(name).__name__} {str(name)[:40]!r}")
    return name
