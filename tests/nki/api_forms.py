"""The conformance table: API functions of both generations and the parameter forms their references document
(dtypes per engine, scalar / vector / tile operands, 1- to 3-d free dims, engines), one row per form, each with
a numpy reference written here. `test_api_forms.py` runs every row; `benchmarks/api_coverage.py` counts the
functions and forms covered against the reference's name lists (tests/test_api_reference_names.py).

A row: (api, function, form, build, inputs, reference, tolerance). `build()` returns the kernel; `inputs(rng)`
the arguments; `reference(*inputs)` the expected output as float64 (or the exact integers).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16


class Form(NamedTuple):
    api: str  # "current" (nki) or "beta" (neuronxcc.nki)
    function: str  # as the reference names it: "isa.tensor_tensor", "language.add"
    form: str  # the parameter form, in words
    build: Callable
    inputs: Callable
    reference: Callable
    tol: float = 0.0  # relative and absolute tolerance; 0: exact


FREE = {1: (64,), 2: (8, 16), 3: (4, 4, 8)}  # free dims of each rank: 64 elements per partition
DTYPES = {"float32": np.float32, "bfloat16": BF16, "int32": np.int32}
TOL = {"float32": 1e-6, "bfloat16": 1e-2, "int32": 0.0}


def _data(dtype, rank, rng, P=32, positive=False, small=False):
    x = rng.standard_normal((P,) + FREE[rank])
    if positive:
        x = np.abs(x) + 0.5
    if dtype == "int32":
        x = rng.integers(-50 if not positive else 1, 50, (P,) + FREE[rank])
    elif small:
        x = x / 4
    return x.astype(DTYPES[dtype])


def _f64(x):
    return np.asarray(x).astype(np.float64)


# -- the current API ----------------------------------------------------------------------------------------------
def _current(body, out_dtype=None, shape_of=0):
    """A kernel loading every argument into SBUF, running `body(nisa, nl, dst, *tiles)`, storing dst."""
    def build():
        import trnsim.nki as nki
        import trnsim.nki.isa as nisa
        import trnsim.nki.language as nl

        @nki.jit
        def kernel(*xs):
            tiles = []
            for x in xs:
                t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x)
                tiles.append(t)
            shape = xs[shape_of].shape
            dt = out_dtype or xs[0].dtype
            dst = nl.ndarray(shape, dt, buffer=nl.sbuf)
            body(nisa, nl, dst, *tiles)
            out = nl.ndarray(shape, dt, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=dst)
            return out
        return kernel
    return build


ALU = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
       "minimum": np.minimum}
ACT = {"exp": np.exp, "tanh": np.tanh, "sqrt": np.sqrt, "square": np.square, "relu": lambda x: np.maximum(x, 0),
       "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "copy": lambda x: x}


def _rows() -> list[Form]:
    rows = []
    for op, fn in ALU.items():
        for dt in DTYPES:
            for rank in FREE:
                engines = ("vector", "gpsimd") if dt != "bfloat16" else ("vector",)
                for eng in engines:
                    rows.append(Form(
                        "current", "isa.tensor_tensor", f"op={op} {dt} {rank}-d free, engine={eng}",
                        _current(lambda nisa, nl, dst, a, b, op=op, eng=eng: nisa.tensor_tensor(
                            dst, a, b, getattr(nl, op), engine=getattr(nisa.engine, eng))),
                        lambda rng, dt=dt, rank=rank: (_data(dt, rank, rng), _data(dt, rank, rng)),
                        lambda a, b, fn=fn: fn(_f64(a), _f64(b)), TOL[dt]))
        for dt in ("float32", "bfloat16"):
            for operand in ("scalar", "vector"):
                rows.append(Form(
                    "current", "isa.tensor_scalar", f"op0={op} {dt} with a {operand} operand0",
                    _current((lambda nisa, nl, dst, a, op=op: nisa.tensor_scalar(dst, a, getattr(nl, op), 1.5))
                             if operand == "scalar" else
                             (lambda nisa, nl, dst, a, c, op=op: nisa.tensor_scalar(dst, a, getattr(nl, op), c))),
                    (lambda rng, dt=dt: (_data(dt, 2, rng),)) if operand == "scalar" else
                    (lambda rng, dt=dt: (_data(dt, 2, rng), _data("float32", 1, rng)[:, :1])),
                    (lambda a, fn=fn: fn(_f64(a), 1.5)) if operand == "scalar" else
                    (lambda a, c, fn=fn: fn(_f64(a), _f64(c)[:, :, None])), TOL[dt]))
    for name, fn in ACT.items():
        for dt in ("float32", "bfloat16"):
            for rank in FREE:
                rows.append(Form(
                    "current", "isa.activation", f"op={name} {dt} {rank}-d free",
                    _current(lambda nisa, nl, dst, a, name=name: nisa.activation(dst, getattr(nl, name), a)),
                    lambda rng, dt=dt, rank=rank, name=name: (_data(dt, rank, rng, positive=name == "sqrt",
                                                                    small=True),),
                    lambda a, fn=fn: fn(_f64(a)), max(TOL[dt], 1e-5)))
    for dt in DTYPES:
        for rank in FREE:
            for eng in ("vector", "gpsimd"):
                rows.append(Form(
                    "current", "isa.tensor_copy", f"{dt} {rank}-d free, engine={eng}",
                    _current(lambda nisa, nl, dst, a, eng=eng: nisa.tensor_copy(
                        dst, a, engine=getattr(nisa.engine, eng))),
                    lambda rng, dt=dt, rank=rank: (_data(dt, rank, rng),), lambda a: _f64(a)))
    for dt in ("float32", "bfloat16", "int32"):
        rows.append(Form(
            "current", "isa.memset", f"{dt} value",
            _current(lambda nisa, nl, dst, a: nisa.memset(dst, 3)),
            lambda rng, dt=dt: (_data(dt, 2, rng),), lambda a: np.full(a.shape, 3.0)))
    for op in ("add", "maximum"):
        for dt in ("float32", "bfloat16"):
            rows.append(Form(
                "current", "isa.tensor_reduce", f"op={op} {dt} over the last free axis",
                _current(lambda nisa, nl, dst, a, _z, op=op: nisa.tensor_reduce(dst, getattr(nl, op), a, axis=1),
                         out_dtype="float32", shape_of=1),
                lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((32, 1), np.float32)),
                lambda a, z, op=op: getattr(np, op).reduce(_f64(a), axis=1, keepdims=True), 2e-2))
    for dt in ("float32", "bfloat16"):
        rows.append(Form(
            "current", "isa.nc_matmul", f"{dt} stationary [K, M], moving [K, N] into PSUM",
            _matmul_current, lambda rng, dt=dt: (_data(dt, 1, rng, P=64)[:, :32], _data(dt, 1, rng, P=64)),
            lambda a, b: _f64(a).T @ _f64(b), 2e-2 if dt == "bfloat16" else 1e-4))
    rows += _language_rows() + _more_rows()
    return rows


def _kernel(api, body, out_shape, out_dtype=None):
    """A kernel of either API: `body(nl, nisa, *loaded)` gives the SBUF result stored into an HBM tensor of
    `out_shape(*args)` (in out_dtype, else the first argument's dtype)."""
    def build():
        if api == "beta":
            import trnsim.nki.legacy as nki
            import trnsim.nki.legacy.isa as nisa
            import trnsim.nki.legacy.language as nl
        else:
            import trnsim.nki as nki
            import trnsim.nki.isa as nisa
            import trnsim.nki.language as nl

        @nki.jit
        def kernel(*xs):
            out = nl.ndarray(out_shape(*xs), out_dtype or xs[0].dtype, buffer=nl.shared_hbm)
            nl.store(out, body(nl, nisa, *[nl.load(x) for x in xs]))
            return out
        return kernel
    return build


def _top8(x):
    return -np.sort(-_f64(x), axis=1)[:, :8]


def _more_rows() -> list[Form]:
    """Reductions, transposes and matmuls of the language in both APIs, and more single instructions."""
    rows = []
    reds = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}
    for api in ("current", "beta"):
        for name, fn in reds.items():
            for dt in ("float32", "bfloat16"):
                rows.append(Form(api, f"language.{name}", f"{dt} over free axis 1, keepdims", _kernel(
                    api, lambda nl, nisa, a, name=name: getattr(nl, name)(a, axis=1, keepdims=True),
                    lambda a: (a.shape[0], 1), "float32"),
                    lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a, fn=fn: fn(_f64(a), axis=1, keepdims=True),
                    5e-2 if dt == "bfloat16" else 1e-5))
        for dt in ("float32", "bfloat16"):
            rows.append(Form(api, "language.transpose", f"{dt} [32, 64] -> [64, 32]", _kernel(
                api, lambda nl, nisa, a: nl.copy(nl.transpose(a)), lambda a: (a.shape[1], a.shape[0])),
                lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a: _f64(a).T, 1e-2 if dt == "bfloat16" else 0.0))
            rows.append(Form(api, "language.matmul", f"{dt} transpose_x=True, [64, 32] x [64, 64]", _kernel(
                api, lambda nl, nisa, a, b: nl.copy(nl.matmul(a, b, transpose_x=True)),
                lambda a, b: (a.shape[1], b.shape[1]), "float32"),
                lambda rng, dt=dt: (_data(dt, 1, rng, P=64)[:, :32], _data(dt, 1, rng, P=64)),
                lambda a, b: _f64(a).T @ _f64(b), 2e-2 if dt == "bfloat16" else 1e-4))
    for dt in ("float32", "bfloat16"):
        rows.append(Form("current", "isa.reciprocal", f"{dt}", _current(
            lambda nisa, nl, dst, a: nisa.reciprocal(dst, a)),
            lambda rng, dt=dt: (_data(dt, 2, rng, positive=True),), lambda a: 1 / _f64(a), max(TOL[dt], 1e-6)))
        rows.append(Form("current", "isa.max8", f"{dt} 64 values per partition", _current(
            lambda nisa, nl, dst, a, _o: nisa.max8(dst, a), shape_of=1),
            lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((32, 8), DTYPES[dt])), lambda a, _o: _top8(a)))
        for op, fn in (("add", np.sum), ("maximum", np.max)):
            rows.append(Form("current", "isa.tensor_partition_reduce", f"op={op} {dt}", _current(
                lambda nisa, nl, dst, a, _o, op=op: nisa.tensor_partition_reduce(dst, getattr(nl, op), a),
                out_dtype="float32", shape_of=1),
                lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((1, 64), np.float32)),
                lambda a, _o, fn=fn: fn(_f64(a), axis=0, keepdims=True), 2e-2 if dt == "bfloat16" else 1e-5))
    for dt in ("int32", "float32"):
        rows.append(Form("current", "isa.iota", f"{dt} 1-d pattern, offset and channel multiplier", _current(
            lambda nisa, nl, dst, a: nisa.iota(dst, [[1, 64]], offset=3, channel_multiplier=2)),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: 3 + 2 * np.arange(32)[:, None] + np.arange(64)[None, :]))
        rows.append(Form("current", "isa.iota", f"{dt} 2-d pattern", _current(
            lambda nisa, nl, dst, a: nisa.iota(dst, [[-8, 4], [1, 16]], offset=100)),
            lambda rng, dt=dt: (np.zeros((32, 4, 16), DTYPES[dt]),),
            lambda a: np.broadcast_to(100 - 8 * np.arange(4)[:, None] + np.arange(16)[None, :], (32, 4, 16))))
    for dt in ("float32", "bfloat16"):
        rows.append(Form("current", "isa.nc_transpose", f"{dt} 32x32 on the vector engine", _current(
            lambda nisa, nl, dst, a: nisa.nc_transpose(dst, a, engine=nisa.engine.vector)),
            lambda rng, dt=dt: (_data(dt, 1, rng)[:, :32].copy(),), lambda a: _f64(a).T))
    return rows


