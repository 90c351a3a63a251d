"""`neuronxcc.nki.compiler` (beta): direct allocation of SBUF/PSUM tiles, and compile options.

`nl.ndarray(shape, dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))` places every
logical tile (block) of the tensor at an address the kernel chooses: the core places it there with no
allocator, so tiles placed over each other share bytes and overwrite each other exactly as on hardware.
Each placed tile is watched: reading one after another tile overwrote its bytes is an `AliasingError`
naming both (strict mode, the default) or a warning with the hardware's wrong values (TRNSIM_STRICT=0).
"""
from __future__ import annotations

import contextlib
import inspect
import math

import numpy as np

from trnsim.core.errors import where
from trnsim.nki.compiler import enable_stack_allocator, force_auto_alloc, skip_middle_end_transformations  # noqa: F401
from trnsim.nki.beta._tile import core, instance, register_direct
from trnsim.nki._frontend import no_reorder  # noqa: F401  (nki.compiler.no_reorder, as in nki.language)


class DirectAllocation:
    """A direct allocation: `func(block_index, partitions, bytes_per_partition) -> (start_partition, byte_addr)`."""

    def __init__(self, space: str, func):
        self.space, self.func = space, func

    def allocate(self, tensor, idx, tile_shape, name):
        fbytes = math.prod(tile_shape[1:]) * tensor.dtype.itemsize
        where_ = _call(self.func, tuple(idx), tile_shape[0], fbytes)
        if self.space == "psum" and len(where_) == 3:  # (bank_id, start_partition, byte_addr): nki/api/nki/compiler/psum.py
            bank, p, b = where_
            b = int(bank) * core().bank_bytes + int(b)
        else:
            p, b = where_
        v = core().tensor(tile_shape, tensor.dtype, self.space, name=name, address=(int(p), int(b)))
        register_direct(instance().launch, v, f"{v.name!r} (from {where()})")
        return v


def _call(func, idx, pdim_size, fdim_size):
    """Call an allocation function by its documented argument names (nki/api/nki/compiler/sbuf.py: alloc),
    so a functools.partial that binds an extra leading argument by keyword works; positionally otherwise."""
    kw = {"idx": idx, "pdim_size": pdim_size, "fdim_size": fdim_size}
    try:
        inspect.signature(func).bind(**kw)
    except (TypeError, ValueError):
        return func(idx, pdim_size, fdim_size)
    return func(**kw)


def _flat(idx, tensor_blocks):
    return int(np.ravel_multi_index(idx, tensor_blocks)) if idx else 0


class _Memory:
    def __init__(self, space: str):
        self.space = space

    def auto_alloc(self):
        """The compiler's allocator (the same as `buffer=nl.sbuf` / `nl.psum`)."""
        return self.space

    def alloc(self, func) -> DirectAllocation:
        """Place logical tile `idx` where `func(idx, pdim_size, fdim_size)` says."""
        return DirectAllocation(self.space, func)

    def mod_alloc(self, base_addr=0, *, base_partition=0, num_par_tiles=(), num_free_tiles=(), base_bank=None,
                  num_bank_tiles=(), **kwargs) -> DirectAllocation:
        """Modulo allocation: logical tile i goes to physical tile i % (tiles) (double/multi buffering).
        Flattened block index l -> partition tile l % num_par_tiles, free tile (l // num_par_tiles) % num_free_tiles."""
        npar = math.prod(num_par_tiles) if num_par_tiles else 1
        nfree = math.prod(num_free_tiles or num_bank_tiles) if (num_free_tiles or num_bank_tiles) else 1
        bank = core().bank_bytes if self.space == "psum" else 0
        base = int(base_addr) + (int(base_bank) * bank if base_bank is not None else 0)

        def func(idx, pdim, fbytes):
            shape = getattr(func, "blocks", None)
            flat = _flat(idx, shape) if shape else (idx[0] if idx else 0)
            step = max(fbytes, bank) if num_bank_tiles else fbytes
            return base_partition + (flat % npar) * pdim, base + ((flat // npar) % nfree) * step
        return _ModAllocation(self.space, func)


class _ModAllocation(DirectAllocation):
    def allocate(self, tensor, idx, tile_shape, name):
        self.func.blocks = tensor.block_shape
        return super().allocate(tensor, idx, tile_shape, name)


sbuf, psum = _Memory("sbuf"), _Memory("psum")


@contextlib.contextmanager
def allocation_scope():
    """A scope for the compiler's allocator; the emulator's tensors live as long as the kernel's Python keeps them."""
    yield


def multi_buffer(n):
    """A hint to the compiler's allocator; the emulator allocates every logical tile."""
    return n
