"""Time nki-samples' unit-test benchmark cases on trnsim and compare each with its published latency bound.

Not part of the test suite: it needs a local copy of aws-neuron/nki-samples (a bare git directory or a work
tree), given as the first argument:

    python benchmarks/kernel_bounds.py PATH/nki-samples [--only resize] [--target trn2] [--json-only]

At commit 0898a771 the perf tests of test/unit still assert a latency bound measured on hardware (`p99 <=
latency`, `p1 <= latency * 1.05`, ...; later commits dropped the checks and kept the figures). Each case here
is one row of those tests' parametrisation: the reference kernel runs unmodified (`import neuronxcc.nki`
resolves to trnsim) at the test's shapes and dtypes, on shapes alone (timing only), and its simulated latency
(`nc_latency`, microseconds) is set against the bound the test asserts, tolerance included. The bound holds
for a percentile of hardware runs (p1 to p99), so simulated <= bound is the check.

What the bound measures: `nki.benchmark` runs the NEFF with neuron-bench and reports its end-to-end latency per
execution, device time plus the host-device transfers (the nki.benchmark API reference), so each execution's
start-up and tear-down lies inside it. trnsim's latency is the kernel's period plus the same start-up and
tear-down (`execution_overhead`, read off the profile calibration 1.3 comes from; docs/timing.md), without the
host transfers: like against like, trnsim's side the smaller. Each row also shows the period alone.

The software stack: most of the tests' figures were last revised in 2025, so the cases run with the 2025 stack's
DMA costs, trnsim's default (TRNSIM_NEURON_SDK, docs/timing.md); each row names the stack it ran with.

Rows whose figure the hardware never checked against the work trnsim times carry a note (`not_comparable`:
why, with the file and line at COMMIT) and no verdict: they are left out of the count of bounds met.
`--commit` times the kernels of another commit of nki-samples (e.g. the one a figure was measured with).

The target: the double-row matmul test runs only on a trn2 (it reads the instance name); the others do not
say, and most were written in 2023-2024 (their copyright lines), before Trn2 was available, so they run on trn1
(the slower core: a bound met there is met on trn2) unless `--target` says otherwise.

Prints one JSON object per case on stderr as it finishes, then a table and a JSON list on stdout.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published_shapes import load  # noqa: E402

COMMIT = "0898a771"


def _pool(N, C, H, W, out, dtype):
    return "vision", "adaptive_avg_pool2d_kernel", None, lambda nl: ((_t(nl, (N, C, H, W), dtype), out), {})


def _resize(b, h, w, c, ob, oh, ow, oc, dtype):
    return "vision", "resize_nearest_fixed_dma_kernel", (b,), \
        lambda nl: ((_t(nl, (b, h, w, c), dtype), (ob, oh, ow, oc)), {})


def _sd(module, name, bs, seq, d, dtype, k_transposed):
    k_shape = (bs, d, seq) if k_transposed else (bs, seq, d)
    return module, name, (bs,), lambda nl: ((_t(nl, (bs, d, seq), dtype), _t(nl, k_shape, dtype),
                                             _t(nl, (bs, seq, d), dtype)), {})


def _double_row(M, K, N, dtype, tm, tn, tk):
    return "double_row_matmul", "quantized_double_row_matmul", None, \
        lambda nl: ((_t(nl, (M, K), dtype), _t(nl, (K // 2, 2 * N), nl.float8_e4m3), _t(nl, (128, N), dtype),
                     tm, tn, tk), {})


def _rmsnorm_qkv(batch, seq, dim, d_head, dtype):
    return "allocated_fused_linear", "allocated_fused_rms_norm_qkv", None, \
        lambda nl: ((_t(nl, (batch, seq, dim), dtype), _t(nl, (dim, d_head), dtype)), {})


def _select_scatter(n, c, oh, ow, sh, sw, dtype):
    return "vision", "select_and_scatter_kernel", None, \
        lambda nl: ((_t(nl, (n, c, oh, ow), dtype), _t(nl, (n, c, sh, sw), dtype)), {})


def _flash_bwd(bs, heads, seq, d, dtype, sinks):
    def make(nl):
        qkv = [_t(nl, (bs, heads, d, seq), dtype) for _ in range(5)]  # q, k, v, o_proj, dy
        lse = _t(nl, (bs, heads, 128, seq // 128), "float32")
        kw = dict(use_causal_mask=True, mixed_precision=True, sinks=_t(nl, (bs, heads), dtype) if sinks else None)
        return (*qkv, lse, None), kw
    return "attention", "flash_attn_bwd", (bs, heads), make


def _flash_fwd(bs, heads, seq_q, seq_k, d, dtype, window, training, kv_heads):
    def make(nl):
        import nki_samples.reference.attention as attention
        config = attention.FlashConfig(seq_tile_size=2048, training=training, should_transpose_v=False)
        # the test gives k and v all `heads` heads and launches a grid of `kv_heads`: the kernel then reads one
        # query head per kv head (h // k_h = 1), so its programs cover kv_heads of the query heads
        args = (_t(nl, (bs, heads, d, seq_q), dtype), _t(nl, (bs, heads, d, seq_k), dtype),
                _t(nl, (bs, heads, seq_k, d), dtype), None)
        return args, dict(use_causal_mask=True, sliding_window=window, mixed_precision=True, config=config)
    return "attention", "flash_fwd", (bs, kv_heads or heads), make


class Note(NamedTuple):
    """Why a row's figure is no bound the hardware met on the work trnsim times (file:line at COMMIT);
    one_program: also time one program of the row's grid."""
    reason: str
    one_program: bool = False


