"""`nki.compiler`: compile options have no effect on the emulator; the names exist so kernels import."""
from __future__ import annotations


def skip_middle_end_transformations(fn=None):
    """Marks the kernel (a function or a jit kernel, in either decorator order): the compiler then runs none
    of its loop-level transformations, the ones `affine_range` allows and that may reorder iterations
    (nki/api/nki/compiler/__init__.py: skip_middle_end_transformations; beta affine_range notes, general/nki/
    api/nki/language/__init__.py). The beta front end reports a loop-carried dependency in such a kernel's
    affine loops only when the race check is asked for, as the current API does (core/races.py)."""
    if fn is None:
        return skip_middle_end_transformations
    getattr(fn, "fn", fn).skip_middle_end_transformations = True
    return fn


def enable_stack_allocator(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)


def force_auto_alloc(fn):
    return fn
