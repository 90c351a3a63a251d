"""Named errors shared by every layer, and where in the user's code they happened.

Every error trnsim raises on bad input is a TrnsimError: its message says which rule was broken,
with the numbers involved, and (where the input came from a user's file) that file and line.
The CLI prints the message and exits with `exit_code`, never a traceback.
"""
from __future__ import annotations

import difflib
import os
import site
import stat
import sys
import sysconfig

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Python's own library and installed packages (click, pytest, ...) are not the user's code either, wherever
# they are installed: this environment, the user's site, or a site directory another .pth file added
_LIBRARY_DIRS = tuple({os.path.abspath(d) + os.sep for d in [
    *(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib", "scripts")),
    *site.getsitepackages(), site.getusersitepackages(),
    *(p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")),
]})


class TrnsimError(Exception):
    """Base of every error trnsim raises on bad input."""

    exit_code = 1


class UnknownNameError(TrnsimError, KeyError):
    """A catalog name, preset, dtype or operation that does not exist."""

    exit_code = 2

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...], hint: str | None = None):
        self.kind, self.name, self.known = kind, name, list(known)
        close = difflib.get_close_matches(str(name).lower(), [k.lower() for k in self.known], n=3, cutoff=0.5)
        close = [next(k for k in self.known if k.lower() == c) for c in close]
        if hint:
            hint = f"; {hint}"
        else:
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(self.known)}"
        super().__init__(f"unknown {kind} {name!r}{hint}")

    def __str__(self) -> str:  # KeyError would quote the whole message otherwise
        return self.args[0]


class ConfigError(TrnsimError, ValueError):
    """A setting that is valid on its own but not on this system (LNC 2 on Trn1, say)."""

    exit_code = 2


class OptionError(ConfigError):
    """A command-line option whose value cannot be used; the message starts with the option's name."""

    def __init__(self, option: str, problem: str):
        self.option = option
        super().__init__(f"{option}: {problem}")


class UserCodeError(TrnsimError):
    """The user's script raised (or failed to compile): its exception, message and file:line, no traceback."""

    def __init__(self, exc: BaseException, location: str | None, raised: str | None = None):
        self.exc = exc
        text = f"{type(exc).__name__}: {exc.msg if isinstance(exc, SyntaxError) else exc}"
        text += f" at {location}" if location else ""
        super().__init__(text + (f" (raised in {raised})" if raised and raised != location else ""))

    @classmethod
    def from_exception(cls, exc: BaseException, path: str) -> "UserCodeError":
        """Locate `exc` in the user's file `path` (a syntax error's own line, else the innermost frame there)."""
        if isinstance(exc, SyntaxError) and exc.filename:
            return cls(exc, f"{exc.filename}:{exc.lineno}")
        target, loc, raised, tb = os.path.abspath(path), None, None, exc.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            raised = f"{name}:{tb.tb_lineno}"
            if os.path.abspath(name) == target or not _is_library(name):
                loc = raised
            tb = tb.tb_next
        return cls(exc, loc, raised)


def _is_library(path: str) -> bool:
    """Whether `path` belongs to trnsim, Python's library or an installed package rather than the user."""
    return path.startswith("<") or os.path.abspath(path).startswith((_PACKAGE_DIR,) + _LIBRARY_DIRS)


def user_location(skip_dirs: tuple[str, ...] = ()) -> str | None:
    """`path:line` of the innermost stack frame outside trnsim (the user's kernel or script)."""
    frame = sys._getframe(1)
    inside = tuple(os.path.abspath(d) for d in skip_dirs)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not _is_library(path) and not path.startswith(inside):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


MAX_INPUT_BYTES = 1 << 20  # a model, hardware or profile file larger than this is not one a person wrote


def read_user_file(path, what: str, error: type[TrnsimError], limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the user's file `path`, read only if it is a regular file of at most `limit` bytes:
    a FIFO would hang the read and /dev/zero would never end it. Anything else raises `error` naming the
    file and the rule."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # non-blocking: opening a FIFO does not wait for a writer
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
            raise error(f"{path}: {what} must be a regular file, and this is {kind}")
        data = os.read(fd, limit + 1) if st.st_size <= limit else b""
        if st.st_size > limit or len(data) > limit:
            raise error(f"{path}: {what} of {max(st.st_size, len(data)):,} bytes; at most {limit:,} are read")
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise error(f"{path}:{line}: {what} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") \
            from None
