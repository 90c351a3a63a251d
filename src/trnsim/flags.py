"""Every TRNSIM_* environment switch, in one list with what each does; modules read them through here.

A flag is read each time it is asked for, never cached at import: the CLI's global options set some of them
for the worker processes it starts, and tests set them for one run. Standard library only, so any layer may
read a flag.
"""
from __future__ import annotations

import os


class Flag:
    """One environment switch: its variable, the value an unset (or empty) variable means, and its doc line."""

    def __init__(self, name: str, default: str | None, doc: str):
        self.name, self.default, self.doc = name, default, doc

    def __repr__(self):
        return f"Flag({self.name})"

    def raw(self) -> str | None:
        """The variable as set, or None."""
        return os.environ.get(self.name)

    def value(self) -> str | None:
        """The variable, or the default where it is unset or empty."""
        raw = os.environ.get(self.name)
        return self.default if raw is None or raw == "" else raw

    def on(self) -> bool:
        """A switch whose value 0 turns it off."""
        return self.value() != "0"

    def set(self, value: str) -> None:
        """Set for this process and the processes it starts."""
        os.environ[self.name] = value


FAST = Flag("TRNSIM_FAST", "1", "0 turns the speed layer off (deferred loads, conversion caches, memos, compiled "
                                "modules); no value or instruction changes")
STRICT = Flag("TRNSIM_STRICT", "1", "0 downgrades the rules the hardware may break without an error to warnings "
                                    "with the hardware's values; 1 set explicitly also refuses loop-carried "
                                    "dependencies")
RACE_CHECK = Flag("TRNSIM_RACE_CHECK", "auto", "auto, off, warn, error or order: which affine loops the race "
                                               "detector checks and what it does on a race (--race-check)")
NKI_VERSION = Flag("TRNSIM_NKI_VERSION", "0.7", "the NKI version kernels target, 0.6 or 0.7 (--nki-version)")
NEURON_SDK = Flag("TRNSIM_NEURON_SDK", "2025", "the Neuron SDK whose compiler and runtime build the DMA programs, by "
                                               "release year: 2025 (current) or 2024 (the 2024 tutorials' figures); "
                                               "it sets the DMA descriptor and queue costs (--neuron-sdk)")
HARDWARE = Flag("TRNSIM_HARDWARE", None, "a what-if chip's TOML file every process runs on (--hardware)")
UNWRITTEN_OUTPUT = Flag("TRNSIM_UNWRITTEN_OUTPUT", "warn", "warn or error: what a kernel output with bytes the "
                                                           "kernel never wrote gets")
MAX_INSTRUCTIONS = Flag("TRNSIM_MAX_INSTRUCTIONS", None, "instructions one launch may issue before it is stopped")
MAX_MEMORY_MB = Flag("TRNSIM_MAX_MEMORY_MB", None, "MiB of host memory one launch may hold before it is stopped")
PUBLISH = Flag("TRNSIM_PUBLISH", "1", "0 stops a process publishing its live state for trnsim top, monitor and ls")
RUNTIME_DIR = Flag("TRNSIM_RUNTIME_DIR", None, "the folder of the live-state files (else $XDG_RUNTIME_DIR/trnsim, "
                                               "else /tmp/trnsim-<uid>)")
TRACEBACK = Flag("TRNSIM_TRACEBACK", None, "any value: the CLI shows the traceback of an error instead of its "
                                           "one-line message")
XLA = Flag("TRNSIM_XLA", None, "set by trnsim torchrun for each worker: JSON with the simulated instance, its "
                               "world and the worker's rank")
JAX = Flag("TRNSIM_JAX", None, "set by trnsim jax for the script's process: JSON with the simulated instance, LNC, "
                               "devices, report path and script")

FLAGS = {f.name: f for f in (FAST, STRICT, RACE_CHECK, NKI_VERSION, NEURON_SDK, HARDWARE, UNWRITTEN_OUTPUT, MAX_INSTRUCTIONS,
                             MAX_MEMORY_MB, PUBLISH, RUNTIME_DIR, TRACEBACK, XLA, JAX)}
