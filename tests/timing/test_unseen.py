"""Kernels no calibration figure covers, written here as users write them, timed against what the documents say
they must cost.

Each floor is computed in the test from the documented figures alone (the nki.isa cost notes, the Trainium and
Trainium2 architecture guides, the DMA bandwidth guide), never from trnsim's catalog or rules:

- TensorE: a matmul issues every max(min(64, M), N) cycles for BF16/FP16 (FP32 4x), at 2.8 GHz on NeuronCore-v2
  and 2.4 GHz on v3 (trainium_inferentia2_arch.rst, trainium2_arch.rst); v3 starts at half rate for ~3 us (the
  dI/dt throttle, Neuron Explorer glossary);
- VectorE at 1.12 / 0.96 GHz, ScalarE at 1.4 / 1.2 GHz: N cycles per input streamed, 2N for tensor_tensor, N for
  a BF16 add/multiply/subtract wholly in SBUF (nki.isa tensor_tensor); v3 perf modes 4x for 16-bit
  copies/tensor_scalar in SBUF, 2x for 16-bit tensor_tensor (trainium2_arch.rst);
- DMA: 16 engines at 17 / 23 B/ns (nki-dma-bandwidth-guide.rst), capped on v3 by the core's share of HBM
  (2.9 TB/s over 8 cores).

A kernel's floor is its busiest engine's; trnsim must land at or above it, and within what fixed costs the
documents also state (DMA's ~1.3 us start, an instruction's ~100-cycle dependency overhead) can add.
"""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.beta as beta
import trnsim.nki.beta.language as bnl
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import NeuronCore, Op
from trnsim.core.timing import benchmark, simulate

# Documented figures, per target: clocks in GHz, DMA in B/ns for the core (16 engines, HBM share on v3).
DOC = {
    "trn1": {"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "dma": 16 * 17.0},
    "trn2": {"tensor": 2.4, "vector": 0.96, "scalar": 1.2, "dma": min(16 * 23.0, 2.9e12 / 8 / 1e9)},
}
WARMUP_NS = {"trn1": 0.0, "trn2": 0.25 * 3000.0}  # v3's throttle: from half rate to full over ~3 us, 3/4 on average


def _one(target, build):
    nc = NeuronCore(target, values=False)
    build(nc)
    return simulate(nc.stream, target).events[-1]


def _apart(nc):
    """An unrelated Vector instruction, so the one measured next reads nothing its engine just wrote."""
    nc.issue(Op.MEMSET, engine="vector", dst=nc.tensor((128, 8), "float32"), value=0.0)


# -- tensor_tensor: the documented BF16 fast path, and v3's perf mode on top of it ---------------------------------
@pytest.mark.parametrize("target, dtype, op, strided, cycles", [
    ("trn1", "bfloat16", "add", False, 2048),       # N: SBUF, all BF16, add, unit stride
    ("trn1", "bfloat16", "multiply", False, 2048),
    ("trn1", "bfloat16", "subtract", False, 2048),
    ("trn1", "bfloat16", "maximum", False, 4096),   # another op: 2N
    ("trn1", "float16", "add", False, 4096),        # FP16 is not in the note: 2N
    ("trn1", "float32", "add", False, 4096),
    ("trn1", "bfloat16", "add", True, 4096),        # a free-dim stride of 2 elements: 2N
    ("trn2", "bfloat16", "add", False, 1024),       # v3: 2x "compared to NeuronCore-v2" on the v2 figure, N/2
    ("trn2", "float16", "add", False, 2048),        # 2N on v2, N on v3
    ("trn2", "float32", "add", False, 4096),        # no perf mode for 32-bit tensor_tensor
])
def test_tensor_tensor_costs_what_the_isa_note_and_the_v3_perf_mode_say(target, dtype, op, strided, cycles):
    """tensor_tensor on VectorE, N = 2048: max(MIN_II, 2N) cycles, max(MIN_II, N) when both inputs are in SBUF,
    every operand BF16, the op add, multiply or subtract and the free dim contiguous (nki.isa tensor_tensor cost
    table); NeuronCore-v3 doubles tensor_tensor throughput for 16-bit operands in SBUF against v2
    (trainium2_arch.rst, Vector Engine Performance Mode)."""
    def build(nc):
        n = 2048
        width = 2 * n if strided else n
        a, b = nc.tensor((128, width), dtype), nc.tensor((128, width), dtype)
        out = nc.tensor((128, n), dtype)
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=1.0)
        nc.issue(Op.MEMSET, engine="vector", dst=b, value=1.0)
        _apart(nc)
        x, y = (a[:, ::2], b[:, ::2]) if strided else (a, b)
        nc.issue(Op.TENSOR_TENSOR, dst=out, data1=x, data2=y, op=op)
    ev = _one(target, build)
    assert ev.end - ev.start == pytest.approx(cycles / DOC[target]["vector"])