UNARY = {"exp": np.exp, "tanh": np.tanh, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "square": np.square,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0), "abs": np.abs,
         "negative": np.negative, "log": np.log, "sin": np.sin, "cos": np.cos}


def _language_rows() -> list[Form]:
    """nki.language and neuronxcc.nki.language functions on loaded tiles, and the beta isa's tile-returning forms."""
    rows = []
    for api in ("current", "beta"):
        for op, fn in ALU.items():
            for dt in ("float32", "bfloat16"):
                rows.append(Form(api, f"language.{op}", f"{dt} tile op tile", _lang(api, op, 2),
                                 lambda rng, dt=dt: (_data(dt, 2, rng), _data(dt, 2, rng)),
                                 lambda a, b, fn=fn: fn(_f64(a), _f64(b)), TOL[dt]))
                rows.append(Form(api, f"language.{op}", f"{dt} tile op scalar", _lang(api, op, 1, 2.0),
                                 lambda rng, dt=dt: (_data(dt, 2, rng),), lambda a, fn=fn: fn(_f64(a), 2.0), TOL[dt]))
        for name, fn in UNARY.items():
            for dt in ("float32", "bfloat16"):
                for rank in (1, 2):
                    positive = name in ("sqrt", "rsqrt", "log")
                    rows.append(Form(api, f"language.{name}", f"{dt} {rank}-d free", _lang(api, name, 1),
                                     lambda rng, dt=dt, rank=rank, positive=positive: (
                                         _data(dt, rank, rng, positive=positive, small=True),),
                                     lambda a, fn=fn: fn(_f64(a)), max(TOL[dt], 2e-5)))
    for op, fn in ALU.items():
        for dt in ("float32", "bfloat16", "int32"):
            rows.append(Form("beta", "isa.tensor_tensor", f"op={op} {dt}", _beta_isa(
                lambda nisa, nl, a, b, op=op: nisa.tensor_tensor(a, b, getattr(np, op)), 2),
                lambda rng, dt=dt: (_data(dt, 2, rng), _data(dt, 2, rng)), lambda a, b, fn=fn: fn(_f64(a), _f64(b)),
                TOL[dt]))
        rows.append(Form("beta", "isa.tensor_scalar", f"op0={op} float32 scalar", _beta_isa(
            lambda nisa, nl, a, op=op: nisa.tensor_scalar(a, getattr(np, op), 1.5), 1),
            lambda rng: (_data("float32", 2, rng),), lambda a, fn=fn: fn(_f64(a), 1.5), 1e-6))
    for name, fn in ACT.items():
        rows.append(Form("beta", "isa.activation", f"op={name} float32", _beta_isa(
            lambda nisa, nl, a, name=name: nisa.activation(getattr(nl, name), a), 1),
            lambda rng, name=name: (_data("float32", 2, rng, positive=name == "sqrt", small=True),),
            lambda a, fn=fn: fn(_f64(a)), 1e-5))
    for dt in ("float32", "bfloat16", "int32"):
        rows.append(Form("beta", "isa.tensor_copy", f"{dt}", _beta_isa(lambda nisa, nl, a: nisa.tensor_copy(a), 1),
                         lambda rng, dt=dt: (_data(dt, 2, rng),), lambda a: _f64(a)))
        rows.append(Form("beta", "isa.memset", f"{dt} shape and value", _beta_isa(
            lambda nisa, nl, a: nisa.memset(a.shape, 3, a.dtype), 1),
            lambda rng, dt=dt: (_data(dt, 2, rng),), lambda a: np.full(a.shape, 3.0)))
    return rows


