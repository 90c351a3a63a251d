"""The timing model: replay a NeuronCore's instruction stream on its engines and DMA queues.

    >>> import trnsim
    >>> r = trnsim.benchmark(kernel, a, b, target="trn1", timing_only=True)
    >>> r.latency, r.bound, r.hfu

`benchmark` runs the kernel (with values, or on shapes alone with `timing_only=True`), then
`simulate` schedules each core's stream: in-order Tensor/Vector/Scalar/GpSimd/Sync queues, 16 DMA
engines, dependencies from read/write sets plus a semaphore latency, the documented cost of every
instruction per generation (trnsim.specs: neuroncores.toml and timing.toml).
"""
from __future__ import annotations

from trnsim import live, specs
from trnsim.errors import ConfigError
from trnsim.core.timing.result import BenchmarkResult, critical_path, interval_shares, summarize
from trnsim.core.timing.scheduler import Event, Scheduler, Timeline, replay
from trnsim.specs.timing import timing


def simulate(stream, target: str, progress=None, core: int = 0, name: str = "kernel") -> Timeline:
    """Schedule one core's instruction stream (a list of Records) on a target (trn1|trn2|trn3).

    While it runs, the process publishes the core's engine shares over each stretch of simulated time
    (trnsim.live, for `trnsim top`); `progress(done, total)` is called as instructions are placed."""
    spec = specs.neuroncore(target)
    total = len(stream)

    def on_chunk(tl, lo, hi):
        if progress is not None:
            progress(hi, total)
        if hi < total and not live.due():
            return  # shares no reader would see: the file is rewritten at most every live.INTERVAL_S
        busy, util, now = interval_shares(tl.events[lo:hi], spec.dma_engines)
        _BUSY[core], _UTIL[core] = busy, util
        live.publish(kind="kernel", name=name, target=target, phase="timing", busy=dict(_BUSY),
                     utilisation=dict(_UTIL), sim_time_ns=now)

    return replay(stream, spec, timing(target), on_chunk)


_BUSY: dict[int, dict[str, float]] = {}  # per core of the launch being timed: its latest shares
_UTIL: dict[int, float] = {}


def benchmark(kernel, *args, target: str | None = None, timing_only: bool = False, progress=None,
              **kwargs) -> BenchmarkResult:
    """Run `kernel(*args, **kwargs)` on the emulator and time it.

    Args:
        kernel: an `@nki.jit` kernel (anything with `trace(*args, target=, values=, **kwargs)`
            returning the cores it ran on).
        target: trn1, trn2 or trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).
        timing_only: run on shapes alone, no values: much faster for full-size kernels.
        progress: called as `progress(done, total)` while the instructions are timed.

    Returns:
        A BenchmarkResult: latency, per-engine active time and share, FLOPs, MFU/HFU, DMA bytes
        and bandwidth, SBUF/PSUM peaks and the critical path (`bound`: the engine or DMA queue
        that bound the kernel).
    """
    if not callable(getattr(kernel, "trace", None)):
        raise ConfigError(f"benchmark times an @nki.jit kernel; got {type(kernel).__name__} {kernel!r}")
    cores = kernel.trace(*args, target=target, values=not timing_only, **kwargs)
    return time_cores(getattr(kernel, "__name__", type(kernel).__name__), cores, progress)


def time_cores(name: str, cores, progress=None) -> BenchmarkResult:
    """Time the instruction streams of a launch that already ran (its cores, one or two)."""
    spec = cores[0].spec
    _BUSY.clear()
    _UTIL.clear()
    total, done = sum(len(nc.stream) for nc in cores), 0
    timelines = []
    for i, nc in enumerate(cores):
        step = None if progress is None else (lambda d, _t, base=done: progress(base + d, total))
        timelines.append(simulate(nc.stream, spec.target, step, core=i, name=name))
        done += len(nc.stream)
    result = summarize(name, timelines, spec)
    live.timed(result.latency, result.period, {i: sum(e.flops for e in tl.events if e.flops)
                                               for i, tl in enumerate(timelines)})
    return result


__all__ = ["BenchmarkResult", "Event", "Scheduler", "Timeline", "benchmark", "critical_path", "replay", "simulate",
           "summarize", "time_cores"]
