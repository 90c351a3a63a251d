"""Schedules built by hand for the report tests."""
import numpy as np
from trnsim.report import Schedule, Span


def pipeline_schedule(meta=None) -> Schedule:
    """Load, load, load -> matmul, matmul -> activation -> store, plus a vector op; times in ns.

    DMA q0 carries two overlapping loads (0..1000 and 500..1500); the activation waits 100 ns on a
    semaphore after the second matmul.
    """
    op = lambda a: {"operands": a}  # noqa: E731
    spans = (
        Span(0, "DMA q0", "DMA_DIRECT2D", 0, 1000, op("bf16@hbm[128,512] -> sb[0:128]")),
        Span(1, "DMA q1", "DMA_DIRECT2D", 200, 1200, op("bf16@hbm[128,512] -> sb[0:128]")),
        Span(2, "DMA q0", "DMA_DIRECT2D", 500, 1000, op("bf16@hbm[128,128] -> sb[0:128]")),
        Span(3, "TensorE", "MATMUL", 1500, 1000, op("psum[0] += sb[0] x sb[1]"), deps=(0, 1, 2)),
        Span(4, "TensorE", "MATMUL", 2500, 500, op("psum[1] += sb[0] x sb[2]"), deps=(1,)),
        Span(5, "ScalarE", "ACTIVATE", 3100, 500, op("gelu(psum[1]) -> sb[3]"), deps=(4,)),
        Span(6, "VectorE", "TENSOR_TENSOR", 2600, 300, op("add"), deps=(3,)),
        Span(7, "DMA q2", "DMA_DIRECT2D", 3600, 1000, op("sb[3] -> hbm"), deps=(5,)),
    )
    return Schedule(spans, "trn2", "tiny_mlp", meta or {})


def random_schedule(seed: int, n: int = 300) -> Schedule:
    """Engines run in order; DMA queues overlap; each span waits on a few earlier ones. Integer ns."""
    rng = np.random.default_rng(seed)
    tracks = ["TensorE", "VectorE", "ScalarE", "GpSimdE", "Sync"] + [f"DMA q{q}" for q in (0, 1, 2, 10)]
    free = dict.fromkeys(tracks, 0)
    spans = []
    for i in range(n):
        track = tracks[rng.integers(len(tracks))]
        deps = tuple(int(d) for d in rng.choice(i, size=min(i, rng.integers(0, 3)), replace=False)) if i else ()
        ready = max([spans[d].end for d in deps], default=0)
        if not track.startswith("DMA"):  # an engine starts after its previous instruction
            ready = max(ready, free[track])
        start = int(ready + rng.integers(0, 50))
        span = Span(i, track, f"OP{rng.integers(12)}", start, int(rng.integers(1, 400)),
                    {"operands": f"sb[{i}]"}, deps)
        free[track] = span.end
        spans.append(span)
    return Schedule(tuple(spans), "trn1", f"random{seed}", {})

