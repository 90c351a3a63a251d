"""A built custom-operator library, loaded and called on numpy arrays as the GpSimd engine would run it.

    lib = Library("build/librelu.so")
    out, calls = lib.run("relu_forward", [x])      # the kernel function on every core it runs on
    lib.shape("relu_forward", [x])                 # what the shape function says: (dtype, sizes)

The rules of the runtime are checked here and in the C++ library (include/trnsim/): the dtypes and sizes of
tensors crossing the boundary, the number of functions of a library, the kinds of parameters. A multicore
library runs its kernel once per GpSimd core, in core order, each with its own 16 KiB TCM pool.
"""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass

import numpy as np

from trnsim import numerics
from trnsim.core.customop.errors import CustomOpBuildError, CustomOpRuleError
from trnsim.specs.customop import CustomOpSpec

# torch's ScalarType numbers of the dtypes the Neuron tensor library has
_CODES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 5, "float32": 6, "bfloat16": 15}
_DTYPES = {v: k for k, v in _CODES.items()}
_KINDS = {"0": "Tensor", "1": "Scalar", "2": "double", "3": "int64_t"}
STATS = ("accessor_bytes", "accessor_elements", "stream_bytes", "slow_stream_bytes", "slow_stream_elements",
         "tcm_bytes", "tcm_copies", "library_bytes")


class _Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("sizes", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p), ("d", ctypes.c_double),
                ("i", ctypes.c_int64)]


class _Out(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32), ("sizes", ctypes.c_int64 * 16),
                ("data", ctypes.c_void_p), ("dst_used", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("stats", ctypes.c_uint64 * 8)]


@dataclass(frozen=True)
class CustomOp:
    index: int  # its place in the library's registry
    name: str
    kernel: str
    kinds: str  # one digit per parameter: 0 Tensor, 1 Scalar, 2 double, 3 int64_t

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(_KINDS[k] for k in self.kinds)})"


@dataclass(frozen=True)
class Call:
    """What one GpSimd core moved during one kernel call (the counts of include/trnsim/customop.h)."""

    cpu_id: int
    accessor_bytes: int
    accessor_elements: int
    stream_bytes: int
    slow_stream_bytes: int
    slow_stream_elements: int
    tcm_bytes: int
    tcm_copies: int
    library_bytes: int


