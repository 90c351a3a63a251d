"""`neuronxcc.nki` (the beta NKI API of Neuron SDK 2.20-2.27) on the emulator.

    import neuronxcc.nki as nki                 # -> trnsim.nki.legacy (through trnsim.shim)
    import neuronxcc.nki.language as nl

    @nki.jit
    def add(a, b, out):                           # outputs passed in (SDK 2.20) or allocated and returned
        i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
        nl.store(out[i_p, i_f], nl.load(a[i_p, i_f]) + nl.load(b[i_p, i_f]))

The kernel's Python runs eagerly; every call lowers to the same core instructions the current API
issues (`trnsim.nki.isa`). `kernel[b, h](...)` runs each program of an SPMD grid in turn on one
NeuronCore (the programs of an `nl.all_reduce` wait there for each other). `nki.benchmark` and
`trnsim.benchmark` time a beta kernel with the timing model. See docs/legacy-nki.md.
"""
from __future__ import annotations

import os
import threading
import warnings

import numpy as np

from trnsim import live
from trnsim.core import GridWarning, NeuronCore
from trnsim.core.lnc import Turns
from trnsim.errors import TrnsimError
from trnsim.nki import _frontend
from trnsim.nki.legacy import compiler, isa, language, typing  # noqa: F401
from trnsim.nki.legacy._tile import Abandoned, Instance, Launch, Tile, _ctx, wrap

tensor = Tile


class Kernel(_frontend.Kernel):
    """A beta `@nki.jit` kernel; `kernel[d0, d1](...)` launches an SPMD grid of programs (one NeuronCore,
    LNC 1). A kind of `trnsim.nki.Kernel`, so `trnsim.benchmark` and `trnsim profile` take it too."""

    def __init__(self, fn, grid=(), **options):
        super().__init__(fn, 1, **options)
        self.grid = tuple(grid)
        # The beta runtime's kernel object does not unwrap to its function, so pytest does not collect a
        # `@nki.jit def test_...(in_tensor)` kernel as a test (the SDK's own tests name kernels so).
        del self.__wrapped__

    def __getitem__(self, grid):
        grid = tuple(int(g) for g in (grid if isinstance(grid, tuple) else (grid,)))
        shown = f"kernel[{', '.join(map(str, grid))}]"
        if any(g < 0 for g in grid):
            raise TrnsimError(f"{shown}: a launch grid dim cannot be negative")
        if 0 in grid:
            # The beta docs put no limit on the size of a grid dim and say nothing of 0 (general/nki/
            # programming_model.rst, the SPMD section). A kernel AWS published (nki-samples
            # contributed/pipelined_attention.py) launches `flash_fwd[0](...)` and checks the output it
            # returns, so a 0 dim runs one program, not none.
            grid = tuple(max(g, 1) for g in grid)
            warnings.warn(f"{shown}: a launch grid dim of 0 runs as one program along it", GridWarning, stacklevel=2)
        return type(self)(self.fn, grid, **self.options)

    def _launch(self, args, kwargs, target=None, values=True, order=None):
        return launch(self, args, kwargs, target=target, values=values, order=order)


