"""Named errors of the numerics layer; each message states the rule and the numbers."""
from __future__ import annotations

from trnsim.errors import ConfigError, TrnsimError


class NumericsError(TrnsimError, ValueError):
    """Bad input to a cast, a packing or an MX operation."""


class PackedWidthError(NumericsError):
    """An x4 packed container given the wrong width (not 4 elements, or not 32-bit storage)."""


class BlockShapeError(NumericsError):
    """An MX block that does not tile the tensor (the axis is not a multiple of the block)."""


class RoundingModeError(NumericsError):
    """A rounding mode other than 'rne' or 'stochastic'."""


class RoundingEnvError(ConfigError):
    """NEURON_RT_STOCHASTIC_ROUNDING_EN or _SEED set to a value the runtime would not accept."""