MICROSECONDS = ("nki.benchmark's `get_latency_percentile` returns microseconds (aws-neuron-sdk "
                "general/nki/api/nki/__init__.py:329 at 56af36ca, 2025-07-31; so since the beta API's first release)")
FWD_UNITS = (f"test_flash_attn_fwd.py:107-108 asserts p50 <= latency, p50 in microseconds ({MICROSECONDS}), latency "
             "3e9 to 87e9 (:74-81): an assert that cannot fail, so no figure of this test was checked on hardware; "
             "the bound shown reads it as picoseconds, for information.")
NON_SQUARE = (" The two non-square rows (:77-78, added in 05c0769) share 7.55e9, half the 32k square row's 15.1e9, "
              "though q32k/k16k makes 1,600 causal tile calls a head and q16k/k32k 576 (attention.py:461-471): one "
              "figure for both, a measurement of neither.")
RESIZE_GRID = Note(
    "test_resize_nearest.py:48 launches a grid of 10 (`bench_func[in_b]`) and the kernel never reads program_id "
    "(vision.py:207 loops over every batch), so ten programs in turn, as the beta programming model documents an "
    "SPMD grid (programming_model.rst, SPMD), move 10 x 229.6 MB = 2.30 GB through HBM: 2.6 ms at the whole trn1 "
    "chip's 820 GiB/s, 8.4 ms at one core's 16 DMA engines, against 1.74 ms. The figure (:39) was set in 05c0769 "
    "(2024-12-23), on the kernel 83a3630 (2025-08-28) replaced, which loaded one pixel of all 10 batches per DMA. "
    "The hardware did less work than the grid as documented; `one_program_us` times one program.", one_program=True)


def _t(nl, shape, dtype):
    import numpy as np
    return nl.static_cast(np.zeros(shape, np.float32), getattr(nl, dtype) if isinstance(dtype, str) else dtype)


