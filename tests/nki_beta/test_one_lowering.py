"""Every `nl.*` name both API generations have, run through each on the same inputs: the same instruction
stream (op, engine, operand regions), the same output bits and the same latency, since both front ends lower
through nki/lower.py; numpy references check the values where they are cheap to write."""
import math

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki_beta
import trnsim.nki.beta.language as nl_beta
from trnsim.core.timing import simulate, summarize

P, F = 64, 64
R = np.random.default_rng(7)
X = R.standard_normal((P, F)).astype(np.float32)
Y = R.standard_normal((P, F)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)
COL = R.standard_normal((P, 1)).astype(np.float32)
ROW = R.standard_normal((1, F)).astype(np.float32)
I = R.integers(-1000, 1000, (P, F)).astype(np.int32)
J = R.integers(0, 8, (P, F)).astype(np.int32)
SQ = R.standard_normal((P, P)).astype(np.float32)
BF = R.standard_normal((P, F)).astype(ml_dtypes.bfloat16)
IDX = R.integers(0, F, (P, 16)).astype(np.uint32)
COND = (R.random((P, F)) > 0.5).astype(np.float32)


def _erf(z):
    return np.vectorize(math.erf)(z.astype(np.float64))


def _rms(x, w, n, eps=1e-6):
    return x / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) / n + eps) * w


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal,
          "less": np.less, "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
          "abs_max": lambda a, b: np.where(np.abs(a) > np.abs(b), a, b), "abs_min": lambda a, b: np.where(np.abs(a) < np.abs(b), a, b),
          "fmod": np.fmod, "mod": np.mod, "power": None, "logical_and": np.logical_and, "logical_or": np.logical_or,
          "logical_xor": np.logical_xor}
INTEGER = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "left_shift": np.left_shift, "right_shift": np.right_shift}
UNARY = {"exp": np.exp, "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "arctan": np.arctan, "sign": np.sign,
         "abs": np.abs, "square": np.square, "relu": lambda x: np.maximum(x, 0), "negative": np.negative,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
         "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), "erf": _erf, "softplus": lambda x: np.log1p(np.exp(x)),
         "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "tan": None, "silu_dx": None, "gelu_dx": None,
         "gelu_apprx_tanh": None, "gelu_apprx_sigmoid": None, "mish": None, "erf_dx": None}
POSITIVE = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x}

# name -> (call(nl, a, b), inputs (a, b), numpy reference of (a, b) or None, rtol)
CASES = {}
for name, ref in BINARY.items():
    CASES[name] = (lambda nl, a, b, n=name: getattr(nl, n)(a, b), (POS if name == "power" else X, Y), ref, 1e-5)
    CASES[name + "[scalar]"] = (lambda nl, a, b, n=name: getattr(nl, n)(a, 0.75), (X, Y),
                                ref and (lambda a, b, r=ref: r(a, np.float32(0.75))), 1e-5)
    CASES[name + "[column]"] = (lambda nl, a, b, n=name: getattr(nl, n)(a, b), (X, COL),
                                ref and (lambda a, b, r=ref: r(a, b)), 1e-5)
CASES["add[row]"] = (lambda nl, a, b: nl.add(a, b), (X, ROW), np.add, 1e-5)
for name, ref in INTEGER.items():
    CASES[name] = (lambda nl, a, b, n=name: getattr(nl, n)(a, b), (I if "shift" not in name else np.abs(I), J), ref, 0)
CASES["invert"] = (lambda nl, a, b: nl.invert(a), (I, J), lambda a, b: np.invert(a), 0)
for name, ref in UNARY.items():
    CASES[name] = (lambda nl, a, b, n=name: getattr(nl, n)(a), (X, Y), ref and (lambda a, b, r=ref: r(a)), 2e-3)
for name, ref in POSITIVE.items():
    CASES[name] = (lambda nl, a, b, n=name: getattr(nl, n)(a), (POS, Y), lambda a, b, r=ref: r(a), 2e-3)
