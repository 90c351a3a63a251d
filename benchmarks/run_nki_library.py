"""Run kernels of the NKI library (aws-neuron/nki-library), unmodified, on trnsim against numpy, and print JSON.

Not part of the test suite. The library's own tests need its hardware test harness, so each check here calls
one library kernel the way its docstring describes, on small random inputs, and compares with a numpy
reference written here:

    python benchmarks/run_nki_library.py --library PATH/nki-library [--only rope]

The library tree is extracted from the given git directory's HEAD (or used as is when it is a work tree);
every check runs in its own process with the trnsim shim installed. One JSON object: per check, "passed" or
the first error line, the error measured against numpy, and the wall seconds.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_corpus import extract, first_error, git  # noqa: E402

RNG, BF16 = np.random.default_rng(0), ml_dtypes.bfloat16


def cumsum():
    from nkilib.core.cumsum.cumsum import cumsum
    x = RNG.standard_normal((256, 3000)).astype(np.float32)
    return np.abs(cumsum(x) - np.cumsum(x, axis=-1)).max(), 1e-3


def cascaded_max():
    from nkilib.core.max.cascaded_max import cascaded_max
    x = RNG.standard_normal((1, 1, 32768)).astype(np.float32)
    values, indices = cascaded_max(x)
    assert (np.asarray(indices).ravel() == x.argmax(-1).ravel()).all(), "argmax differs"
    return np.abs(np.asarray(values).ravel() - x.max(-1).ravel()).max(), 0.0


def rope():
    from nkilib.core.embeddings.rope import RoPE
    d, b, h, s = 128, 1, 4, 256
    x = RNG.standard_normal((d, b, h, s)).astype(np.float32)
    angle = RNG.standard_normal((d // 2, b, s)).astype(np.float32)
    cos, sin = np.cos(angle), np.sin(angle)
    lo, hi, c, n = x[: d // 2], x[d // 2:], cos[:, :, None, :], sin[:, :, None, :]
    want = np.concatenate([lo * c - hi * n, hi * c + lo * n])
    return np.abs(RoPE(x, cos, sin) - want).max(), 1e-3


def topk():
    from nkilib.core.topk.rotational_topk import topk
    x = RNG.standard_normal((1, 4, 4096)).astype(np.float32)
    values, _ = topk[1](x, 8)
    return np.abs(np.asarray(values) - -np.sort(-x, axis=-1)[..., :8]).max(), 0.0


def rmsnorm_quant():
    from nkilib.core.rmsnorm.rmsnorm_quant import RmsNormQuantKernelArgs, rmsnorm_quant_kernel
    h = 1024
    x = RNG.standard_normal((1, 128, h)).astype(BF16)
    w = RNG.standard_normal((h,)).astype(BF16)
    out = np.asarray(rmsnorm_quant_kernel(x, w, RmsNormQuantKernelArgs(eps=1e-6)))
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    want = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * wf
    scale = out[..., h:].copy().view(np.float32)  # the row's fp32 dequantisation scale in its last 4 bytes
    got = out[..., :h].astype(np.float32) * scale
    return np.abs(got - want).max() / np.abs(want).max(), 0.07  # fp8 e4m3 keeps 3 mantissa bits


def attention_cte():
    from nkilib.core.attention.attention_cte import attention_cte
    b, s, d = 1, 512, 128
    q, k, v = (RNG.standard_normal(shape).astype(BF16) for shape in ((b, s, d), (b, d, s), (b, s, d)))
    out = np.asarray(attention_cte(q, k, v, scale=1 / np.sqrt(d)), np.float32)
    qf, kf, vf = (t.astype(np.float32) for t in (q, k, v))
    scores = np.where(np.tril(np.ones((s, s), bool)), qf @ kf / np.sqrt(d), -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vf
    return np.abs(out - want).max() / np.abs(want).max(), 0.02  # bf16 output


def _qkv(seqlen):
    from nkilib.core.qkv.qkv import qkv
    hidden, fused = 1024, (8 + 2 * 2) * 128  # 8 query heads and 2 key-value heads of 128
    x = (RNG.standard_normal((1, seqlen, hidden)) * 0.5).astype(BF16)
    w = (RNG.standard_normal((hidden, fused)) / 32).astype(BF16)
    want = x.astype(np.float32) @ w.astype(np.float32)
    return np.abs(np.asarray(qkv(x, w), np.float32).reshape(want.shape) - want).max() / np.abs(want).max(), 0.02


def qkv_token_generation():
    return _qkv(4)


def qkv_context_encoding():
    return _qkv(512)


def output_projection_cte():
    from nkilib.core.output_projection.output_projection_cte.output_projection_cte import output_projection_cte
    b, n, d, s, h = 1, 4, 128, 512, 1024
    attention = (RNG.standard_normal((b, n, d, s)) * 0.5).astype(BF16)
    weight = (RNG.standard_normal((n * d, h)) / 24).astype(BF16)
    out = np.asarray(output_projection_cte(attention, weight), np.float32)
    a = attention.astype(np.float32).transpose(0, 3, 1, 2).reshape(b, s, n * d)
    want = a @ weight.astype(np.float32)
    return np.abs(out - want).max() / np.abs(want).max(), 0.02


CHECKS = [cumsum, cascaded_max, rope, topk, rmsnorm_quant, attention_cte, qkv_token_generation, qkv_context_encoding,
          output_projection_cte]


def one(name: str, lib: str) -> None:
    """Run one check in this process and print its JSON line."""
    import trnsim.shim
    trnsim.shim.install()
    sys.path.insert(0, lib)
    error, bound = next(c for c in CHECKS if c.__name__ == name)()
    print(json.dumps({"error": float(error), "bound": bound, "ok": bool(error <= bound)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", type=Path, required=True, help="aws-neuron/nki-library git directory or tree")
    ap.add_argument("--only", action="append", help="run only these checks")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "trnsim-corpus")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--_one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        return one(*args._one)
    if (args.library / "src").is_dir():
        root, commit = args.library, "work tree"
    else:
        commit = git(args.library, "rev-parse", "HEAD").strip()
        root = extract(args.library, commit, args.work / "nki-library")
    lib = str(root / "src" / "nkilib_src")
    report = {}
    for check in CHECKS:
        if args.only and check.__name__ not in args.only:
            continue
        start = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, "--library", str(args.library), "--_one", check.__name__, lib],
                               capture_output=True, text=True, timeout=args.timeout)
            out = p.stdout + p.stderr
            last = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
        except subprocess.TimeoutExpired:
            out, last = f"timed out after {args.timeout} s", None
        entry = {"wall_s": round(time.perf_counter() - start, 1)}
        if last is None:
            entry["result"] = first_error(out)
        else:
            entry.update(result="passed" if last["ok"] else "wrong values", error=last["error"], bound=last["bound"])
        report[check.__name__] = entry
        print(f"{check.__name__}: {entry['result']}", file=sys.stderr)
    passed = sum(e["result"] == "passed" for e in report.values())
    print(json.dumps({"commit": commit, "summary": f"{passed} passed, {len(report) - passed} failed", **report},
                     indent=1))


if __name__ == "__main__":
    main()
