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

from trnsim import specs
from trnsim.errors import ConfigError
from trnsim.core.timing.result import BenchmarkResult, critical_path, summarize
from trnsim.core.timing.scheduler import Event, Scheduler, Timeline, replay
from trnsim.specs.timing import timing


def simulate(stream, target: str) -> Timeline:
    """Schedule one core's instruction stream (a list of Records) on a target (trn1|trn2|trn3)."""
    return replay(stream, specs.neuroncore(target), timing(target))


def benchmark(kernel, *args, target: str | None = None, timing_only: bool = False, **kwargs) -> BenchmarkResult:
    """Run `kernel(*args, **kwargs)` on the emulator and time it.

    Args:
        kernel: an `@nki.jit` kernel (anything with `trace(*args, target=, values=, **kwargs)`
            returning the cores it ran on).
        target: trn1, trn2 or trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).
        timing_only: run on shapes alone, no values: much faster for full-size kernels.

    Returns:
        A BenchmarkResult: latency, per-engine active time and share, FLOPs, MFU/HFU, DMA bytes
        and bandwidth, SBUF/PSUM peaks and the critical path (`bound`: the engine or DMA queue
        that bound the kernel).
    """
    if not callable(getattr(kernel, "trace", None)):
        raise ConfigError(f"benchmark times an @nki.jit kernel; got {type(kernel).__name__} {kernel!r}")
    cores = kernel.trace(*args, target=target, values=not timing_only, **kwargs)
    spec = cores[0].spec
    name = getattr(kernel, "__name__", type(kernel).__name__)
    return summarize(name, [simulate(nc.stream, spec.target) for nc in cores], spec)


__all__ = ["BenchmarkResult", "Event", "Scheduler", "Timeline", "benchmark", "critical_path", "replay", "simulate",
           "summarize"]
