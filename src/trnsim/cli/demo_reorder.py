"""The demo's scheduling section: one small kernel timed in program order, as the compiler reorders it, and with a
`with_schedule` edge that orders its named instructions again."""
from __future__ import annotations

WIDTH = 56  # characters of a timeline row
STEPS = 8  # the independent chain's length


def kernel(ordered: bool):
    """A kernel whose program order waits where it need not: VectorE sums a large tile still arriving from HBM,
    then runs a chain of independent steps on a small tile loaded already, then scales the small tile by the
    sums. `ordered` puts the Vector work in an `nl.no_reorder()` block, the order the kernel is written in;
    otherwise the compiler may run the chain while the large tile loads. The sum is named "sums" and every
    step "step", for `with_schedule` edges."""
    import contextlib

    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def late_tile(big, small):
        a = nl.ndarray(big.shape, dtype=big.dtype, buffer=nl.sbuf)
        b = nl.ndarray(small.shape, dtype=small.dtype, buffer=nl.sbuf)
        sums = nl.ndarray((big.shape[0], 1), dtype=big.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=small)
        nisa.dma_copy(dst=a, src=big)
        with nl.no_reorder() if ordered else contextlib.nullcontext():
            nisa.tensor_reduce(dst=sums, op=nl.add, data=a, axis=1, name="sums")
            for _ in range(STEPS):
                nisa.tensor_scalar(dst=b, data=b, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=1.0,
                                   name="step")
            nisa.tensor_scalar(dst=b, data=b, op0=nl.multiply, operand0=sums)
        out = nl.ndarray(small.shape, dtype=small.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        return out

    return late_tile


def inputs():
    import numpy as np

    return np.ones((128, 8192), np.float32), np.ones((128, 2048), np.float32)


def rows(result, span: float) -> dict[str, str]:
    """Each engine's busy time as a row of WIDTH characters over [0, span) ns (the DMA queues as one row)."""
    busy: dict[str, list[bool]] = {}
    for e in result.timelines[0].events:
        track = "DMA" if e.track.startswith("DMA") else e.track
        cells = busy.setdefault(track, [False] * WIDTH)
        lo, hi = int(WIDTH * e.start / span), int(WIDTH * e.end / span - 1e-9)
        for c in range(max(0, lo), min(WIDTH, hi + 1)):
            cells[c] = True
    return {t: "".join("█" if b else "·" for b in cells) for t, cells in sorted(busy.items())}


def tour(console):
    """Program order against the compiler's order: the latency and each engine's timeline, on one scale."""
    from trnsim.core.timing import benchmark

    edge = [("step", "sums")]  # every step after the sum, on VectorE: a schedule edge
    kernels = {"program order (nl.no_reorder)": kernel(True), "as the compiler reorders": kernel(False),
               f"reordered, with_schedule({edge})": kernel(False).with_schedule(edge)}
    runs = {name: benchmark(k, *inputs(), target="trn2", timing_only=True) for name, k in kernels.items()}
    span = max(r.period for r in runs.values())
    console.print(f"VectorE sums a 4 MiB tile still loading, runs {STEPS} steps on a small tile loaded already, then "
                  f"scales it by the sums (trn2, timing only). The compiler's scheduler runs the steps in the gap:")
    for name, r in runs.items():
        console.print(f"[bold]{name}[/]: {r.period / 1e3:.1f} us timeline, bound by {r.bound}")
        for track, row in rows(r, span).items():
            console.print(f"  {track:<8} {row}")
    console.print(f"[dim]one character = {span / WIDTH / 1e3:.2f} us; `with nl.no_reorder():` keeps a block in program "
                  f"order on each engine; `kernel.with_schedule(edges)` orders instructions named with `name=`[/]")
