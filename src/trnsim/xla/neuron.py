"""The native `neuron` device, as TorchNeuron gives it: `torch.device("neuron")`, eager ops, torch.compile, DDP.

    import trnsim.xla.torchneuron; trnsim.xla.torchneuron.install()   (the worker of `trnsim torchrun` does it)

PyTorch's PrivateUse1 mechanism, renamed "neuron": a small C++ shim (built once with torch's extension
builder, then cached) registers the device guard and hooks that the autograd engine and torch.accelerator
ask a device for; everything else is Python. A tensor on the device is a `NeuronTensor`, a wrapper whose
values live in a host tensor: every ATen op on it runs on the host and is priced on the simulated
NeuronCore, eagerly one op at a time, as the device runs it without torch.compile.

    torch.compile(model, backend="neuron")   Dynamo -> AOTAutograd; each forward and backward graph is
                                             priced whole (its elementwise chains fused) by the HLO cost
                                             model and run on the host; every new input shape recompiles
                                             (automatic dynamic shapes off; dynamic=True is refused, as
                                             TorchNeuron refuses it); graph breaks are reported with lines
    dist.init_process_group("neuron")        a process group whose collectives reduce the values across
                                             the rank processes (gloo underneath) and are timed on the fabric

Each ATen op becomes the HLO instruction the Neuron compiler would see (`aten_module`), so eager ops,
compiled graphs and torch-xla graphs are priced by one model; an ATen op with no HLO form is counted by
name as unpriced.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import types

from trnsim.errors import TrnsimError
from trnsim.xla import hlo

NAME = "neuron"

_GUARD_CPP = r"""
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
namespace {
using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;
const Device kDev(DeviceType::PrivateUse1, 0);
struct Guard final : public c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::PrivateUse1; }
  Device exchangeDevice(Device) const override { return kDev; }
  Device getDevice() const override { return kDev; }
  void setDevice(Device) const override {}
  void uncheckedSetDevice(Device) const noexcept override {}
  Stream getStream(Device) const noexcept override { return Stream(Stream::DEFAULT, kDev); }
  Stream getNewStream(Device, int) const override { return Stream(Stream::DEFAULT, kDev); }
  Stream exchangeStream(Stream) const noexcept override { return Stream(Stream::DEFAULT, kDev); }
  DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const Stream&, const DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const DeviceIndex) const noexcept override {}
  bool queryStream(const Stream&) const override { return true; }
  void synchronizeStream(const Stream&) const override {}
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);
struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(DeviceIndex) const override { return true; }
  DeviceIndex deviceCount() const override { return 1; }
  DeviceIndex getCurrentDevice() const override { return 0; }
  const at::Generator& getDefaultGenerator(DeviceIndex) const override { return at::detail::getDefaultCPUGenerator(); }
  Device getDeviceFromPtr(void*) const override { return kDev; }
};
struct Register { Register() { at::RegisterPrivateUse1HooksInterface(new Hooks()); } } reg;
}  // namespace
"""


class NeuronDeviceError(TrnsimError):
    """The `neuron` device cannot be set up, or a script asks it for what TorchNeuron refuses."""


# --- ATen ops as HLO instructions ----------------------------------------------------------------------
DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64", "int64": "s64", "int32": "s32",
          "int16": "s16", "int8": "s8", "uint8": "u8", "bool": "pred", "float8_e4m3fn": "f8e4m3fn",
          "float8_e5m2": "f8e5m2"}
FREE = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "alias",
        "detach", "as_strided", "slice", "select", "_reshape_alias", "lift_fresh", "split", "split_with_sizes",
        "chunk", "unbind", "view_as", "expand_as", "flatten", "unflatten", "empty", "empty_like", "empty_strided",
        "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
        "new_zeros", "new_ones", "scalar_tensor", "fill_", "fill", "zero_", "_local_scalar_dense", "lift_fresh_copy",
        "arange", "resize_", "set_", "_has_compatible_shallow_copy_type", "is_same_size", "sym_size", "sym_stride",
        "sym_numel", "sym_storage_offset", "_to_copy", "copy_", "clone", "contiguous"}
# collectives as ops (functional collectives, DTensor's redistribution): the process group times each on the
# fabric as it runs (neuron_dist), so as ops on the core they cost nothing more
COLLECTIVE = {"all_gather_into_tensor", "all_gather_into_tensor_out", "all_gather_into_tensor_coalesced",
              "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_reduce", "all_reduce_coalesced",
              "all_to_all_single", "broadcast", "wait_tensor"}
ELEMENTWISE = {"add": "add", "sub": "subtract", "rsub": "subtract", "mul": "multiply", "div": "divide",
               "neg": "negate", "exp": "exponential", "log": "log", "tanh": "tanh", "sigmoid": "logistic",
               "relu": "maximum", "gelu": "erf", "silu": "logistic", "sqrt": "sqrt", "rsqrt": "rsqrt",
               "pow": "power", "abs": "abs", "where": "select", "threshold_backward": "select",
               "tanh_backward": "multiply", "sigmoid_backward": "multiply", "gelu_backward": "erf",
               "silu_backward": "logistic", "maximum": "maximum", "minimum": "minimum", "clamp": "clamp",
               "clamp_min": "maximum", "clamp_max": "minimum", "eq": "compare", "ne": "compare", "lt": "compare",
               "gt": "compare", "le": "compare", "ge": "compare", "addcmul": "multiply", "addcdiv": "divide",
               "lerp": "multiply", "reciprocal": "divide", "sin": "sine", "cos": "cosine", "erf": "erf",
               "logical_not": "not", "bitwise_not": "not", "sign": "sign", "sgn": "sign", "floor": "floor",
               "ceil": "ceil", "round": "round-nearest-even", "masked_fill": "select", "square": "multiply",
               "exp2": "exponential", "log1p": "log-plus-one", "expm1": "exponential-minus-one",
               "native_dropout": "rng", "bernoulli": "rng", "rand": "rng", "randn": "rng", "normal": "rng",
               "uniform": "rng", "randint": "rng"}
REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std", "prod", "norm", "linalg_vector_norm",
          "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data", "native_layer_norm",
          "native_layer_norm_backward", "mse_loss", "mse_loss_backward", "nll_loss_forward", "nll_loss_backward",
          "cumsum", "argmax", "argmin", "logsumexp", "_fused_rms_norm", "native_batch_norm",
          "native_batch_norm_backward", "any", "all"}
MOVE = {"cat": "concatenate", "stack": "concatenate", "index_select": "gather", "embedding": "gather",
        "gather": "gather", "index": "gather", "embedding_dense_backward": "scatter", "scatter": "scatter",
        "scatter_add": "scatter", "index_put": "scatter", "index_add": "scatter", "constant_pad_nd": "pad",
        "flip": "reverse", "sort": "sort", "topk": "sort", "repeat": "copy", "roll": "copy", "tril": "select",
        "triu": "select", "slice_scatter": "dynamic-update-slice", "select_scatter": "dynamic-update-slice",
        "copy": "copy", "all_gather_copy_in": "copy", "split_with_sizes_copy": "copy", "chunk_cat": "concatenate"}


def _array(t) -> hlo.Array:
    return hlo.Array(DTYPES.get(str(t.dtype).removeprefix("torch."), "f32"), tuple(int(d) for d in t.shape))


def _base(name: str) -> str:
    """`aten::add_.Tensor` / `add_` -> `add` (in-place and out forms price as the op)."""
    name = name.split("::")[-1].split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


class ModuleBuilder:
    """HLO instructions from ATen ops: operands are names of earlier instructions, results are arrays."""

    def __init__(self):
        self.ins: list[hlo.Instruction] = []
        self.unpriced: dict[str, int] = {}
        self.n = 0

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}.{self.n}"

    def parameter(self, t) -> str:
        name = self.fresh("p")
        self.ins.append(hlo.Instruction(name, "parameter", (_array(t),), ()))
        return name

    def op(self, aten: str, operands: list[tuple[str, object]], results: list) -> list[str]:
        """Append the instructions of ATen op `aten` on `operands` ((name, tensor) pairs); returns the names
        that stand for its tensor results."""
        base = _base(aten)
        if base.startswith("_foreach_"):  # one instruction per list element
            k = max(len(results), 1)
            per = max(len(operands) // k, 1) if results else 1
            names = []
            for i, r in enumerate(results):
                names += self.op(base.removeprefix("_foreach_"), operands[i::k][:per] or operands[:1], [r])
            return names
        ops = [o for o in operands if o[1] is not None]
        outs = [r for r in results if r is not None]
        if base in FREE or base in COLLECTIVE or not outs:
            names = []
            for r in outs:  # a view or a fresh buffer: free, as the compiler folds it
                name = self.fresh(base)
                src = ops[:1] if ops and base not in ("empty", "zeros", "ones", "full", "arange") else []
                self.ins.append(hlo.Instruction(name, "bitcast" if src else "broadcast", (_array(r),),
                                                tuple(s for s, _ in src)))
                names.append(name)
            return names
        if base in ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot"):
            return [self._matmul(base, ops, outs[0])]
        opcode = ELEMENTWISE.get(base) or MOVE.get(base) or ("reduce" if base in REDUCE else None)
        if base in ("convolution", "convolution_backward"):
            opcode = "convolution"
        if opcode is None:
            name = f"{aten.split('::')[0] if '::' in aten else 'aten'}.{base}"
            self.unpriced[name] = self.unpriced.get(name, 0) + 1
            return [self._opaque(o) for o in outs]
        if opcode == "convolution":
            return [self._convolution(ops, r) for r in outs]
        first = self.fresh(base)
        self.ins.append(hlo.Instruction(first, opcode, (_array(outs[0]),), tuple(s for s, _ in ops)))
        names = [first]
        for r in outs[1:]:  # further results of the same pass (layer norm's mean and rstd)
            name = self.fresh(base)
            self.ins.append(hlo.Instruction(name, "get-tuple-element", (_array(r),), (first,)))
            names.append(name)
        return names

    def _opaque(self, r) -> str:
        name = self.fresh("unpriced")
        self.ins.append(hlo.Instruction(name, "broadcast", (_array(r),), ()))
        return name

    def _matmul(self, base: str, ops, out) -> str:
        if base in ("addmm", "baddbmm", "addmv"):
            bias, ops = ops[0], ops[1:]
        else:
            bias = None
        (a, ta), (b, tb) = ops[0], ops[1]
        ra, rb = ta.dim(), tb.dim()
        if base == "linear":  # x @ w.T (+ bias)
            bias = ops[2] if len(ops) > 2 else None
            attrs = f"lhs_contracting_dims={{{ra - 1}}}, rhs_contracting_dims={{1}}"
        elif ra >= 3 and rb == ra:
            batch = ",".join(str(d) for d in range(ra - 2))
            attrs = (f"lhs_batch_dims={{{batch}}}, rhs_batch_dims={{{batch}}}, lhs_contracting_dims={{{ra - 1}}}, "
                     f"rhs_contracting_dims={{{rb - 2}}}")
        else:
            attrs = f"lhs_contracting_dims={{{ra - 1}}}, rhs_contracting_dims={{{0 if rb == 1 else rb - 2}}}"
        name = self.fresh("dot")
        self.ins.append(hlo.Instruction(name, "dot", (_array(out),), (a, b), attrs))
        if bias is not None:
            added = self.fresh("add")
            self.ins.append(hlo.Instruction(added, "add", (_array(out),), (name, bias[0])))
            return added
        return name

    def _convolution(self, ops, out) -> str:
        name = self.fresh("conv")
        self.ins.append(hlo.Instruction(name, "convolution", (_array(out),), (ops[0][0], ops[1][0]),
                                        "dim_labels=bf01_oi01->bf01"))
        return name

    def module(self, outputs: list[str], name: str = "main") -> hlo.Module:
        table = {i.name: i for i in self.ins}
        shapes = tuple(table[o].shapes[0] for o in outputs)
        root = hlo.Instruction(self.fresh("tuple"), "tuple", shapes, tuple(outputs), root=True)
        return hlo.Module(name, {name: hlo.Computation(name, True, [*self.ins, root])})


def _tensors(x) -> list:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def eager_module(func, args, kwargs, out) -> tuple[hlo.Module, dict[str, int]]:
    """One eager ATen call as an HLO module: its tensor arguments are parameters, its results the outputs."""
    b = ModuleBuilder()
    operands = [(b.parameter(t), t) for t in _tensors(list(args) + list(kwargs.values()))]
    names = b.op(func.name(), operands, _tensors(out))
    return b.module(names), b.unpriced


def fx_module(gm) -> tuple[hlo.Module, dict[str, int]]:
    """An FX graph of ATen ops (AOTAutograd's forward or backward) as one HLO module."""
    import operator

    import torch

    b = ModuleBuilder()
    env: dict = {}  # node -> name or list of names
    outputs: list[str] = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder":
            env[node] = b.parameter(val) if isinstance(val, torch.Tensor) else None
        elif node.op == "call_function" and node.target is operator.getitem:
            src = env.get(node.args[0])
            env[node] = src[node.args[1]] if isinstance(src, list) and node.args[1] < len(src) else src
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            operands = []
            for a in list(node.args) + list(node.kwargs.values()):
                for n in (a if isinstance(a, (list, tuple)) else [a]):
                    if isinstance(n, torch.fx.Node) and isinstance(env.get(n), str):
                        operands.append((env[n], n.meta.get("val")))
            results = _tensors(val)
            names = b.op(node.target.name(), operands, results)
            env[node] = names if isinstance(val, (list, tuple)) else (names[0] if names else None)
        elif node.op == "output":
            for a in _tensors_nodes(node.args[0]):
                if isinstance(env.get(a), str):
                    outputs.append(env[a])
    return b.module(outputs or [b.ins[-1].name] if b.ins else []), b.unpriced


def _tensors_nodes(x) -> list:
    import torch

    if isinstance(x, torch.fx.Node):
        return [x]
    if isinstance(x, (list, tuple)):
        return [n for v in x for n in _tensors_nodes(v)]
    return []


# --- the meter: what ran on the device, priced -----------------------------------------------------------
class Meter:
    """Prices what runs on the device into a Ledger (rank 0 of `trnsim torchrun`; none elsewhere)."""

    def __init__(self):
        self.ledger = None
        self.eager: dict = {}  # (op, shapes) -> GraphCost
        self.paused = 0  # inside a compiled graph's run: its ops are priced with the graph

    def eager_op(self, func, args, kwargs, out) -> None:
        if self.ledger is None or self.paused:
            return
        key = (func.name(), tuple((tuple(t.shape), t.dtype) for t in _tensors(list(args) + list(kwargs.values()))),
               tuple(tuple(t.shape) for t in _tensors(out)))
        cost = self.eager.get(key)
        if cost is None:
            module, unpriced = eager_module(func, args, kwargs, out)
            cost = self.eager[key] = self.ledger.model.cost(module)
            cost.unpriced.update(unpriced)
        if cost.time_ns or cost.unpriced:
            self.ledger.charge(cost, name=_base(func.name()))

    def graph(self, cost, name: str = "compiled graph") -> None:
        if self.ledger is not None:
            self.ledger.charge(cost, name=name)

    def live_bytes(self) -> float:
        """HBM the device's tensors hold now: each host storage behind a live device tensor, once."""
        import gc

        seen: dict[int, int] = {}
        for o in gc.get_objects():
            if NeuronTensor is not None and type(o) is NeuronTensor and not _is_fake(o.elem):
                try:
                    st = o.elem.untyped_storage()
                    seen[st.data_ptr()] = st.nbytes()
                except RuntimeError:  # a tracing leftover (no storage): holds no device memory
                    continue
        return float(sum(seen.values()))


METER = Meter()


# --- the tensor ----------------------------------------------------------------------------------------
def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) or type(t).__name__ == "FunctionalTensor"


