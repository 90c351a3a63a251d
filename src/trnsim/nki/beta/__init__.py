"""`neuronxcc.nki` (the beta NKI API of Neuron SDK 2.20-2.27) on the emulator.

    import neuronxcc.nki as nki                 # -> trnsim.nki.beta (through trnsim.shim)
    import neuronxcc.nki.language as nl

    @nki.jit
    def add(a, b, out):                           # outputs passed in (SDK 2.20) or allocated and returned
        i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
        nl.store(out[i_p, i_f], nl.load(a[i_p, i_f]) + nl.load(b[i_p, i_f]))

The kernel's Python runs eagerly; every call lowers to the same core instructions the current API
issues (`trnsim.nki.isa`). `kernel[b, h](...)` runs each program of an SPMD grid in turn on one
NeuronCore (the programs of an `nl.all_reduce` wait there for each other). `nki.benchmark` and
`trnsim.benchmark` time a beta kernel with the timing model. See docs/beta-nki.md.
"""
from __future__ import annotations

import warnings

import numpy as np

from trnsim import flags
from trnsim.core import GridWarning, ProfileOutputWarning, ScheduleEdgeError
from trnsim.core.errors import warn
from trnsim.errors import TrnsimError
from trnsim.nki import _frontend
from trnsim.nki.beta import compiler, isa, language, typing  # noqa: F401
from trnsim.nki.beta._tile import Instance, Launch, Tile, _ctx, _direct, wrap

tensor = Tile


class Kernel(_frontend.Kernel):
    """A beta `@nki.jit` kernel; `kernel[d0, d1](...)` launches an SPMD grid of programs (one NeuronCore,
    LNC 1). A kind of `trnsim.nki.Kernel`, so `trnsim.benchmark` and `trnsim profile` take it too."""

    checks_lnc = False  # the LNC degree check is NKI 0.7's compiler's, which no longer takes neuronxcc.nki kernels

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

    def programs(self) -> SpmdGrid:
        return SpmdGrid(self)

    def with_schedule(self, edges, kind=None):
        """Refused by name: schedule edges between named instructions came with the nki package (Neuron SDK
        2.31, nki/guides/how-to-scheduling-apis.rst); the beta API has none, and its instructions no names."""
        raise ScheduleEdgeError(f"{self.fn.__name__}.with_schedule: the beta API (neuronxcc.nki) has no schedule edges; "
                            f"they name instructions by the name= of the nki package's nki.isa calls (Neuron SDK "
                            f"2.31 on)")


class SpmdGrid(_frontend.Programs):
    """A beta SPMD grid: every program in turn on one NeuronCore, as the beta runtime ran them without `nl.nc`
    (the programs of an `nl.all_reduce` wait there for each other); the kernel sees tiles, and its outputs may
    live in `nl.hbm`."""

    who, together, hbm_ok, arg_kind = "program", False, True, "shared_hbm"

    def __init__(self, kernel: Kernel):
        super().__init__(kernel)
        self.launch = Launch(kernel.grid, flags.STRICT.on())
        if getattr(kernel.fn, "skip_middle_end_transformations", False):  # its loops keep their order (nki/compiler.py)
            self.launch.affine = "warn"
        self.indices = list(np.ndindex(*kernel.grid)) if kernel.grid else [()]
        self.saved = getattr(_ctx, "instance", None)

    def share(self, turns, spawn):
        self.launch.turns, self.launch.spawn = turns, spawn

    def enter(self, n):
        _ctx.instance = self.saved if n is None else Instance(self.launch, self.indices[n], n)
        if n is None:
            _direct.last = None  # the latest call's tiles go with the launch

    def arg(self, view):
        return wrap(view)

    def result(self, res):
        return _unwrap(res)

    def fail(self):
        self.failed = self.launch.failed = True

    def summary(self):
        return {"lnc": 1, "grid": list(self.launch.grid)}


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
        out = _frontend.launch(self, args, kwargs)
        nc = self.last_cores[0]
        tl = timing.simulate(nc.stream, nc.target)
        self.benchmark_result = _BenchmarkResult(timing.summarize(self.fn.__name__, [tl], nc.spec))
        return out


def benchmark(kernel=None, warmup=10, iters=100, **options):
    if kernel is None:
        return lambda f: benchmark(f, warmup, iters, **options)
    return BenchmarkKernel(getattr(kernel, "fn", kernel), mode="benchmark", warmup=warmup, iters=iters, **options)


_WARNED: dict = {}  # profile calls already warned about, once per kernel line


def profile(func=None, working_directory=None, save_neff_name=None, save_trace_name=None, **options):
    """`@nki.profile`: runs and times the kernel like `nki.benchmark`; its instruction stream is on `.last_cores`
    and its timing on `.benchmark_result.timing` (`trnsim profile FILE.py` writes the Perfetto trace)."""
    if func is None:
        return lambda f: profile(f, working_directory, save_neff_name, save_trace_name, **options)
    asked = [f"{what}={name!r}" for what, name in (("save_neff_name", save_neff_name),
                                                   ("save_trace_name", save_trace_name)) if name]
    if asked:
        warn(f"nki.profile {', '.join(asked)}: trnsim compiles no NEFF and records no NTFF, so no file is written; "
             f"the kernel's instructions are on .last_cores and its timing on .benchmark_result.timing after a "
             f"call, and `trnsim profile FILE.py` writes its Perfetto trace", ProfileOutputWarning, registry=_WARNED)
    return BenchmarkKernel(getattr(func, "fn", func), mode="profile", **options)


__all__ = ["jit", "trace", "simulate_kernel", "baremetal", "benchmark", "profile", "tensor", "Kernel", "language", "isa",
           "typing", "compiler"]
