"""Pure functions of the fabric and the planner: the hook point where the speed layer keeps their results.

A function declared `@pure(size)` takes hashable arguments and returns what they (and the catalog in use,
which callers pass as an argument) determine. As written it computes on every call; the speed layer
(trnsim/memos.py, which the package installs when it is imported, before any module declares one, as it
installs compiled.py's module finder) may return it kept in a cache of `size` entries (None: unbounded).
`key`, where given, names the part of the arguments the result depends on (the rest only feeds its
computation). Either way a declared function has `cache_clear()` (for a caller that changes what a result
depends on beyond its arguments) and `cache_info()` (None where nothing is kept). Nothing here imports the
speed layer, and no result depends on it (tests/test_memos.py). Standard library only, so any layer may
declare one.
"""
from __future__ import annotations

from typing import Callable

DECLARED: list[Callable] = []  # every declared function, as the module that declared it holds it
_keeper: Callable | None = None  # keeper(fn, size, key) -> fn kept in a cache; set by the speed layer


def pure(size: int | None = None, key: Callable | None = None) -> Callable[[Callable], Callable]:
    """Declare a pure function (see the module docstring)."""
    def declare(fn: Callable) -> Callable:
        if _keeper is not None:
            fn = _keeper(fn, size, key)
        else:
            fn.cache_clear, fn.cache_info = _nothing, _nothing
        DECLARED.append(fn)
        return fn
    return declare


def _nothing():
    return None


def keep(keeper: Callable | None) -> None:
    """The hook: functions declared from now on are kept by `keeper(fn, size, key)` (None: run as written)."""
    global _keeper
    _keeper = keeper