CASES.update({
    "logical_not": (lambda nl, a, b: nl.logical_not(a, dtype=nl.float32), (COND, Y), lambda a, b: 1 - a, 0),
    "sum": (lambda nl, a, b: nl.sum(a, axis=1, keepdims=True), (X, Y), lambda a, b: a.sum(1, keepdims=True), 1e-4),
    "max": (lambda nl, a, b: nl.max(a, axis=1, keepdims=True), (X, Y), lambda a, b: a.max(1, keepdims=True), 0),
    "min": (lambda nl, a, b: nl.min(a, axis=1, keepdims=True), (X, Y), lambda a, b: a.min(1, keepdims=True), 0),
    "prod": (lambda nl, a, b: nl.prod(a[:, 0:8], axis=1, keepdims=True), (X, Y),
             lambda a, b: a[:, 0:8].prod(1, keepdims=True), 1e-4),
    "mean": (lambda nl, a, b: nl.mean(a, axis=1, keepdims=True), (X, Y), lambda a, b: a.mean(1, keepdims=True), 1e-4),
    "var": (lambda nl, a, b: nl.var(a, axis=1), (X, Y), lambda a, b: a.var(1, keepdims=True), 1e-4),
    "all": (lambda nl, a, b: nl.all(a, axis=1, dtype=nl.float32), (COND, Y),
            lambda a, b: a.all(1).reshape(P, 1).astype(np.float32), 0),
    "softmax": (lambda nl, a, b: nl.softmax(a, axis=1), (X, Y),
                lambda a, b: np.exp(a - a.max(1, keepdims=True)) / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), 1e-4),
    "rms_norm": (lambda nl, a, b: nl.rms_norm(a, b, axis=1, n=F), (X, Y), lambda a, b: _rms(a, b, F), 1e-4),
    "rms_norm[row weight]": (lambda nl, a, b: nl.rms_norm(a, b, axis=1, n=F), (X, ROW), lambda a, b: _rms(a, b, F), 1e-4),
    "matmul": (lambda nl, a, b: nl.matmul(a, b[:, 0:32]), (SQ, Y), lambda a, b: a @ b[:, :32], 1e-4),
    "matmul[transpose_x]": (lambda nl, a, b: nl.matmul(a, b[:, 0:32], transpose_x=True), (SQ, Y),
                            lambda a, b: a.T @ b[:, :32], 1e-4),
    "matmul[mixed]": (lambda nl, a, b: nl.matmul(a, b[:, 0:32], transpose_x=True), (SQ, BF),
                      lambda a, b: a.T @ b[:, :32].astype(np.float32), 1e-4),
    "transpose": (lambda nl, a, b: nl.transpose(a), (SQ, Y), lambda a, b: a.T, 0),
    "copy": (lambda nl, a, b: nl.copy(a, dtype=nl.bfloat16), (X, Y), lambda a, b: a.astype(ml_dtypes.bfloat16), 0),
    "broadcast_to": (lambda nl, a, b: nl.broadcast_to(b, (P, F)), (X, ROW), lambda a, b: np.broadcast_to(b, (P, F)), 0),
    "expand_dims": (lambda nl, a, b: nl.multiply(nl.expand_dims(nl.sum(a, axis=1, keepdims=True), 2), 2.0), (X, Y),
                    lambda a, b: 2 * a.sum(1).reshape(P, 1, 1), 1e-4),
    "where": (lambda nl, a, b: nl.where(nl.greater(a, b), a, b), (X, Y), lambda a, b: np.where(a > b, a, b), 0),
    "gather_flattened": (lambda nl, a, b: nl.gather_flattened(a, b), (X, IDX),
                         lambda a, b: np.take_along_axis(a, b.astype(np.int64), 1), 0),
    "zeros": (lambda nl, a, b: nl.add(a, nl.zeros((P, F), nl.float32)), (X, Y), lambda a, b: a, 0),
    "ones": (lambda nl, a, b: nl.add(a, nl.ones((P, F), nl.float32)), (X, Y), lambda a, b: a + 1, 0),
    "full": (lambda nl, a, b: nl.add(a, nl.full((P, F), 3.0, nl.float32)), (X, Y), lambda a, b: a + 3, 0),
    "zeros_like": (lambda nl, a, b: nl.add(a, nl.zeros_like(a)), (X, Y), lambda a, b: a, 0),
    "empty_like": (lambda nl, a, b: nl.copy(a, dtype=nl.empty_like(a).dtype), (X, Y), lambda a, b: a, 0),
    "dropout": (lambda nl, a, b: nl.dropout(a, 0.0), (X, Y), lambda a, b: a, 0),
    "rand": (lambda nl, a, b: nl.add(a, nl.rand((P, F), dtype=nl.float32)), (X, Y), None, 0),
})
# names both generations have that are not ops on tiles: dtypes, buffers, loops, launch facts, creation without
# a computation of its own (exercised in every kernel here: ndarray, load, store, ds, tile_size) and printing
NOT_OPS = {"bfloat16", "bool_", "float16", "float32", "float8_e4m3", "float8_e5m2", "int16", "int32", "int8",
           "tfloat32", "uint16", "uint32", "uint8", "hbm", "private_hbm", "psum", "sbuf", "shared_hbm", "is_hbm",
           "is_on_chip", "is_psum", "is_sbuf", "tile_size", "affine_range", "sequential_range", "static_range", "ds",
           "num_programs", "program_id", "program_ndim", "ndarray", "load", "store", "device_print", "random_seed",
           "shared_constant", "shared_identity_matrix", "load_transpose2d"}


