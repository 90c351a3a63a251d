"""The speed layer's memos of the fabric's and the planner's pure functions (trnsim/pure.py): installed by the
package when it is imported, as compiled.py's module finder is, so that the meaning never imports them.

Each declared function is kept in a least-recently-used cache of its declared size, keyed by its arguments
(or by its declared `key` of them). TRNSIM_FAST chooses once per process, when the package is imported (as
it chooses the compiled modules): with 0 every function runs as written. Results are the same either way
(tests/test_memos.py).
"""
from __future__ import annotations

import functools

from trnsim import flags, pure


def _kept(fn, size: int | None, key):
    """`fn` in a cache of `size` results, by its arguments or by `key(*args, **kwargs)`."""
    if key is None:
        return functools.lru_cache(maxsize=size)(fn)
    results = functools.lru_cache(maxsize=size)(lambda k, args, kwargs: fn(*args.value, **kwargs.value))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        # equal keys, one result: the first call's arguments compute it (_Carried leaves them out of the key)
        return results(key(*args, **kwargs), _Carried(args), _Carried(kwargs))
    call.cache_info, call.cache_clear = results.cache_info, results.cache_clear
    return call


class _Carried:
    """Arguments carried through a cache without being part of its key: every two compare equal."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def install() -> None:
    """Keep every pure function declared from now on, unless TRNSIM_FAST is 0."""
    pure.keep(_kept if flags.FAST.on() else None)