# -- TensorE rate by dtype --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("dtype, rate", [("float16", 1), ("bfloat16", 1), ("tfloat32", 1), ("float32", 4)])
def test_matmul_rate_by_dtype(target, dtype, rate):
    """92 (v2) and 79 (v3) TFLOPS a core for BF16, FP16 and TF32 alike, FP32 a quarter of that
    (trainium_inferentia2_arch.rst, trainium2_arch.rst): a [128, 128] x [128, 512] matmul takes 512 TensorE cycles,
    2048 for FP32. On v3 forty warm-up matmuls first bring the array past its dI/dt ramp."""
    def build(nc):
        st, mv = nc.tensor((128, 128), dtype), nc.tensor((128, 512), dtype)
        ps = nc.tensor((128, 512), "float32", "psum")
        for _ in range(40):
            nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    ev = _one(target, build)
    assert ev.end - ev.start == pytest.approx(rate * 512 / DOC[target]["tensor"], rel=1e-6)


# -- a 3x3 convolution as shifted matmuls accumulated in PSUM ---------------------------------------------------------
@nki.jit
def conv3x3(x, w):
    """out[b, o, h, c] = sum over i, kh, kw of x[b, i, h + kh, c + kw] * w[kh, kw, i, o]: x [B, 128, H + 2, W + 2] (input
    channels on partitions, padded), w [3, 3, 128, CO]. Each PSUM tile holds `rows` output rows (rows x W <= 512
    FP32, one bank); its nine shifted matmuls accumulate there, no im2col."""
    B, C, HP, WP = x.shape
    CO = w.shape[3]
    H, W = HP - 2, WP - 2
    rows = min(H, 512 // W)
    out = nl.ndarray((B, CO, H, W), dtype=x.dtype, buffer=nl.shared_hbm)
    wt = nl.ndarray((C, 9, CO), dtype=w.dtype, buffer=nl.sbuf)
    for kh in nl.affine_range(3):
        for kw in nl.affine_range(3):
            nisa.dma_copy(dst=wt[:, kh * 3 + kw, :], src=w[kh, kw])
    for b in nl.affine_range(B):
        xt = nl.load(x[b])
        for r in nl.affine_range(H // rows):
            acc = nl.ndarray((CO, rows, W), dtype=nl.float32, buffer=nl.psum)
            for kh in nl.affine_range(3):
                for kw in nl.affine_range(3):
                    nisa.nc_matmul(dst=acc, stationary=wt[:, kh * 3 + kw, :],
                                   moving=xt[:, r * rows + kh:r * rows + kh + rows, kw:kw + W])
            o = nl.ndarray((CO, rows, W), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=acc)
            nl.store(out[b, :, r * rows:(r + 1) * rows, :], o)
    return out


def _conv_reference(x, w):
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    B, _, HP, WP = x.shape
    out = np.zeros((B, w.shape[3], HP - 2, WP - 2), np.float32)
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("bihw,io->bohw", xf[:, :, kh:kh + HP - 2, kw:kw + WP - 2], wf[kh, kw])
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv3x3_computes_the_convolution(dtype, rng):
    """The kernel's values: a numpy convolution of the same inputs, summed in FP32."""
    import ml_dtypes
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    x = rng.standard_normal((1, 128, 34, 34)).astype(dt)
    w = (rng.standard_normal((3, 3, 128, 64)) / 30).astype(dt)
    got = conv3x3(x, w)
    np.testing.assert_allclose(got.astype(np.float32), _conv_reference(x, w), rtol=2e-2, atol=2e-2)


def _conv_floor(target, B, H, W, itemsize):
    """The documented critical path from the first transfer on: the weights and first image in (bytes at the DMA rate),
    every matmul at max(64, rows x W) cycles (rows x W = 512 here), the last tile's PSUM eviction (N VectorE cycles,
    FP32 in: no perf mode) and its store (DMA start ~1.3 us, then its bytes)."""
    d = DOC[target]
    rows = 512 // W
    matmuls = B * (H // rows) * 9
    tensor = matmuls * max(64, rows * W) / d["tensor"] + WARMUP_NS[target]
    first_in = (9 * 128 * 128 + 128 * (H + 2) * (W + 2)) * itemsize / d["dma"]
    last_out = 1300.0 + 128 * rows * W * itemsize / d["dma"]
    return first_in + tensor + rows * W / d["vector"] + last_out, tensor


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv3x3_runs_at_the_documented_tensor_engine_rate(target, dtype):
    """FP16 and BF16 take the same PE rate on both generations (92 / 79 TFLOPS per core: 1 MAC per PE per cycle), so
    a convolution of 128 channels over 64 x 64 pixels, 4 images, is TensorE-bound at its documented floor."""
    B, H, W = 4, 64, 64
    x, w = np.zeros((B, 128, H + 2, W + 2), dtype), np.zeros((3, 3, 128, 128), dtype)
    r = benchmark(conv3x3, x, w, target=target, timing_only=True)
    floor, tensor = _conv_floor(target, B, H, W, 2)
    assert r.bound.startswith("TensorE")
    assert r.active["TensorE"] == pytest.approx(tensor, rel=0.03)
    assert floor <= r.period <= 1.1 * floor, (r.period, floor)


# -- elementwise kernels: load -> compute -> store, tiled the usual way -----------------------------------------------
TILE = 2048  # elements per partition a tile: 4-8 KiB per partition, past the DMA guide's 2 KiB knee


@nki.jit
def elementwise(a, b, c, op="add"):
    """out = a + b, a * b, exp(a), a * b + c, a cast to the other float width, or a * g + h (`affine`: g and h the
    first [128, TILE] tiles of b and c, loaded once and kept), over [R, F] in [128, TILE] tiles."""
    R, F = a.shape
    out_dtype = (nl.bfloat16 if a.dtype == nl.float32 else nl.float32) if op == "cast" else a.dtype
    out = nl.ndarray((R, F), dtype=out_dtype, buffer=nl.shared_hbm)
    if op == "affine":
        g, h = nl.load(b[0:128, 0:TILE]), nl.load(c[0:128, 0:TILE])
    for i in nl.affine_range(R // 128):
        for j in nl.affine_range(F // TILE):
            rows, cols = slice(i * 128, (i + 1) * 128), slice(j * TILE, (j + 1) * TILE)
            x = nl.load(a[rows, cols])
            if op == "add":
                y = nl.add(x, nl.load(b[rows, cols]))
            elif op == "multiply":
                y = nl.multiply(x, nl.load(b[rows, cols]))
            elif op == "exp":
                y = nl.exp(x)
            elif op == "fma":
                y = nl.add(nl.multiply(x, nl.load(b[rows, cols])), nl.load(c[rows, cols]))
            elif op == "affine":
                y = nl.add(nl.multiply(x, g), h)
            else:
                y = nl.copy(x, dtype=out_dtype)
            nl.store(out[rows, cols], y)
    return out


_REFERENCE = {"add": lambda a, b, c: a + b, "multiply": lambda a, b, c: a * b, "exp": lambda a, b, c: np.exp(a),
              "fma": lambda a, b, c: a * b + c, "cast": lambda a, b, c: a,
              "affine": lambda a, b, c: a * np.tile(b[:128, :TILE], (2, 2)) + np.tile(c[:128, :TILE], (2, 2))}


@pytest.mark.parametrize("op", list(_REFERENCE))
def test_elementwise_kernels_compute_their_ops(op, rng):
    """Values at a small shape, against numpy in FP32 (BF16 in and out: one BF16 rounding per op)."""
    import ml_dtypes
    a, b, c = (rng.uniform(-1, 1, (256, 2 * TILE)).astype(ml_dtypes.bfloat16) for _ in range(3))
    got = elementwise(a, b, c, op=op)
    ref = _REFERENCE[op](*(v.astype(np.float32) for v in (a, b, c)))
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


# Per op: tensors moved (inputs + output, in units of the input's bytes) and, per element of a partition, the
# documented engine cycles on each generation for BF16 and FP32 inputs: (engine, {(target, dtype): cycles}).
_BF16_TT = {("trn1", "bfloat16"): 1.0, ("trn2", "bfloat16"): 0.5, ("trn1", "float32"): 2.0, ("trn2", "float32"): 2.0}
_WORK = {
    "add": (3, "vector", _BF16_TT),
    "multiply": (3, "vector", _BF16_TT),
    "fma": (4, "vector", {k: 2 * v for k, v in _BF16_TT.items()}),
    "affine": (2, "vector", {k: 2 * v for k, v in _BF16_TT.items()}),  # g and h stay in SBUF
    "exp": (2, "scalar", {k: 1.0 for k in _BF16_TT}),
    "cast": (None, None, {}),  # the copy may go to any of three engines: DMA-bound by any count
}


def _elementwise_floor(target, op, dtype, R, F):
    """(ns, engine) of the busiest resource by the documents: the DMA volume at the core's DMA rate, or the
    engine's cycles."""
    size = np.dtype(dtype).itemsize if dtype != "bfloat16" else 2
    tensors, engine, cycles = _WORK[op]
    moved = R * F * (size + (6 - size) if op == "cast" else tensors * size)  # cast: FP32 <-> BF16, 6 B an element
    if op == "affine":
        moved += 2 * 128 * TILE * size
    dma = moved / DOC[target]["dma"]
    compute = (R // 128) * F * cycles.get((target, dtype), 0.0) / DOC[target][engine] if engine else 0.0
    return (dma, "DMA") if dma >= compute else (compute, engine)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("op", list(_WORK))
def test_elementwise_kernels_run_at_their_documented_floor(target, dtype, op):
    """Over [1024, 8192]: trnsim lands at its documented floor and names the same bound. Most are DMA-bound; the
    affine one is VectorE-bound in FP32 on v3, and in BF16 only without tensor_tensor's BF16 fast path."""
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    a = np.zeros((1024, 8192), dt)
    r = benchmark(elementwise, a, a, a, op=op, target=target, timing_only=True)
    floor, bound = _elementwise_floor(target, op, dtype, 1024, 8192)
    assert floor <= r.period <= 1.15 * floor, (r.period, floor)
    assert r.bound.startswith({"DMA": "DMA", "vector": "VectorE", "scalar": "ScalarE"}[bound]), r.bound


# -- a course-style convolution: PyTorch layouts, weights transposed by nl.matmul inside the loops -----------------
@beta.jit
def conv_torch_layout(X, W):
    """out = conv2d(X, W), X [B, CI, H, W], W [CO, CI, FH, FW] as PyTorch holds them, beta API: each tap's weights
    W[:, :, i, j] are [CO, CI], so `nl.matmul(w, x)` transposes them on the PE array (and copies them out of PSUM)
    at every use, one output row a PSUM tile. The transposes do not change inside the image and row loops."""
    B, CI, H, Wd = X.shape
    CO, _, FH, FW = W.shape
    HO, WO = H - FH + 1, Wd - FW + 1
    out = bnl.ndarray((B, CO, HO, WO), dtype=X.dtype, buffer=bnl.shared_hbm)
    w = bnl.load(W)
    for b in bnl.affine_range(B):
        x = bnl.load(X[b])
        for r in bnl.affine_range(HO):
            res = bnl.zeros((CO, WO), bnl.float32, buffer=bnl.psum)
            for i in bnl.affine_range(FH):
                for j in bnl.affine_range(FW):
                    res += bnl.matmul(w[:, :, i, j], x[:, r + i, j:j + WO])
            bnl.store(out[b, :, r, :], value=bnl.copy(res, dtype=X.dtype))
    return out


def test_conv_in_torch_layout_computes_the_convolution(rng):
    """Its values: numpy's convolution of the same inputs (W read as [CO, CI, FH, FW])."""
    x = rng.standard_normal((1, 128, 10, 10)).astype(np.float16)
    w = (rng.standard_normal((64, 128, 3, 3)) / 30).astype(np.float16)
    got = conv_torch_layout(x, w)
    np.testing.assert_allclose(got.astype(np.float32), _conv_reference(x, w.transpose(2, 3, 1, 0)), rtol=2e-2,
                               atol=2e-2)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_weight_transposes_that_the_loops_repeat_are_hoisted(target):
    """Each tap's transpose and its copy out of PSUM read the same weights in every image and row: the compiler's
    loop-invariant code motion runs them once (core/hoist.py), so the convolution runs near its documented
    critical path: no less than TensorE's work (nine transposes of max(P, min(64, F)) = 128 cycles, every matmul
    at max(64, 32) cycles), no more than 1.2x that work in series with the weights and first image in and the
    last row's eviction and store (the compiler's scheduler overlaps some of those)."""
    B, H, W = 2, 34, 34
    x, w = np.zeros((B, 128, H, W), np.float16), np.zeros((128, 128, 3, 3), np.float16)
    r = benchmark(conv_torch_layout, x, w, target=target, timing_only=True)
    d = DOC[target]
    tensor = (9 * 128 + B * (H - 2) * 9 * 64) / d["tensor"] + WARMUP_NS[target]
    first_in = (128 * 128 * 9 + 128 * H * W) * 2 / d["dma"]
    serial = first_in + tensor + 64 / d["vector"] + 1300.0 + 128 * (W - 2) * 2 / d["dma"]
    hoisted = [rec for rec in conv_torch_layout.last_cores[0].stream if rec.hoisted is not None]
    assert len(hoisted) == 2 * 9 * (B * (H - 2) - 1)  # all but the first row's transposes and their copies
    assert r.bound.startswith("TensorE")
    assert tensor <= r.period <= 1.2 * serial, (r.period, tensor, serial)


def _transpose_chain(rewrite):
    """out[i] = w.T + x[i]: the transpose of w on the PE array and its copy out of PSUM in every iteration;
    `rewrite` adds 1 to w in place at the end of each, so both change."""
    @nki.jit
    def kernel(w, x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        wt = nl.load(w)
        for i in nl.affine_range(x.shape[0]):
            t = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=t, data=wt, engine=nisa.engine.tensor)
            c = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c, src=t)
            o = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=o, data1=c, data2=nl.load(x[i]), op=nl.add)
            nl.store(out[i], o)
            if rewrite:
                nisa.tensor_scalar(dst=wt, data=wt, op0=nl.add, operand0=1.0)
        return out
    return kernel


@pytest.mark.parametrize("rewrite", [False, True], ids=["invariant", "rewritten"])
def test_a_hoisted_transpose_hoists_the_copy_that_reads_it(rewrite, rng):
    """A transpose whose input the loop does not change runs once, and the copy of its result, which in later
    iterations reads the hoisted instances' PSUM tiles, is the first copy again and runs once too; when the loop
    rewrites the input neither is hoisted. Values are right either way."""
    w, x = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((4, 128, 128)).astype(np.float32)
    k = _transpose_chain(rewrite)
    got = k(w, x)
    np.testing.assert_allclose(got, np.stack([(w + i * rewrite).T + x[i] for i in range(4)]), rtol=1e-6, atol=1e-6)
    stream = k.last_cores[0].stream
    chain = [r for r in stream if r.op in (Op.NC_TRANSPOSE, Op.TENSOR_COPY)]
    assert len(chain) == 8
    hoisted = [r.hoisted for r in chain]
    assert hoisted == [None] * 8 if rewrite else hoisted == [None, None] + [chain[0].index, chain[1].index] * 3
