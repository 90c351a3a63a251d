"""`nki.compiler`: compile options have no effect on the emulator; the names exist so kernels import."""
from __future__ import annotations


def skip_middle_end_transformations(fn):
    return fn


def enable_stack_allocator(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)


def force_auto_alloc(fn):
    return fn