class Library:
    """One `lib<name>.so` built by trnsim.core.customop.build, checked against the runtime's rules."""

    def __init__(self, path: str, spec: CustomOpSpec):
        path = os.path.abspath(os.fspath(path))
        if not os.path.isfile(path):
            raise CustomOpBuildError(f"custom-op library {path}: no such file")
        try:
            self._dll = ctypes.CDLL(path)
            registry = self._dll.trnsim_customop_registry
        except (OSError, AttributeError) as e:
            raise CustomOpBuildError(f"{path} is not a custom-op library built by custom_op.load ({e})") from None
        registry.restype = ctypes.c_char_p
        info = json.loads(registry().decode())
        self.path, self.spec = path, spec
        self.multicore = bool(info["multicore"])
        if len(info["libraries"]) != 1:
            raise CustomOpBuildError(f"{path}: {len(info['libraries'])} NEURON_LIBRARY blocks "
                                     f"({', '.join(info['libraries']) or 'none'}); a library has exactly one")
        self.namespace = info["libraries"][0]
        kernels = {k["name"]: k["args"] for k in info["kernels"]}
        self.ops: dict[str, CustomOp] = {}
        for i, o in enumerate(info["ops"]):
            if o["name"] in self.ops:
                raise CustomOpBuildError(f"{path}: operator {o['name']!r} is defined twice in NEURON_LIBRARY")
            if o["kernel"] not in kernels:
                raise CustomOpBuildError(f"{path}: the kernel function {o['kernel']!r} of {o['name']!r} is not defined")
            if kernels[o["kernel"]] != o["args"]:
                raise CustomOpBuildError(
                    f"operator {o['name']!r}: its shape function takes ({_kinds(o['args'])}) but its kernel function "
                    f"{o['kernel']!r} takes ({_kinds(kernels[o['kernel']])}); both have the operator's parameters")
            self.ops[o["name"]] = CustomOp(i, o["name"], o["kernel"], o["args"])
        if len(self.ops) > spec.max_functions:
            raise CustomOpBuildError(f"library {self.namespace!r} registers {len(self.ops)} functions; a custom-op "
                                     f"library may have at most {spec.max_functions}")
        self._call = self._dll.trnsim_customop_call
        self._call.restype = ctypes.c_int
        self._call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.POINTER(_Arg), ctypes.POINTER(_Out), ctypes.c_char_p, ctypes.c_int]

    @property
    def cores(self) -> int:
        return self.spec.gpsimd_cores if self.multicore else 1

    def shape(self, op: str, args: list) -> tuple[str, tuple[int, ...]]:
        """The output's dtype and sizes, from the operator's shape function."""
        o = self._op(op)
        packed, keep = self._pack(o, args)
        out = _Out()
        self._invoke(o, True, 0, 1, packed, out)
        dtype = _DTYPES.get(out.dtype)
        sizes = tuple(out.sizes[i] for i in range(out.ndim))
        self._check_tensor(f"the output of {op}", dtype, sizes)
        return dtype, sizes

    def run(self, op: str, args: list) -> tuple[np.ndarray, list[Call]]:
        """The output and each core's counts: the kernel function run on its inputs."""
        o = self._op(op)
        dtype, sizes = self.shape(op, args)
        result = np.empty(sizes, dtype=numerics.dtype(dtype).np)
        result.view(np.uint8)[...] = 0xFF  # uninitialised on the device: all ones (NaN) shows an unwritten element
        packed, keep = self._pack(o, args)
        calls = []
        for cpu in range(self.cores):
            out = _Out()
            out.dtype, out.ndim = _CODES[dtype], len(sizes)
            for i, s in enumerate(sizes):
                out.sizes[i] = s
            out.data = result.ctypes.data
            self._invoke(o, False, cpu, self.cores, packed, out)
            if self.multicore and not out.dst_used:
                raise CustomOpRuleError("multicore output", f"{op}: a multicore operator writes its output through "
                                        f"get_dst_tensor() (each core its part); core {cpu} returned a tensor instead")
            calls.append(Call(cpu, *[int(out.stats[i]) for i in range(len(STATS))]))
        return result, calls

    # --- internals -----------------------------------------------------------------------------------
    def _op(self, name: str) -> CustomOp:
        if name not in self.ops:
            raise CustomOpBuildError(f"library {self.namespace!r} has no operator {name!r}; it has "
                                     f"{', '.join(self.ops) or 'none'}")
        return self.ops[name]

    def _check_tensor(self, what: str, dtype: str | None, sizes: tuple[int, ...]) -> None:
        if dtype not in self.spec.dtypes:
            raise CustomOpRuleError("dtype", f"{what} is {dtype or 'of an unknown dtype'}; custom operators take "
                                    f"{', '.join(self.spec.dtypes)} tensors")
        if not any(len(sizes) <= dims and all(s <= most for s in sizes) for dims, most in self.spec.tensor_limits):
            forms = " or ".join(f"up to {d} dimensions of at most {m}" for d, m in self.spec.tensor_limits)
            raise CustomOpRuleError("tensor size", f"{what} has sizes {list(sizes)}; a custom operator's tensors have "
                                    f"{forms}")

    def _pack(self, o: CustomOp, args: list):
        if len(args) != len(o.kinds):
            raise CustomOpRuleError("arguments", f"{o.signature} takes {len(o.kinds)} arguments; {len(args)} given")
        packed = (_Arg * max(len(args), 1))()
        keep = []
        for i, (kind, a) in enumerate(zip(o.kinds, args)):
            p = packed[i]
            p.kind = int(kind)
            if kind == "0":
                if not isinstance(a, np.ndarray):
                    raise CustomOpRuleError("arguments", f"{o.signature}: argument {i} is a tensor; got "
                                            f"{type(a).__name__}")
                name = a.dtype.name
                self._check_tensor(f"argument {i} of {o.name}", name, a.shape)
                a = np.ascontiguousarray(a).copy()  # the kernel sees its own copy, as the device sees HBM
                sizes = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
                keep += [a, sizes]
                p.dtype, p.ndim, p.sizes, p.data = _CODES[name], a.ndim, sizes, a.ctypes.data
            elif kind == "3":
                if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                    raise CustomOpRuleError("arguments", f"{o.signature}: argument {i} is an int64_t; got {a!r}")
                p.i = int(a)
            else:
                if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)):
                    raise CustomOpRuleError("arguments", f"{o.signature}: argument {i} is a number; got {a!r}")
                p.d = float(a)  # Scalars reach the device as double, the only scalar dtype it takes
        return packed, keep

    def _invoke(self, o: CustomOp, shape: bool, cpu: int, cores: int, packed, out: _Out) -> None:
        err = ctypes.create_string_buffer(4096)
        if self._call(o.index, int(shape), cpu, cores, len(o.kinds), packed, ctypes.byref(out),
                      err, len(err)):
            rule, _, message = err.value.decode(errors="replace").partition("\x1f")
            where = "shape function" if shape else f"kernel function {o.kernel!r}" + (f" on GpSimd core {cpu}" if cores > 1 else "")
            raise CustomOpRuleError(rule, f"{o.name} ({where}): {message}")


def _kinds(text: str) -> str:
    return ", ".join(_KINDS[k] for k in text)