def _tensor_class():
    import torch
    import torch._dynamo
    from torch.utils._pytree import tree_map

    class NeuronTensor(torch.Tensor):
        """A tensor on the simulated `neuron` device; its values live in the host tensor `elem`."""

        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(
                cls, elem.shape, strides=elem.stride(), storage_offset=elem.storage_offset(), dtype=elem.dtype,
                device=torch.device(NAME, 0), requires_grad=elem.requires_grad, layout=elem.layout)

        def __init__(self, elem):
            self.elem = elem

        def __repr__(self, **kwargs):
            return f"{self.elem!r}".replace("tensor(", "tensor(device='neuron:0', ", 1)

        def __tensor_flatten__(self):
            return ["elem"], None

        @staticmethod
        def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
            return NeuronTensor(inner["elem"])

        __torch_function__ = torch._C._disabled_torch_function_impl

        @classmethod
        @torch._dynamo.disable  # called by the dispatcher, never the user's code to trace
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            leaves = False
            dev = kwargs.get("device")
            if dev is not None:
                if torch.device(dev).type == NAME:
                    kwargs["device"] = torch.device("cpu")
                else:
                    leaves = True  # .cpu(), .to("cpu"): the result is a host tensor
            def unwrap(t):
                return t.elem if isinstance(t, NeuronTensor) else t
            uargs, ukwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs)
            out = func(*uargs, **ukwargs)
            if not any(_is_fake(t) for t in _tensors(list(uargs))):
                METER.eager_op(func, uargs, ukwargs, out)
            if leaves:
                return out
            if not func._schema.returns:  # writes its `out` tensors (FSDP2's copy ops), returns nothing
                return None
            if func._schema.name.endswith("_") or "out" in kwargs:
                return args[0]  # in place: the same device tensor, its host values updated
            return tree_map(lambda t: NeuronTensor(t) if isinstance(t, torch.Tensor) else t, out)

    return NeuronTensor