def launch(kernel: Kernel, args, kwargs, target=None, values=True, order=None):
    """Run every program of the grid in turn on one NeuronCore, as the beta runtime did without `nl.nc`;
    returned tensors come back as arrays (nothing with `values=False`)."""
    strict = os.environ.get("TRNSIM_STRICT", "1") != "0"
    nc = NeuronCore(target or kernel.options.get("platform_target"), strict=strict, values=values,
                    race_check=kernel.options.get("race_check"),
                    budget=_frontend.launch_budget(kernel.options))
    nc.affine_order = order
    nc.lazy_psum = True  # accumulation groups evaluated as the current front end evaluates them
    nc.in_launch = True  # a jit function the kernel calls runs inline on this core (_frontend.Kernel.__call__)
    grid = kernel.grid
    shared = Launch(grid, strict)
    if getattr(kernel.fn, "skip_middle_end_transformations", False):  # its loops keep their order (nki/compiler.py)
        shared.affine = "warn"
    backs, kind = [], "numpy"
    names = list(kernel.fn.__code__.co_varnames[: kernel.fn.__code__.co_argcount])

    def conv(x, name):
        nonlocal kind
        a, k = _frontend._to_numpy(x)
        if a is None:
            return x
        kind = k
        v = nc.hbm_tensor(_frontend._read_only(a), name=name, kind="shared_hbm")  # read in place until written
        backs.append((x, v, k))
        return wrap(v)

    targs = [conv(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(args)]
    tkw = {k: conv(v, k) for k, v in kwargs.items()}
    live.publish(kind="kernel", name=kernel.fn.__name__, cores=[0], target=nc.target, phase="running",
                 memory={"hbm": sum(a.nbytes for a in nc.hbm.tensors())})
    saved = (getattr(_frontend._state, "core", None), getattr(_ctx, "instance", None))
    programs = list(np.ndindex(*grid)) if grid else [()]
    results, errors = [None], []
    turns = shared.turns = Turns(len(programs), "program") if len(programs) > 1 else None

    threads, unclaimed = [], iter(range(len(programs)))  # programs no thread has taken yet, in order

    def worker():
        for n in unclaimed:  # a program that ends frees its thread for the next one
            run(n, programs[n])

    def spawn():
        """Another thread for the programs after one that is about to wait (nl.all_reduce)."""
        threads.append(threading.Thread(target=worker))
        threads[-1].start()

    shared.spawn = spawn

    def run(n, idx):
        if turns:
            turns.start(n)
        _frontend._state.core, _ctx.instance = nc, Instance(shared, idx, n)
        try:
            if not shared.failed:
                res = kernel.fn(*targs, **tkw)
                results[0] = res if n == 0 else results[0]
        except Abandoned:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            shared.failed = True
            errors.append(e)
        finally:
            if turns:
                turns.finish(n)

    ok = False
    try:
        if turns is None:
            run(0, programs[0])
        else:
            # The programs take turns (core/lnc.py): one runs at a time, in program order, and the turn passes
            # only where a program waits for the others (nl.all_reduce) or ends. One thread runs them in turn;
            # a program that waits leaves its thread waiting and another thread takes the next programs.
            spawn()
            for t in threads:  # a thread adds the one it spawns before it waits, so before it ends
                t.join()
        if errors:
            raise errors[0]
        nc.sync()
        ok = True
    finally:
        _frontend._state.core, _ctx.instance = saved
        shared.spawn = None  # its closure holds the core: no cycle keeps the launch's memories past it
        kernel.last_cores = [nc]
        _frontend.LAST.update(kernel=kernel.fn.__name__, cores=[nc])
        _frontend.LAUNCHES.append({"kernel": kernel.fn.__name__, "target": nc.target, "lnc": 1, "grid": list(grid),
                                   "instructions": len(nc.stream), "ok": ok})
    if not values:
        return None
    for orig, v, k in backs:  # outputs passed in as arguments (SDK 2.20 style) go back to the caller's arrays
        if v.alloc.memory.version == 0:
            continue  # never written
        if isinstance(orig, np.ndarray) and orig.flags.writeable:
            np.copyto(orig, v.array().reshape(orig.shape))
        elif k == "torch":
            orig.copy_(_frontend._from_numpy(v.array().copy(), "torch").reshape(orig.shape))
    return _frontend._outputs(_unwrap(results[0]), kind, hbm_ok=True, unwritten=kernel.options.get("unwritten_output"))


def _unwrap(res):
    if isinstance(res, Tile):
        return res.view()
    if isinstance(res, (tuple, list)):
        return type(res)(_unwrap(r) for r in res)
    return res


def jit(func=None, mode="auto", **options):
    """`@nki.jit` (also `mode=` and `platform_target=`): every mode runs on the emulator."""
    if func is None:
        return lambda f: jit(f, mode, **options)
    return func if isinstance(func, Kernel) else Kernel(func, mode=mode, **options)


def trace(func=None, **options):
    """`nki.trace`: the decorator frameworks use to trace a kernel; here, the same as `nki.jit`."""
    return jit(func, mode="trace", **options)


def simulate_kernel(kernel, *args, **kwargs):
    """Run a kernel on the CPU emulator with numpy inputs (the beta `nki.simulate_kernel`)."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(getattr(kernel, "fn", kernel))
    return k(*args, **kwargs)


def baremetal(kernel=None, **options):
    """`@nki.baremetal`: compile-and-run with numpy I/O; here, a run on the emulator."""
    return jit(kernel, mode="baremetal", **options)


class _Latency:
    """`benchmark_result.nc_latency`: the timing model's latency; one deterministic run, so every percentile is it."""

    def __init__(self, result):
        self.result = result

    def get_latency_percentile(self, p) -> float:
        """Latency in microseconds (p in 0..100)."""
        if not 0 <= p <= 100:
            raise TrnsimError(f"get_latency_percentile({p}): a percentile is between 0 and 100")
        return self.result.latency / 1000.0


class _BenchmarkResult:
    def __init__(self, result):
        self.timing, self.nc_latency = result, _Latency(result)


class BenchmarkKernel(Kernel):
    """`@nki.benchmark(warmup=, iters=)`: each call runs the kernel on the emulator and times its instruction
    stream with the timing model; `.benchmark_result.nc_latency.get_latency_percentile(p)` is in microseconds."""

    def __call__(self, *args, **kwargs):
        from trnsim.core import timing
        out = launch(self, args, kwargs)
        nc = self.last_cores[0]
        tl = timing.simulate(nc.stream, nc.target)
        self.benchmark_result = _BenchmarkResult(timing.summarize(self.fn.__name__, [tl], nc.spec))
        return out


def benchmark(kernel=None, warmup=10, iters=100, **options):
    if kernel is None:
        return lambda f: benchmark(f, warmup, iters, **options)
    return BenchmarkKernel(getattr(kernel, "fn", kernel), mode="benchmark", warmup=warmup, iters=iters, **options)


def profile(func=None, working_directory=None, save_neff_name=None, save_trace_name=None, **options):
    """`@nki.profile`: runs and times the kernel like `nki.benchmark`; its instruction stream is on `.last_cores`
    and its timing on `.benchmark_result.timing` (`trnsim profile FILE.py` writes the Perfetto trace)."""
    if func is None:
        return lambda f: profile(f, working_directory, save_neff_name, save_trace_name, **options)
    return BenchmarkKernel(getattr(func, "fn", func), mode="profile", **options)


__all__ = ["jit", "trace", "simulate_kernel", "baremetal", "benchmark", "profile", "tensor", "Kernel", "language", "isa",
           "typing", "compiler"]
