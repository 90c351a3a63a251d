"""`torch.compile(backend="neuron")`: Dynamo's graphs, through AOTAutograd, priced whole and run on the host.

Each forward and backward graph AOTAutograd hands over (ATen ops on the host tensors inside the device's
tensors) is one compilation: priced once as an HLO module by trnsim.xla.cost (so its elementwise chains
fuse as the compiler fuses them), charged at every run, and executed by FX on the host. TorchNeuron
compiles static shapes only: automatic dynamic shapes are turned off, so every new input shape is a new
compilation with its cause, and `dynamic=True` is refused. Graph breaks (Dynamo's own record of them)
are reported with their user lines.

NEURON_USE_EAGER_DEBUG_MODE=1 runs the compiled graphs op by op, as the debug mode does on the device: nothing
is compiled, each ATen op is priced as an eager op (no fusion), so the step shows what the graph's ops cost
one at a time.
"""
from __future__ import annotations

import hashlib
import logging
import re

from trnsim.xla import neuron
from trnsim.xla.graphs import eager_debug


class DynamicShapesError(neuron.NeuronDeviceError):
    """torch.compile(dynamic=True) on the neuron device: TorchNeuron compiles static shapes only."""


def _shapes(inputs) -> str:
    import torch

    return ", ".join(f"{neuron.DTYPES.get(str(t.dtype).removeprefix('torch.'), '?')}[{','.join(map(str, t.shape))}]"
                     for t in inputs if isinstance(t, torch.Tensor))


def _compiler(kind: str):
    def compile_graph(gm, example_inputs):
        import torch
        from functorch.compile import make_boxed_func

        if any(isinstance(d, torch.SymInt) for t in example_inputs if isinstance(t, torch.Tensor) for d in t.shape):
            raise DynamicShapesError(f"{neuron.user_line()}: torch.compile(backend='neuron') compiles static shapes "
                                     f"only (as TorchNeuron); drop dynamic=True or mark_dynamic")
        meter = neuron.METER
        if eager_debug():  # each op runs (and is priced) on its own
            return make_boxed_func(_op_by_op(gm))
        cost = None
        if meter.ledger is not None:
            module, unpriced = neuron.fx_module(gm)
            cost = meter.ledger.model.cost(module)
            cost.unpriced.update(unpriced)
            key = hashlib.sha1(f"{kind}{gm.code}{_shapes(example_inputs)}".encode()).hexdigest()[:16]
            meter.ledger.compiled_graph(key, neuron.user_line(), kind, _shapes(example_inputs), cost)

        runs = [0]

        def run(*args):
            if cost is not None:
                meter.graph(cost, f"compiled {kind} graph")
                if runs[0]:
                    meter.ledger.hits += 1  # a run from the compile cache
            runs[0] += 1
            meter.paused += 1
            try:
                return gm(*args)
            finally:
                meter.paused -= 1

        return make_boxed_func(run)

    return compile_graph


def _op_by_op(gm):
    """Run graph `gm` (on the host tensors AOTAutograd hands it) one ATen op at a time, each priced as the
    device prices an eager op."""
    import torch

    class OpByOp(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            out = super().call_function(target, args, kwargs)
            if isinstance(target, torch._ops.OpOverload):
                neuron.METER.eager_op(target, args, kwargs, out)
            return out

    return lambda *args: OpByOp(gm).run(*args)


def backend(gm, example_inputs, **kwargs):
    """The Dynamo backend "neuron"."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"))(gm, example_inputs)


def register() -> None:
    import torch._dynamo
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    torch._dynamo.config.automatic_dynamic_shapes = False  # a new shape is a new graph, as TorchNeuron compiles
    if "neuron" not in _BACKENDS:
        register_backend(name="neuron", compiler_fn=backend)
        _watch_breaks()


BREAKS: dict[tuple[str, str], int] = {}  # (user line, reason) -> graph breaks seen


class _BreakLog(logging.Handler):
    """Collects Dynamo's graph-break records (its `graph_breaks` log artifact): line and reason."""

    def emit(self, record):
        m = re.match(r"Graph break in user code at (.+?):(\d+)\nGraph Break Reason: (.*)", record.getMessage(), re.S)
        if m:
            reason = m.group(3).strip().splitlines()[0].strip()
            key = (f"{m.group(1)}:{m.group(2)}", reason)
            BREAKS[key] = BREAKS.get(key, 0) + 1


def _watch_breaks() -> None:
    import torch._logging

    torch._logging.set_logs(graph_breaks=True)
    log = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    for h in list(log.handlers):
        log.removeHandler(h)
    log.propagate = False
    log.addHandler(_BreakLog())


def graph_breaks() -> list[dict]:
    """Dynamo's graph breaks so far: the user line, why, how often."""
    return [{"line": line, "reason": reason, "count": n} for (line, reason), n in BREAKS.items()]
