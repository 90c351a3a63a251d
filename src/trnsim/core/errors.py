"""Named errors for kernels that break a NeuronCore rule.

Each message states the rule, the numbers involved and the user's file:line, e.g.
``PartitionLimitError: partition dim 256 exceeds pmax 128 (nc_matmul operand 'moving') at kern.py:12``.
`KernelError` is what `nki.isa.NkiValidationError` names.
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import warnings

from trnsim.errors import TrnsimError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(sys.modules["trnsim"].__file__))  # this module may be a build's
_inside: dict[str, bool] = {}


def where() -> str:
    """`path:line` of the innermost frame outside trnsim: the user's kernel line being executed.

    Every instruction asks, so whether a file is inside trnsim is cached per file name, and the answer per
    code position (_site). The walk starts at the innermost frame: compiled modules have none."""
    frame, known = _getframe(0), _inside
    while frame is not None:
        name = frame.f_code.co_filename
        k = known.get(name)
        if not (inside(name) if k is None else k):
            return _site(frame)[1]
        frame = frame.f_back
    return "<unknown>"


def where_call() -> tuple[str, int]:
    """`where()` and the column of the call being executed on that line: two calls on one line are two
    statements to the compiler (two DMA queues), though they share `path:line`."""
    frame = _getframe(0)
    while frame is not None:
        if not inside(frame.f_code.co_filename):
            _, at, column = _site(frame)
            return at, column
        frame = frame.f_back
    return "<unknown>", -1


def _site(frame) -> tuple:
    """(code, `path:line`, column) of the instruction `frame` executes, cached by offset and then by code
    object: finding a line number scans the code's line table, which is long in a long kernel. Every
    instruction asks, so the lookup builds no key: an offset's few entries are told apart by their code
    object, kept with each entry (so that no other code object can pass for it)."""
    code, offset = frame.f_code, frame.f_lasti
    hits = _sites.get(offset)
    if hits is None:
        if len(_sites) >= 1 << 16:
            _sites.clear()
        hits = _sites[offset] = []
    for hit in hits:
        if hit[0] is code:
            return hit
    if len(hits) >= 4:  # code objects made afresh (a kernel compiled again): the oldest goes
        del hits[0]
    column = next(itertools.islice(code.co_positions(), offset // 2, None), (None, None, None, None))[2]
    hit = (code, f"{code.co_filename}:{frame.f_lineno}", -1 if column is None else column)
    hits.append(hit)
    return hit


_sites: dict = {}  # offset -> [(code, "path:line", column), ...]
_getframe = sys._getframe


def warn(message: str, category: type[Warning], at: str | None = None, registry: dict | None = None) -> None:
    """Warn at the user's `path:line` (`at`, else where()): found by walking frames, not by a stack depth,
    which compiled modules (trnsim/compiled.py) would change. `registry`: show each once per line."""
    path, _, line = (at or where()).rpartition(":")
    warnings.warn_explicit(message, category, path, int(line) if line.isdigit() else 0, registry=registry)


def inside(filename: str) -> bool:
    """Whether code from `filename` is trnsim's own (or Python's frozen modules), not the user's."""
    known = _inside.get(filename)
    if known is None:
        known = _inside[filename] = os.path.abspath(filename).startswith(_PACKAGE_DIR) or filename.startswith("<frozen")
    return known


def locating(fn):
    """`fn`, an API function, whose named errors name the user's kernel line: a name it looks up (a dtype, an
    ALU op) is refused by code that does not know which kernel line asked."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KernelError:
            raise
        except TrnsimError as e:
            at = where()
            if len(e.args) == 1 and isinstance(e.args[0], str) and at not in e.args[0]:
                e.args = (f"{e.args[0]} at {at}",)
            raise
    return call


def locate_all(namespace: dict) -> None:
    """Every public function of a module's `namespace` made `locating`."""
    for name, fn in list(namespace.items()):
        if callable(fn) and not isinstance(fn, type) and not name.startswith("_") and \
                getattr(fn, "__module__", None) == namespace["__name__"]:
            namespace[name] = locating(fn)


class KernelError(TrnsimError):
    """A kernel broke a hardware or API rule; the message carries the rule, the numbers and file:line."""

    def __init__(self, message: str, location: str | None = None):
        self.location = location or where()
        self.rule = message
        super().__init__(f"{message} at {self.location}")


class PartitionLimitError(KernelError):
    """A partition dim over pmax (128)."""


class PartitionStartError(KernelError):
    """A partition range that starts where the start rule forbids (0/32/64/96 by size)."""


class FreeSizeError(KernelError):
    """A free size over an instruction's or a memory's limit."""


class CapacityError(KernelError):
    """SBUF, PSUM or HBM cannot hold another tensor; the message lists the live tensors."""


class OutOfScopeError(KernelError):
    """A tile used after the loop iteration that made it ended, once its memory went to other tensors."""


class PSUMBankError(KernelError):
    """A PSUM tensor or matmul output crossing a 2 KiB bank, or an address off a bank boundary."""


class MemorySpaceError(KernelError):
    """An operand in a buffer the instruction or engine cannot use (DMA from PSUM, GpSimd on PSUM...)."""


class DTypeError(KernelError):
    """A dtype the engine, instruction or generation lacks."""


class GenerationError(KernelError):
    """An instruction or mode the chosen NeuronCore generation lacks."""


class EngineError(KernelError):
    """A mode of an instruction that the engine it was given to lacks on every generation (activation's
    accumulator registers are the Scalar engine's)."""


class ShapeError(KernelError):
    """Operand shapes that do not match as the instruction requires."""


class OperandTypeError(KernelError, TypeError):
    """Something other than a tile where an instruction takes a tile (None, a number, a string...)."""


class OutOfBoundsError(KernelError, IndexError):
    """A view or access pattern outside its tensor (an IndexError too, as Python's own out-of-range index is)."""


class UninitializedError(KernelError):
    """Never-written values reaching HBM or deciding control flow."""


class ValueUnknownError(KernelError):
    """A timing-only run (values=False) needs a value that only computing would give (a register loaded from
    memory deciding control flow or an address)."""


class DeadlockError(KernelError):
    """A core of an LNC 2 launch waits for its peer (barrier, sendrecv), which has ended or waits too."""


class UninitializedWarning(UserWarning):
    """The non-strict form of UninitializedError."""


class DTypeWarning(UserWarning):
    """A dtype argument the instruction cannot honour, ignored: the result keeps the dtype its destination has."""


class SpillWarning(UserWarning):
    """SBUF could not hold a kernel's live tiles: the compiler spills some to HBM and reloads them, which
    costs DMA time (issued once per core, at its first spill; `-W error::trnsim.core.SpillWarning` refuses
    such kernels instead)."""


class NkiDeprecationWarning(DeprecationWarning):
    """A name or form the targeted NKI version removed or deprecated; the message names its replacement."""


class GridWarning(UserWarning):
    """A launch grid with a dim of 0, run as one program along that dim (the beta front end, see
    nki/beta Kernel.__getitem__)."""


class ScheduleEdgeError(KernelError):
    """A kernel's `with_schedule` edges cannot be kept: malformed, a name no instruction was issued with, a
    cycle, or an edge trnsim cannot place (against program order); the message names the edge and where
    with_schedule was called."""


class ProfileOutputWarning(UserWarning):
    """`nki.profile` asked for a NEFF or NTFF file: trnsim compiles no NEFF and records no device trace, so it
    writes neither; the message says where its own profile is."""
