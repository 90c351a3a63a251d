"""The speed layer's memos of the fabric's and the planner's pure functions (trnsim/pure.py): installed by the
package when it is imported, as compiled.py's module finder is, so that the meaning never imports them.

Each declared function gets a least-recently-used cache of its declared size, keyed by its arguments (or by
its declared `key` of them). The switch is TRNSIM_FAST, read at each call as every flag is: with 0 a call
computes afresh and leaves the cache as it was. Results are the same either way (tests/test_memos.py).
"""
from __future__ import annotations

import functools

from trnsim import flags, pure


def _kept(p: pure.Pure):
    """`p` through a cache while the speed layer is on."""
    fn, key = p.fn, p.key
    if key is None:
        cached = functools.lru_cache(maxsize=p.size)(fn)
    else:
        results = functools.lru_cache(maxsize=p.size)(lambda k, args, kwargs: fn(*args.value, **kwargs.value))

        def cached(*args, **kwargs):
            # equal keys, one result: the first call's arguments compute it (_Args leaves them out of the key)
            return results(key(*args, **kwargs), _Args(args), _Args(kwargs))
        cached.cache_info, cached.cache_clear = results.cache_info, results.cache_clear

    def call(*args, **kwargs):
        return cached(*args, **kwargs) if flags.FAST.on() else fn(*args, **kwargs)
    call.cache_info, call.cache_clear = cached.cache_info, cached.cache_clear
    return call


class _Args:
    """Arguments carried through a cache without being part of its key: every two compare equal."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def install() -> None:
    """Give every pure function, declared or still to be, its cache."""
    pure.keep(_kept)