# (test, case label, kernel spec, bound in us, the percentile the test asserts, trn2 only, note or None)
# Bounds are the tests' own expressions: `latency` with the tolerance each test multiplies in.
def cases():
    f32, f16, bf16 = "float32", "float16", "bfloat16"
    out = []
    for N, C, H, W, o, dt, us in [(1, 64, 56, 56, 7, f32, 65), (2, 128, 28, 28, 7, f32, 109),
                                  (1, 256, 14, 14, 7, f16, 88), (4, 64, 56, 56, (7, 7), f32, 152),
                                  (2, 128, 28, 28, (14, 14), f32, 327), (1, 512, 7, 7, 1, f32, 14),
                                  (8, 64, 32, 32, (4, 4), f16, 103), (2, 2048, 32, 32, (3, 3), f32, 564),
                                  (2, 64, 256, 256, 1, f32, 255)]:
        out.append(("test_adaptive_avg_pool2d", f"adaptive_avg_pool2d N{N} C{C} {H}x{W}->{o} {dt}",
                    _pool(N, C, H, W, o, dt), us * 1.05, 99, False, None))
    for b, dt, us in [(10, f32, 1740), (1, f16, 659), (1, bf16, 659)]:
        out.append(("test_resize_nearest", f"resize_nearest b{b} 30x20x1280->59x38 {dt}",
                    _resize(b, 30, 20, 1280, b, 59, 38, 1280, dt), us, 50, False, RESIZE_GRID if b > 1 else None))
    for seq, d, dt, us in [(4096, 128, f32, 675), (4096, 128, bf16, 536), (4096, 64, f16, 600)]:
        out.append(("test_SD_attention_small_head", f"SD attention seq{seq} d{d} {dt}",
                    _sd("attention", "fused_self_attn_for_SD_small_head_size", 1, seq, d, dt, False),
                    us * 1.05, 1, False, None))
    for seq, d, dt, us in [(4096, 128, f32, 410), (4096, 128, bf16, 380), (5120, 128, bf16, 586)]:
        out.append(("test_allocated_SD_attention_small_head", f"allocated SD attention seq{seq} d{d} {dt}",
                    _sd("allocated_attention", "allocated_fused_self_attn_for_SD_small_head_size", 1, seq, d, dt,
                        True), us * 1.05, 50, False, None))
    out.append(("test_double_row_matmul", "double_row_matmul M512 K16384 N1024 bf16 x fp8 blocks 2,2,16",
                _double_row(512, 16 * 1024, 1024, bf16, 2, 2, 16), 320, 99, True, None))
    for batch, seq, dim, dh, dt, us in [(1, 128, 512, 512, f16, 25), (1, 512, 1024, 384, bf16, 40),
                                        (1, 128, 1024, 512, bf16, 28)]:
        out.append(("test_rmsnorm_qkv", f"rmsnorm_qkv seq{seq} dim{dim} d_head{dh} {dt}",
                    _rmsnorm_qkv(batch, seq, dim, dh, dt), us, 50, False, None))
    out.append(("test_select_and_scatter", "select_and_scatter 8x64 112x112 <- 56x56 float32",
                _select_scatter(8, 64, 112, 112, 56, 56, f32), 4500, 50, False, None))
    for sinks in (False, True):  # xfail at this commit, the figure kept
        out.append(("test_flash_attn_bwd", f"flash_attn_bwd heads4 seq32k d128 bf16 sinks={sinks}",
                    _flash_bwd(1, 4, 32 * 1024, 128, bf16, sinks), 117000, 50, False, None))
    # The fwd test's figures (87000000000, ...) in the microseconds its assert compares them with are a day per
    # call: an assert that cannot fail (FWD_UNITS). Read as picoseconds they scale with the work (15.1 ms for one
    # causal 32k head, 4 ms for 16k) and agree with the bwd test's 117,000 us for four heads backward; that
    # reading is shown, with no verdict.
    for heads, sq, sk, window, training, kvh, ps in [
            (6, 32, 32, -1, True, 3, 87e9), (1, 32, 32, -1, False, None, 15.1e9), (3, 32, 16, -1, False, None, 7.55e9),
            (3, 16, 32, -1, False, None, 7.55e9), (1, 16, 16, -1, False, None, 4e9), (1, 16, 16, 4096, False, None, 3e9)]:
        out.append(("test_flash_attn_fwd", f"flash_fwd heads{heads} q{sq}k k{sk}k window{window} train={training}",
                    _flash_fwd(1, heads, sq * 1024, sk * 1024, 96, bf16, window, training, kvh), ps / 1e6, 50, False,
                    Note(FWD_UNITS + (NON_SQUARE if sq != sk else ""))))
    return out