def _lang(api, name, n, scalar=None):
    """A kernel applying language function `name` to `n` loaded tiles (and `scalar`), storing the result."""
    def build():
        if api == "beta":
            import trnsim.nki.legacy as nki
            import trnsim.nki.legacy.language as nl
        else:
            import trnsim.nki as nki
            import trnsim.nki.language as nl

        @nki.jit
        def kernel(*xs):
            out = nl.ndarray(xs[0].shape, xs[0].dtype, buffer=nl.shared_hbm)
            args = [nl.load(x) for x in xs] + ([scalar] if scalar is not None else [])
            nl.store(out, getattr(nl, name)(*args))
            return out
        return kernel
    return build


def _beta_isa(body, n):
    """A beta kernel storing what `body(nisa, nl, *tiles)` returns."""
    def build():
        import trnsim.nki.legacy as nki
        import trnsim.nki.legacy.isa as nisa
        import trnsim.nki.legacy.language as nl

        @nki.jit
        def kernel(*xs):
            out = nl.ndarray(xs[0].shape, xs[0].dtype, buffer=nl.shared_hbm)
            nl.store(out, body(nisa, nl, *[nl.load(x) for x in xs[:n]]))
            return out
        return kernel
    return build


def _matmul_current():
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def kernel(a, b):
        at, bt = nl.ndarray(a.shape, a.dtype), nl.ndarray(b.shape, b.dtype)
        nisa.dma_copy(at, a)
        nisa.dma_copy(bt, b)
        ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)
        sb = nl.ndarray(ps.shape, nl.float32)
        nisa.tensor_copy(sb, ps)
        out = nl.ndarray(ps.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, sb)
        return out
    return kernel


FORMS: list[Form] = _rows()
