"""Run public NKI kernels at the shapes their tutorials and benchmarks publish, timing only, and print JSON.

Not part of the test suite: the kernels come from local copies of the public repositories, given on the
command line as extracted trees (a folder holding `src/nki_samples/...` or `nki/examples/...`):

    python benchmarks/published_shapes.py --corpus PATH/nki-samples --corpus PATH/aws-neuron-sdk [--only mamba]

Every known kernel file found under a corpus folder runs unmodified (`import nki` and `import
neuronxcc.nki` resolve to trnsim) on shapes alone (`trnsim.benchmark(..., timing_only=True)`), as does the
project's own examples/matmul_ladder.py. Shapes: the matmul tutorial's M=4096, N=8192, K=8192 bf16, the fused
Mamba tutorial's channel and sequence lengths (fp32, batch 1, state 16), the LayerNorm tutorial's default
4096 x 8192 fp32 input and flash attention's performance-test shapes (see shared calibration figures and the
tutorials' rst). One JSON object per kernel: kernel, file, shape, instructions, simulated latency (ns), the
spills where SBUF could not hold the live tiles, wall seconds, or the error that stopped it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BF16 = ml_dtypes.bfloat16


def matmul_args():
    K, M, N = 8192, 4096, 8192
    return (np.zeros((K, M), BF16), np.zeros((K, N), BF16)), {}, f"lhsT[{K},{M}] rhs[{K},{N}] bf16"


def mamba_args(channels, seq):
    def make():
        f32 = np.float32
        delta, u = np.ones((1, channels, seq), f32), np.ones((1, channels, seq), f32)
        A, B, C = -np.ones((channels, 16), f32), np.ones((1, 16, seq), f32), np.ones((1, 16, seq), f32)
        return (delta, u, A, B, C), {}, f"batch 1 channels {channels} seq {seq} state 16 fp32"
    return make


def layernorm_args():
    rows, cols = 4096, 8192
    x, g, b = np.zeros((rows, cols), np.float32), np.zeros(cols, np.float32), np.zeros(cols, np.float32)
    return (x, 1e-5, g, b), {}, f"input [{rows},{cols}] fp32"


def flash_args(module, heads, seq_q, seq_k, d):
    def make():
        q, k = np.zeros((1, heads, d, seq_q), BF16), np.zeros((1, heads, d, seq_k), BF16)
        v = np.zeros((1, heads, seq_k, d), BF16)
        config = module.FlashConfig(seq_tile_size=2048, training=False, should_transpose_v=False)
        kw = dict(use_causal_mask=True, sliding_window=-1, mixed_precision=True, config=config)
        return (q, k, v, None), kw, f"bs 1 heads {heads} seq_q {seq_q} seq_k {seq_k} d {d} bf16 causal"
    return make


MATMUL = ["nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_",
          "nki_matmul_fully_optimized_"]
# (relative file, kernel name, grid, argument maker taking the loaded module)
KNOWN = [
    *[("src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py", k, None,
       lambda m: matmul_args) for k in MATMUL],
    *[("nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py", k, None, lambda m: matmul_args)
      for k in MATMUL],
    *[(f"{base}/fused_mamba/mamba_nki_kernels.py", v, None, lambda m, c=c, s=s: mamba_args(c, s))
      for base in ("src/nki_samples/tutorials", "nki/examples")
      for v, c, s in [("mamba_v1", 4096, 512), ("mamba_v2", 4096, 512), ("mamba_v2", 4096, 7168),
                      ("mamba_v2", 4096, 8192), ("mamba_v3", 4096, 8192)]],
    *[("src/nki_samples/tutorials/layernorm/layernorm_nki_kernel.py", v, None, lambda m: layernorm_args)
      for v in ("nki_layernorm_kernel_v1", "nki_layernorm_kernel_v2")],
    ("src/nki_samples/reference/attention.py", "flash_fwd", (1, 1),
     lambda m: flash_args(m, 1, 16 * 1024, 16 * 1024, 96)),
]
LADDER = [("examples/matmul_ladder.py", k, None, lambda m: matmul_args)
          for k in ("matmul_tiled", "matmul_hoisted", "matmul_blocked", "matmul_optimized")]


def load(path: Path, root: Path):
    """Import a kernel file; files inside a `src/` package import as that package's module."""
    src = root / "src"
    if src.is_dir() and src in path.parents:
        parts = path.relative_to(src).with_suffix("").parts
        for m in [m for m in sys.modules if m == parts[0] or m.startswith(parts[0] + ".")]:
            if not str(getattr(sys.modules[m], "__file__", None) or "").startswith(str(src)):
                del sys.modules[m]  # the same package from another corpus
        if str(src) in sys.path:
            sys.path.remove(str(src))
        sys.path.insert(0, str(src))
        return importlib.import_module(".".join(parts))
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"published_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(root: Path, rel: str, name: str, grid, maker, target: str) -> dict:
    import trnsim
    entry = {"kernel": name, "file": str(root / rel)}
    t0 = time.perf_counter()
    try:
        module = load(root / rel, root)
        args, kwargs, shape = maker(module)()
        entry["shape"] = shape
        kernel = getattr(module, name)
        kernel = kernel[grid] if grid else kernel
        r = trnsim.benchmark(kernel, *args, target=target, timing_only=True, **kwargs)
        entry["instructions"] = sum(len(c.stream) for c in kernel.last_cores)
        entry["latency_ns"] = round(r.latency, 1)
        if r.spill_line:  # the live tiles overflowed SBUF: the compiler's spill traffic
            entry["spills"] = r.spill_line
    except Exception as e:  # noqa: BLE001 - a refused kernel is a result to report
        entry["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    entry["wall_s"] = round(time.perf_counter() - t0, 2)
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", action="append", default=[], type=Path, help="an extracted corpus tree (repeatable)")
    p.add_argument("--only", default="", help="run only kernels whose file or name contains this")
    p.add_argument("--target", default="trn1", help="trn1 (the tutorials' published figures), trn2 or trn3")
    args = p.parse_args(argv)
    import trnsim.shim
    trnsim.shim.install()
    jobs = [(ROOT, *k) for k in LADDER]
    jobs += [(root, *k) for root in args.corpus for k in KNOWN if (root / k[0]).is_file()]
    results = []
    for root, rel, name, grid, maker in jobs:
        if args.only and args.only not in rel and args.only not in name:
            continue
        results.append(run_one(root, rel, name, grid, maker, args.target))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
