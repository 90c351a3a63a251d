"""Named errors shared by every layer, and where in the user's code they happened.

Every error trnsim raises on bad input is a TrnsimError: its message says which rule was broken,
with the numbers involved, and (where the input came from a user's file) that file and line.
The CLI prints the message and exits with `exit_code`, never a traceback.
"""
from __future__ import annotations

import difflib
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class TrnsimError(Exception):
    """Base of every error trnsim raises on bad input."""

    exit_code = 1


class UnknownNameError(TrnsimError, KeyError):
    """A catalog name, preset, dtype or operation that does not exist."""

    exit_code = 2

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        self.kind, self.name, self.known = kind, name, list(known)
        close = difflib.get_close_matches(str(name), self.known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(self.known)}"
        super().__init__(f"unknown {kind} {name!r}{hint}")

    def __str__(self) -> str:  # KeyError would quote the whole message otherwise
        return self.args[0]


class ConfigError(TrnsimError, ValueError):
    """A setting that is valid on its own but not on this system (LNC 2 on Trn1, say)."""

    exit_code = 2


def user_location(skip_dirs: tuple[str, ...] = ()) -> str | None:
    """`path:line` of the innermost stack frame outside trnsim (the user's kernel or script)."""
    frame = sys._getframe(1)
    inside = (_PACKAGE_DIR,) + tuple(os.path.abspath(d) for d in skip_dirs)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(inside) and not path.startswith("<frozen"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None
