"""Which rounding the casts use, read as the Neuron runtime reads it, and the seeded random stream for SR.

Precedence: a per-call `rounding=` argument, then the innermost `with rounding(...)`, then the
environment: NEURON_RT_STOCHASTIC_ROUNDING_EN=1 selects stochastic rounding, 0 or unset selects RNE
(any other value is an error, never a guess). The stream of random bits is seeded by the `seed` of
`rounding(...)`, else by NEURON_RT_STOCHASTIC_ROUNDING_SEED (default 0, as the runtime's), so a program
gives the same bits on every run; successive casts draw successive bits from that stream.
"""
from __future__ import annotations

import contextlib
import contextvars
import os

import numpy as np

from trnsim.numerics.errors import RoundingEnvError, RoundingModeError

MODES = ("rne", "stochastic")
ENV_ENABLE = "NEURON_RT_STOCHASTIC_ROUNDING_EN"
ENV_SEED = "NEURON_RT_STOCHASTIC_ROUNDING_SEED"

# (mode, generator) set by `rounding(...)`; None means "read the environment".
_ACTIVE: contextvars.ContextVar[tuple[str, np.random.Generator] | None] = contextvars.ContextVar(
    "trnsim_rounding", default=None)
_env_streams: dict[int, np.random.Generator] = {}


def new_stream(seed) -> np.random.Generator:
    """The random bit stream for a seed (an int or a tuple of ints). SFC64: fast, and the same bits on
    every machine."""
    seed = tuple(int(s) for s in seed) if isinstance(seed, tuple) else int(seed)
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed)))


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise RoundingModeError(f"rounding mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def _env_mode() -> str:
    raw = os.environ.get(ENV_ENABLE, "0").strip()
    if raw in ("", "0"):
        return "rne"
    if raw == "1":
        return "stochastic"
    raise RoundingEnvError(f"{ENV_ENABLE} must be 0 or 1 (1 = stochastic rounding, 0 or unset = RNE); got {raw!r}")


def env_seed() -> int:
    raw = os.environ.get(ENV_SEED, "0").strip() or "0"
    try:
        seed = int(raw, 0)
    except ValueError:
        raise RoundingEnvError(f"{ENV_SEED} must be a non-negative integer; got {raw!r}") from None
    if seed < 0:
        raise RoundingEnvError(f"{ENV_SEED} must be a non-negative integer; got {seed}")
    return seed


def rounding_mode() -> str:
    """The active rounding mode, 'rne' or 'stochastic'."""
    active = _ACTIVE.get()
    return active[0] if active is not None else _env_mode()


def active_stream() -> np.random.Generator:
    """The random stream SR draws from now: the innermost `rounding(...)`'s, else the environment seed's."""
    active = _ACTIVE.get()
    if active is not None:
        return active[1]
    seed = env_seed()
    if seed not in _env_streams:
        _env_streams[seed] = new_stream(seed)
    return _env_streams[seed]


def reset_streams() -> None:
    """Restart the environment-seeded streams, as a new runtime process would."""
    _env_streams.clear()


@contextlib.contextmanager
def rounding(mode: str, seed: int | None = None):
    """Use `mode` for casts inside the block; `seed` starts a fresh SR stream (default: the env seed).

    >>> with rounding("stochastic", seed=7):
    ...     y = cast(x, bfloat16)
    """
    check_mode(mode)
    token = _ACTIVE.set((mode, new_stream(env_seed() if seed is None else seed)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)