def test_the_table_covers_every_name_both_generations_have():
    both = set(nl_cur.__all__) & set(nl_beta.__all__)
    covered = {c.split("[")[0] for c in CASES} | NOT_OPS
    assert sorted(both - covered) == []


def _kernels(call):
    def body(nl, a, b):
        r = call(nl, nl.load(a), nl.load(b))
        shape = tuple(r.shape) if len(r.shape) >= 2 else (r.shape[0], 1)
        out = nl.ndarray(shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    def current(a, b):
        return body(nl_cur, a, b)

    def beta(a, b):
        return body(nl_beta, a, b)
    return nki_cur.jit(current), nki_beta.jit(beta)


def signature(nc) -> list:
    """The stream as (op, engine, operands), memories numbered by first use."""
    ids, rows = {}, []
    for rec in nc.stream:
        ops = []
        for name, r in sorted(rec.operands.items()):
            mem = ids.setdefault((r.space, r.memory), len(ids))
            ops.append((name, r.space, mem, r.partition, r.partitions, r.byte_lo, r.byte_hi, tuple(r.shape), r.dtype))
        rows.append((rec.op.value, rec.engine.value, tuple(ops)))
    return rows


def _latency(nc) -> float:
    return summarize("k", [simulate(nc.stream, nc.spec.target)], nc.spec).latency


TRN3_OPS = {"abs_max", "abs_min"}  # trn3 operators (NKI 0.4.0 release notes)


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_generations_lower_the_same(case, monkeypatch):
    if case.split("[")[0] in TRN3_OPS:
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    call, (a, b), ref, rtol = CASES[case]
    cur, beta = _kernels(call)
    out_cur, out_beta = cur(a.copy(), b.copy()), beta(a.copy(), b.copy())
    (nc_cur,), (nc_beta,) = cur.last_cores, beta.last_cores
    assert signature(nc_cur) == signature(nc_beta)
    assert out_cur.dtype == out_beta.dtype and out_cur.shape == out_beta.shape
    np.testing.assert_array_equal(out_cur.view(np.uint8), out_beta.view(np.uint8))
    assert _latency(nc_cur) == _latency(nc_beta) > 0
    if ref is not None:
        want = np.asarray(ref(a.astype(np.float32) if a.dtype != np.int32 else a,
                              b.astype(np.float32) if b.dtype.kind == "f" and b.dtype != np.float32 else b))
        got = out_cur.astype(np.float64) if out_cur.dtype.kind == "f" or want.dtype.kind == "f" else out_cur
        np.testing.assert_allclose(got.reshape(want.shape), want.astype(got.dtype), rtol=rtol, atol=rtol)


def test_rms_norm_is_four_compute_instructions_in_both():
    """The fused lowering (square with a running sum, scale and epsilon, rsqrt, both products) in both."""
    cur, beta = _kernels(lambda nl, a, b: nl.rms_norm(a, b, axis=1, n=F))
    cur(X, Y), beta(X, Y)
    for k in (cur, beta):
        assert [r.op.value for r in k.last_cores[0].stream if r.op.value not in ("dma_copy",)] == [
            "activation", "tensor_scalar", "activation", "scalar_tensor_tensor"]