NeuronTensor = None


def wrap(t):
    """A host tensor's values on the device."""
    return NeuronTensor(t)


# --- installation --------------------------------------------------------------------------------------
def _load_shim() -> None:
    import logging

    import torch

    log = logging.getLogger("torch.utils.cpp_extension")
    level, log.level = log.level, logging.ERROR  # its note that there is no CUDA concerns a build we do not do
    import torch.utils.cpp_extension as ext

    root = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "trnsim",
                        f"neuron-shim-{torch.__version__}-{hashlib.sha1(_GUARD_CPP.encode()).hexdigest()[:8]}")
    os.makedirs(root, exist_ok=True)
    src = os.path.join(root, "neuron_shim.cpp")
    if not os.path.exists(src):
        with open(src, "w") as f:
            f.write(_GUARD_CPP)
    try:
        ext.load("trnsim_neuron_shim", [src], is_python_module=False, build_directory=root, verbose=False)
    except Exception as e:  # noqa: BLE001 - a compiler problem, said in words
        raise NeuronDeviceError(f"the neuron device needs a C++ compiler to build its device shim once "
                                f"(torch.utils.cpp_extension, into {root}): {e}") from None
    finally:
        log.level = level


def _device_module():
    import torch

    mod = types.ModuleType(f"torch.{NAME}")
    mod.is_available = lambda: True
    mod.is_initialized = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod.set_device = lambda device: None
    mod.synchronize = lambda device=None: None
    mod._is_in_bad_fork = lambda: False
    mod.manual_seed = mod.manual_seed_all = lambda seed: None  # values come from the host generator
    mod.get_amp_supported_dtype = lambda: [torch.bfloat16, torch.float16]
    mod.is_bf16_supported = lambda: True
    # one stream: values are computed in order on the host (FSDP2 asks for its side streams and events)
    mod.Stream = lambda device=None, priority=0, **kwargs: torch.Stream(device=f"{NAME}:0", priority=priority)
    mod.Event = lambda *args, **kwargs: torch.Event(device=f"{NAME}:0")
    mod.current_stream = mod.default_stream = lambda device=None: torch.Stream(device=f"{NAME}:0")
    mod.stream = lambda stream=None: contextlib.nullcontext()
    return mod


