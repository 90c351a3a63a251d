"""Custom C++ operators on the GpSimd engine, as the Neuron custom-operator guide describes them.

An operator is a kernel function (run on the GpSimd cores) and a shape function (run while the graph
compiles), written in C++ against the Neuron port of the torch tensor library and registered with
NEURON_LIBRARY. trnsim ships that library's headers (include/), builds the sources with the host's compiler
(build.py), runs the kernel on numpy arrays with the runtime's rules enforced (library.py) and times it from
what its accessors moved (cost.py). The framework side, `torch_neuronx.xla_impl.custom_op`, is in
trnsim.nki.neuronx.

    from trnsim.core import customop
    lib = customop.load("my_ops", ["kernel.cpp"], ["shape.cpp"], target="trn1")
    out, ns = customop.run(lib, "tensor_negate", [x])
"""
from __future__ import annotations

import numpy as np

from trnsim.core.customop import build as _build
from trnsim.core.customop import cost
from trnsim.core.customop.errors import (CustomOpBuildError, CustomOpCompileError, CustomOpError,
                                         CustomOpPlatformError, CustomOpRuleError)
from trnsim.core.customop.library import Call, CustomOp, Library
from trnsim.specs import neuroncore
from trnsim.specs.customop import customop as spec_for


def load(name: str, compute_srcs, shape_srcs, build_directory: str | None = None, multicore: bool = False,
         extra_cflags=(), extra_include_paths=(), verbose: bool = False, target: str = "trn1") -> Library:
    """Build (or reuse) `lib<name>.so` for `target` and load it."""
    spec = spec_for(target)
    path = _build.build(name, compute_srcs, shape_srcs, build_directory, multicore, extra_cflags, extra_include_paths,
                        verbose, spec.max_stack_bytes)
    return Library(path, spec)


def load_library(path: str, target: str = "trn1") -> Library:
    """Load a library built before (by `load`, here or in another process)."""
    return Library(path, spec_for(target))


def run(lib: Library, op: str, args: list, target: str = "trn1") -> tuple[np.ndarray, float]:
    """The operator's output and its time in ns on the GpSimd engine of `target`."""
    out, calls = lib.run(op, args)
    return out, cost.time_ns(calls, lib.spec, neuroncore(target).clocks["gpsimd"])


Op = CustomOp  # the name earlier releases exported
__all__ = ["load", "load_library", "run", "Library", "CustomOp", "Op", "Call", "cost", "CustomOpError", "CustomOpBuildError",
           "CustomOpCompileError", "CustomOpRuleError", "CustomOpPlatformError"]