def extract(repo: Path, dest: Path, commit: str = COMMIT) -> Path:
    """The nki-samples tree at `commit`, written under dest."""
    gitdir = repo / ".git" if (repo / ".git").exists() else repo
    data = subprocess.run(["git", "--git-dir", str(gitdir), "archive", commit, "src"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def run_case(root: Path, case, target: str) -> dict:
    import trnsim
    import neuronxcc.nki.language as nl
    test, label, (module, name, grid, make), bound, pct, trn2_only, note = case
    target = "trn2" if trn2_only else target
    from trnsim import flags
    entry = {"test": test, "case": label, "target": target, "sdk": flags.NEURON_SDK.value(), "bound_us": round(bound, 2),
             "percentile": pct}
    t0 = time.perf_counter()
    try:
        jitted = getattr(load(root / "src" / "nki_samples" / "reference" / f"{module}.py", root), name)
        kernel = jitted[grid] if grid else jitted
        args, kwargs = make(nl)
        r = trnsim.benchmark(kernel, *args, target=target, timing_only=True, **kwargs)
        entry["simulated_us"] = round(r.latency / 1000, 2)
        entry["period_us"], entry["overhead_us"] = round(r.period / 1000, 2), round(r.overhead / 1000, 2)
        entry["ratio"] = round(r.latency / 1000 / bound, 3)
        entry["meets"] = r.latency / 1000 <= bound if note is None else None
        entry["bound_by"] = r.bound
        entry["instructions"] = sum(len(c.stream) for c in kernel.last_cores)
        if note is not None and note.one_program:
            one = trnsim.benchmark(jitted[(1,) * len(grid)], *args, target=target, timing_only=True, **kwargs)
            entry["one_program_us"] = round(one.latency / 1000, 2)
    except Exception as e:  # noqa: BLE001 - a refused kernel is a result to report
        entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        entry["meets"] = False if note is None else None
    if note is not None:
        entry["not_comparable"] = note.reason
    entry["wall_s"] = round(time.perf_counter() - t0, 1)
    return entry


def table(rows) -> str:
    lines = ["| case | target | simulated us (period + start-up) | bound us | sim/bound | bound by | meets |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    notes = [r for r in rows if "not_comparable" in r]
    for r in rows:
        verdict = f"not comparable ({notes.index(r) + 1})" if r in notes else "yes" if r["meets"] else "NO"
        if "error" in r:
            lines.append(f"| {r['case']} | {r['target']} | {r['error'][:80]} | {r['bound_us']:g} | | | {verdict} |")
        else:
            one = f"; one program {r['one_program_us']:,.2f}" if "one_program_us" in r else ""
            lines.append(f"| {r['case']} | {r['target']} | {r['simulated_us']:,.2f} ({r['period_us']:,.2f} + "
                         f"{r['overhead_us']:g}{one}) | {r['bound_us']:,.6g} | "
                         f"{r['ratio']:.3g} | {r['bound_by']} | {verdict} |")
    judged = [r for r in rows if r not in notes]
    lines.append(f"\n{sum(r['meets'] for r in judged)} of {len(judged)} cases meet their bound"
                 + (f"; {len(notes)} not comparable:" if notes else "."))
    lines += [f"({i}) {r['case']}: {r['not_comparable']}" for i, r in enumerate(notes, 1)]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("samples", type=Path, help="aws-neuron/nki-samples: a git directory or work tree")
    p.add_argument("--only", default="", help="run only the cases whose label or test contains this")
    p.add_argument("--exclude", action="append", default=[],
                   help="skip the cases whose label or test contains this (repeatable; e.g. the long flash cases)")
    p.add_argument("--target", default="trn1", help="trn1, trn2 or trn3 for the tests that do not say (default trn1)")
    p.add_argument("--commit", default=COMMIT, help=f"the nki-samples commit whose kernels run (default {COMMIT}, "
                   "the bounds' own; the figures and notes stay those of its tests)")
    p.add_argument("--json-only", action="store_true", help="print the JSON list alone")
    args = p.parse_args(argv)
    import trnsim.shim
    trnsim.shim.install()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = extract(args.samples, Path(tmp), args.commit)
        for case in cases():
            if args.only and args.only not in case[1] and args.only not in case[0]:
                continue
            if any(x in case[1] or x in case[0] for x in args.exclude):
                continue
            rows.append(run_case(root, case, args.target))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if not args.json_only:
        print(table(rows))
    print(json.dumps(rows, indent=1))
    return 0 if all(r["meets"] for r in rows if "not_comparable" not in r) else 1


if __name__ == "__main__":
    sys.exit(main())