_installed = False
# what torch.autocast(device_type="neuron") runs in its lower precision, as on CUDA: matmuls and convolutions
AUTOCAST_LOWER = ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "conv1d", "conv2d",
                  "conv3d")


def _autocast():
    """torch.autocast(device_type="neuron"): matmuls and convolutions cast to the autocast dtype, the rest
    passes through (PyTorch's AutocastPrivateUse1 key)."""
    import torch

    key = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
    rest = torch.library.Library("_", "IMPL")
    rest.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lower = torch.library.Library("aten", "IMPL")

    def lowered(op):
        def run(*args, **kwargs):
            dt = torch.get_autocast_dtype(NAME)

            def cast(t):
                return t.to(dt) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
            with torch._C._ExcludeDispatchKeyGuard(key):
                return op(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})
        return run

    for name in AUTOCAST_LOWER:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            lower.impl(name if overload == "default" else f"{name}.{overload}", lowered(getattr(packet, overload)),
                       "AutocastPrivateUse1")
    return rest, lower


def install() -> None:
    """Make `neuron` a PyTorch device in this process (idempotent)."""
    global _installed, NeuronTensor
    if _installed:
        return
    import torch
    import torch._dynamo

    _load_shim()
    torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, _device_module())
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=False)
    NeuronTensor = _tensor_class()

    def factory(fn):
        @torch._dynamo.disable  # runs from the dispatcher, also under a compiled frame: not the user's code
        def make(*args, **kwargs):
            kwargs["device"] = torch.device("cpu")
            kwargs.pop("pin_memory", None)
            return NeuronTensor(fn(*args, **kwargs))
        return make

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", factory(torch.empty), "PrivateUse1")
    lib.impl("empty_strided", factory(torch.empty_strided), "PrivateUse1")
    # an op with no autograd formula (FSDP2's copy-in and split ops) runs as on the host: CPU has this
    # fallback built in, a PrivateUse1 device has to ask for it
    untracked = torch.library.Library("_", "IMPL")
    untracked.fallback(torch.library.fallthrough_kernel, "AutogradPrivateUse1")
    install.libs = (lib, untracked, _autocast())  # the registrations live as long as the library objects
    _installed = True


def host(t):
    """The host tensor holding a device tensor's values (the tensor itself when it is on the host)."""
    return t.elem if NeuronTensor is not None and isinstance(t, NeuronTensor) else t


def user_line() -> str:
    """`file:line` of the innermost frame of the user's script."""
    import threading

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)
    if threading.current_thread() is not threading.main_thread():  # autograd's backward thread: the script waits
        f = sys._current_frames().get(threading.main_thread().ident, f)
    while f is not None:
        path = f.f_code.co_filename
        ap = os.path.abspath(path)
        if not (path.startswith("<") or ap.startswith(here) or "site-packages" in ap or "/torch/" in ap):
            return f"{path}:{f.f_lineno}"
        f = f.f_back
    return "?"
