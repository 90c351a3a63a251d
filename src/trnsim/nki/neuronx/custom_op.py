"""`torch_neuronx.xla_impl.custom_op`: build a custom C++ operator library and call it as `torch.ops.ns.op`.

    custom_op.load(name="relu", compute_srcs=["relu.cpp"], shape_srcs=["shape.cpp"], build_directory=".")
    y = torch.ops.my_ops.relu_forward(x)           # x on the XLA device

The operator runs where torch-neuronx runs it, on the XLA device: its inputs are computed (the graph so far
executes), the user's kernel function runs on them on the host with the GpSimd runtime's rules, and its
output returns to the device. Under `trnsim torchrun` its GpSimd time is charged to the step and reported
apart from the graphs' engines. One library per process, as one per model on the device; Trn1/Inf2 only.
"""
from __future__ import annotations

import json

import numpy as np

from trnsim import flags
from trnsim.core import customop
from trnsim.core.customop import CustomOpBuildError, CustomOpError, CustomOpPlatformError
from trnsim.errors import user_location

_KIND_SCHEMA = {"0": "Tensor", "1": "Scalar", "2": "float", "3": "int"}
_loaded: dict = {}  # "lib": the one Library; "torch": its torch.library.Library (kept alive)
calls: list[dict] = []  # every call of this process: op, time_ns, cores (for scripts and tests)
on_call = None  # (op name, GpSimd ns) -> None: set by the framework path to charge each call to its step


def target() -> str:
    """The NKI target of the simulated instance (`trnsim torchrun --instance`), else trn1."""
    cfg = flags.XLA.raw()
    if cfg:
        from trnsim import specs

        return specs.system(json.loads(cfg)["instance"]).chip.core.target
    return "trn1"


def load(name, compute_srcs, shape_srcs, build_directory=None, multicore=False, verbose=False, extra_cflags=None,
         extra_include_paths=None):
    """Compile `lib<name>.so` from the kernel (compute) and shape sources and register its operators."""
    lib = _located(customop.load, name, compute_srcs, shape_srcs, build_directory, multicore, extra_cflags or (),
                   extra_include_paths or (), verbose, target())
    _register(lib)


def load_library(path):
    """Load and register a library built before by `load` (in this process or another)."""
    _register(_located(customop.load_library, path, target()))


def _located(fn, *args):
    """`fn(*args)`, its errors placed at the user's line that called."""
    try:
        return fn(*args)
    except (CustomOpError, CustomOpPlatformError) as e:
        where = user_location()
        if where:
            e.args = (f"{where}: {e}",)
        raise


def _register(lib: customop.Library) -> None:
    import torch

    have = _loaded.get("lib")
    if have is not None:
        if have.namespace == lib.namespace and have.path == lib.path:
            return
        raise CustomOpBuildError(f"{user_location() or 'custom_op'}: a model has one custom-op library; "
                                 f"{have.namespace!r} ({have.path}) is loaded, so {lib.namespace!r} ({lib.path}) cannot be")
    reg = torch.library.Library(lib.namespace, "DEF")
    for op in lib.ops.values():
        params = ", ".join(f"{_KIND_SCHEMA[k]} a{i}" for i, k in enumerate(op.kinds))
        reg.define(f"{op.name}({params}) -> Tensor")
        reg.impl(op.name, _kernel(lib, op.name), "XLA")
        if hasattr(torch.utils, "backend_registration") and torch._C._get_privateuse1_backend_name() == "neuron":
            reg.impl(op.name, _kernel(lib, op.name), "PrivateUse1")
    _loaded.update(lib=lib, torch=reg)


def _kernel(lib: customop.Library, op: str):
    def run(*args):
        import torch

        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        host = [_to_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]
        out, ns = _located(customop.run, lib, op, host, target())
        name = f"{lib.namespace}::{op}"
        calls.append({"op": name, "time_ns": ns, "cores": lib.cores})
        _charge(name, ns)
        return _to_torch(out).to(device)

    run.__name__ = op
    return run


def _charge(name: str, ns: float) -> None:
    """Charge the call to whoever keeps the steps (`trnsim torchrun`'s rank 0 sets `on_call`)."""
    if on_call is not None:
        on_call(name, ns)


def _to_numpy(t) -> np.ndarray:
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _to_torch(a: np.ndarray):
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a)
