"""Growable arrays of integers (and of floats: reals) for the interval maps (intervals.py): lists here, C arrays
in the compiled build.

The compiled build cimports arrays.pxd in this module's place: the same operations on malloc'd memory, so
the maps' code, written once, indexes C integers there and Python lists here. An array holds `size` items (its
capacity, which the caller tracks); items past those written are never read, so neither form clears them.
"""
from __future__ import annotations


def new(size: int) -> list[int]:
    """An array of `size` items."""
    return [0] * size


def resized(a: list[int], size: int) -> list[int]:
    """`a` with room for `size` items (never fewer than it has), its items kept."""
    a.extend([0] * (size - len(a)))
    return a


def moved(a: list[int], dst: int, src: int, k: int) -> None:
    """Copy items src .. src + k - 1 to dst .. dst + k - 1 (the ranges may overlap), as memmove does."""
    a[dst:dst + k] = a[src:src + k]


def new_reals(size: int) -> list[float]:
    """An array of `size` floats."""
    return [0.0] * size


def resized_reals(a: list[float], size: int) -> list[float]:
    """resized, for an array of floats."""
    a.extend([0.0] * (size - len(a)))
    return a


def release(a) -> None:
    """Give the array's memory back (a list is freed by reference counting)."""
