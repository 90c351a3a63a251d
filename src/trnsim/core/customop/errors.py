"""The named errors of custom C++ operators: building them, loading them, and the rules they run under."""
from __future__ import annotations

from trnsim.errors import ConfigError, TrnsimError
from trnsim.specs.customop import CustomOpPlatformError


class CustomOpError(TrnsimError):
    """A custom C++ operator that cannot be built, loaded or run."""


class CustomOpBuildError(CustomOpError, ConfigError):
    """Bad arguments to custom_op.load (names, files, flags), or no C++ compiler."""


class CustomOpCompileError(CustomOpError):
    """The C++ compiler refused the sources: its first error, at the user's file:line."""


class CustomOpRuleError(CustomOpError):
    """An operator broke a rule of the GpSimd custom-operator runtime (the rule is in `.rule`)."""

    def __init__(self, rule: str, message: str):
        self.rule = rule
        super().__init__(message)


__all__ = ["CustomOpError", "CustomOpBuildError", "CustomOpCompileError", "CustomOpRuleError", "CustomOpPlatformError"]
