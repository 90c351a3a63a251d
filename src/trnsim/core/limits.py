"""Bounds on one kernel launch: how many instructions it may issue and how much memory it may take.

A kernel whose loop never ends (`while True: nisa.tensor_scalar(...)`) would otherwise run until the
machine runs out of memory, since the core keeps every instruction it issues. Both bounds are generous,
set per launch with `@nki.jit(max_instructions=..., max_memory_mb=...)` or the environment variables
TRNSIM_MAX_INSTRUCTIONS and TRNSIM_MAX_MEMORY_MB, and stop the launch with a named error that names the
loop the last instruction was issued from. The default instruction bound holds for runs with values only:
a timing-only run keeps no values, so the largest published kernels (a 32k-sequence flash attention
backward issues millions of instructions) time in full, and the memory bound alone stops a runaway loop.

The memory budget counts what the run accumulates (instruction records, caches), not the bytes of the core's
memories: SBUF and PSUM have a fixed size, and the HBM tensors are the kernel's real inputs and outputs (a
2 GiB output is 2 GiB on the device too), bounded by the HBM capacity rule.
"""
from __future__ import annotations

import ast
import functools
import os
import resource

from trnsim import flags
from trnsim.core.errors import KernelError
from trnsim.errors import ConfigError

DEFAULT_INSTRUCTIONS = 300_000  # 30 times what a 4096^3 tiled bf16 matmul issues
DEFAULT_MEMORY_MB = 4096  # growth of this process during the launch
_CHECK_EVERY = 1 << 14  # instructions between two memory readings


class BudgetError(KernelError):
    """A launch issued more instructions, or took more memory, than its budget allows."""


class Budget:
    """What one launch may still spend; every core of an LNC 2 launch charges the same budget."""

    def __init__(self, instructions: int | None = None, memory_mb: int | None = None):
        self.max_instructions = int(_setting(instructions, flags.MAX_INSTRUCTIONS, DEFAULT_INSTRUCTIONS))
        self.chosen = instructions is not None or bool(flags.MAX_INSTRUCTIONS.raw())
        self.max_bytes = int(_setting(memory_mb, flags.MAX_MEMORY_MB, DEFAULT_MEMORY_MB)) << 20
        self.issued = 0
        self.rss0 = _rss()
        self.held: list = []  # memories whose tensors' bytes are not charged (core/memory.HBM)

    def shapes_only(self) -> None:
        """A timing-only launch: no default instruction bound (one the user set still holds)."""
        if not self.chosen:
            self.max_instructions = None

    def exempt(self, memory) -> None:
        """Leave the host bytes of `memory`'s live tensors (its `host_bytes()`) out of the memory reading."""
        if not any(m is memory for m in self.held):
            self.held.append(memory)

    def grown(self) -> int:
        """Bytes this process grew by since the launch began, less what the exempt memories hold."""
        return _rss() - self.rss0 - sum(m.host_bytes() for m in self.held)

    def at_once(self, count: int) -> int:
        """Count at once the first of `count` instructions that reach no bound and no memory reading, and say how
        many: the caller charges the next one alone, at its own line (`charge`), and the rest at once again."""
        n = min(count, _CHECK_EVERY - 1 - self.issued % _CHECK_EVERY)
        if self.max_instructions is not None:
            n = max(min(n, self.max_instructions - self.issued), 0)
        self.issued += n
        return n

    def charge(self, location: str) -> None:
        """Count one instruction issued at `location` (the user's file:line)."""
        self.issued += 1
        if self.max_instructions is not None and self.issued > self.max_instructions:
            note, at = _where(location)
            raise BudgetError(f"the launch issued more than {self.max_instructions:,} instructions ({flags.MAX_INSTRUCTIONS.name}"
                              f" or @nki.jit(max_instructions=N) raises the budget){note}", at)
        if not self.issued % _CHECK_EVERY:
            grown = self.grown()
            if grown > self.max_bytes:
                note, at = _where(location)
                raise BudgetError(f"the launch took {grown >> 20} MiB of memory after {self.issued:,} instructions, "
                                  f"over its {self.max_bytes >> 20} MiB budget ({flags.MAX_MEMORY_MB.name} or "
                                  f"@nki.jit(max_memory_mb=N) raises it){note}", at)


def _setting(given, flag: flags.Flag, default: int):
    if given is not None:
        return given
    raw = flag.raw()
    if raw is None or raw == "":
        return default
    if not raw.isdigit():
        raise ConfigError(f"{flag.name}={raw!r}: expected a whole number")
    return int(raw)


def _where(location: str) -> tuple[str, str]:
    """What to say about where the launch was (the enclosing loop, if any) and the file:line to report."""
    loop = loop_line(location)
    return (f"; the last instruction came from {location}, in the loop", loop) if loop else ("", location)


def loop_line(location: str) -> str | None:
    """`path:line` of the innermost `for`/`while` around the source line `location`, if any."""
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return None
    found = _loops(path)
    inner = None
    for start, end in found:
        if start <= int(line) <= end and (inner is None or start >= inner):
            inner = start
    return f"{path}:{inner}" if inner is not None else None


@functools.cache
def _loops(path: str) -> tuple[tuple[int, int], ...]:
    """(first line, last line) of every loop in a source file; none if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While)))


def _rss() -> int:
    """Resident memory of this process in bytes (Linux /proc; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
