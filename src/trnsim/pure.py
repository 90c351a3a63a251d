"""Pure functions of the fabric and the planner: the hook point where the speed layer keeps their results.

A function declared `@pure(size)` takes hashable arguments and returns what they (and the catalog in use,
which callers pass as an argument) determine; it computes on every call, as written. The speed layer
(trnsim/memos.py, installed by the package as compiled.py's module finder is) keeps each one's results in a
cache of `size` entries (None: unbounded) while TRNSIM_FAST is on. `key`, where given, names the part of the
arguments the result depends on (the rest only feeds its computation). Nothing here imports the speed layer,
and no result depends on it (tests/test_memos.py). Standard library only, so any layer may declare one.
"""
from __future__ import annotations

import functools
from typing import Callable

DECLARED: list["Pure"] = []
_keeper: Callable | None = None  # the speed layer's wrapper, once it is installed


class Pure:
    """One declared function; `call` is what a call runs: the function itself, or the speed layer's cache of it."""

    def __init__(self, fn: Callable, size: int | None, key: Callable | None):
        self.fn, self.size, self.key, self.call = fn, size, key, fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def __get__(self, obj, cls=None):  # a method: bound to its instance, which is then an argument like any
        return self if obj is None else functools.partial(self, obj)

    def cache_clear(self) -> None:
        """Forget kept results (where a caller changes what a result depends on beyond the arguments)."""
        clear = getattr(self.call, "cache_clear", None)
        if clear is not None:
            clear()

    def cache_info(self):
        """The speed layer's hit and miss counts (functools' form), or None while nothing is kept."""
        info = getattr(self.call, "cache_info", None)
        return info() if info is not None else None


def pure(size: int | None = None, key: Callable | None = None) -> Callable[[Callable], Pure]:
    """Declare a pure function (see the module docstring)."""
    def declare(fn: Callable) -> Pure:
        p = Pure(fn, size, key)
        DECLARED.append(p)
        if _keeper is not None:
            p.call = _keeper(p)
        return p
    return declare


def keep(wrap: Callable | None) -> None:
    """The hook: every declared function, and every one declared later, runs as `wrap(pure)` returns it (None:
    as written)."""
    global _keeper
    _keeper = wrap
    for p in DECLARED:
        p.call = p.fn if wrap is None else wrap(p)
