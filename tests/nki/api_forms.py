"""The conformance table: API functions of both generations and the parameter forms their references document
(dtypes per engine, scalar / vector / tile operands, 1- to 3-d free dims, engines, memory spaces, partition
offsets, masks, launches, the two cores of LNC 2), one row per form, each with a numpy reference written here.
`test_api_forms.py` runs every row; `benchmarks/api_coverage.py` counts the functions and forms covered against
the reference's name lists (tests/test_api_reference_names.py).

A row: (api, function, form, build, inputs, reference, tolerance). `build()` returns the kernel (or a function
around it); `inputs(rng)` the arguments; `reference(*inputs)` the expected output as float64 (or the exact
integers). Random numbers are checked through statistics computed here (mean, variance, range, the fraction
dropped), the same seed or restored state by the draws repeating.
"""
from __future__ import annotations

import math
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
    target: str = "trn2"  # the generation the form needs (exponential and activate2: trn3)


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
    rows += _language_rows() + _more_rows() + _elementwise_rows() + _isa_rows() + _creation_rows()
    return rows


def _kernel(api, body, out_shape, out_dtype=None):
    """A kernel of either API: `body(nl, nisa, *loaded)` gives the SBUF result stored into an HBM tensor of
    `out_shape(*args)` (in out_dtype, else the first argument's dtype)."""
    def build():
        if api == "beta":
            import trnsim.nki.beta as nki
            import trnsim.nki.beta.isa as nisa
            import trnsim.nki.beta.language as nl
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
            import trnsim.nki.beta as nki
            import trnsim.nki.beta.language as nl
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
        import trnsim.nki.beta as nki
        import trnsim.nki.beta.isa as nisa
        import trnsim.nki.beta.language as nl

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


# -- elementwise functions of the language (both APIs), with their references written out -----------------------
def _sig(x):
    return 1 / (1 + np.exp(-x))


_ERF = np.vectorize(math.erf)
_SOFTPLUS = lambda x: np.log1p(np.exp(x))  # noqa: E731
MATH = {  # name: (reference, inputs kind)
    "floor": (np.floor, "wide"), "ceil": (np.ceil, "wide"), "trunc": (np.trunc, "wide"), "sign": (np.sign, "wide"),
    "reciprocal": (lambda x: 1 / x, "positive"), "arctan": (np.arctan, "wide"), "tan": (np.tan, "small"),
    "erf": (_ERF, "small"), "erf_dx": (lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), "small"),
    "softplus": (_SOFTPLUS, "small"), "silu": (lambda x: x * _sig(x), "small"),
    "silu_dx": (lambda x: _sig(x) * (1 + x * (1 - _sig(x))), "small"),
    "gelu": (lambda x: 0.5 * x * (1 + _ERF(x / np.sqrt(2))), "small"),
    "gelu_dx": (lambda x: 0.5 * (1 + _ERF(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi), "small"),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), "small"),
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), "small"),
    "mish": (lambda x: x * np.tanh(_SOFTPLUS(x)), "small"), "copy": (lambda x: x, "wide"),
}
COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
           "greater": np.greater, "greater_equal": np.greater_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "left_shift": np.left_shift, "right_shift": np.right_shift}


def _math_input(kind, dt, rng):
    x = rng.standard_normal((32, 64)) * (4 if kind == "wide" else 1)
    if kind == "positive":
        x = np.abs(x) + 0.5
    elif kind == "small":
        x = x / 2
    return x.astype(DTYPES[dt])


def _small_ints(dt, rng, lo=-3, hi=4):
    """Few distinct values, so that equal elements and zeros come up."""
    return rng.integers(lo, hi, (32, 64)).astype(DTYPES[dt])


def _elementwise_rows() -> list[Form]:
    rows = []
    for api in ("current", "beta"):
        for name, (fn, kind) in MATH.items():
            for dt in ("float32", "bfloat16"):
                rows.append(Form(api, f"language.{name}", f"{dt} tile", _lang(api, name, 1),
                                 lambda rng, dt=dt, kind=kind: (_math_input(kind, dt, rng),),
                                 lambda a, fn=fn: fn(_f64(a)), 2e-2 if dt == "bfloat16" else 2e-5))
        for name, fn in COMPARE.items():
            for dt in ("float32", "int32"):
                rows.append(Form(api, f"language.{name}", f"{dt} tile op tile: 1 where true, else 0",
                                 _lang(api, name, 2), lambda rng, dt=dt: (_small_ints(dt, rng), _small_ints(dt, rng)),
                                 lambda a, b, fn=fn: fn(_f64(a), _f64(b)).astype(np.float64)))
            rows.append(Form(api, f"language.{name}", "float32 tile op scalar", _lang(api, name, 1, 1.0),
                             lambda rng: (_small_ints("float32", rng),),
                             lambda a, fn=fn: fn(_f64(a), 1.0).astype(np.float64)))
        for name, fn in LOGICAL.items():
            rows.append(Form(api, f"language.{name}", "float32 0/1 tiles", _lang(api, name, 2),
                             lambda rng: (_small_ints("float32", rng, 0, 2), _small_ints("float32", rng, 0, 2)),
                             lambda a, b, fn=fn: fn(a != 0, b != 0).astype(np.float64)))
        rows.append(Form(api, "language.logical_not", "float32 0/1 tile", _lang(api, "logical_not", 1),
                         lambda rng: (_small_ints("float32", rng, 0, 2),), lambda a: (a == 0).astype(np.float64)))
        for name, fn in BITWISE.items():
            shifts = "shift" in name
            rows.append(Form(api, f"language.{name}", "int32 tile op tile", _lang(api, name, 2),
                             lambda rng, shifts=shifts: (_small_ints("int32", rng, 0, 1000),
                                                         _small_ints("int32", rng, 0, 5 if shifts else 1000)),
                             lambda a, b, fn=fn: fn(a.astype(np.int64), b.astype(np.int64))))
        rows.append(Form(api, "language.invert", "int32 tile", _lang(api, "invert", 1),
                         lambda rng: (_small_ints("int32", rng, -1000, 1000),), lambda a: np.invert(a)))
        rows.append(Form(api, "language.power", "float32 positive base, tile exponent", _lang(api, "power", 2),
                         lambda rng: (_math_input("positive", "float32", rng), _math_input("small", "float32", rng)),
                         lambda a, b: np.power(_f64(a), _f64(b)), 1e-5))
        rows.append(Form(api, "language.divide", "float32 tile by tile", _lang(api, "divide", 2),
                         lambda rng: (_math_input("wide", "float32", rng), _math_input("positive", "float32", rng)),
                         lambda a, b: _f64(a) / _f64(b), 1e-6))
        for dt in ("float32", "bfloat16"):
            rows.append(Form(api, "language.prod", f"{dt} over free axis 1, keepdims", _kernel(
                api, lambda nl, nisa, a: nl.prod(a, axis=1, keepdims=True), lambda a: (a.shape[0], 1), "float32"),
                lambda rng, dt=dt: (rng.uniform(0.9, 1.1, (32, 64)).astype(DTYPES[dt]),),
                lambda a: np.prod(_f64(a), axis=1, keepdims=True), 2e-2 if dt == "bfloat16" else 1e-5))
        rows.append(Form(api, "language.var", "keepdims=False over free axes (1, 2) of a 3-d tile: dims kept all the "
                         "same", _kernel(api, lambda nl, nisa, a: nl.var(a, axis=(1, 2), keepdims=False),
                                         lambda a: (a.shape[0], 1, 1), "float32"),
                         lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),),
                         lambda a: np.var(_f64(a), axis=(1, 2))[:, None, None], 1e-5))
        rows.append(Form(api, "language.var", "float32 population variance over free axis 1", _kernel(
            api, lambda nl, nisa, a: nl.var(a, axis=1), lambda a: (a.shape[0], 1), "float32"),
            lambda rng: (_data("float32", 1, rng),), lambda a: np.var(_f64(a), axis=1, keepdims=True), 1e-5))
        rows.append(Form(api, "language.all", "float32 over free axis 1: 1 where no element is 0", _kernel(
            api, lambda nl, nisa, a: nl.all(a, axis=1), lambda a: (a.shape[0], 1), "uint8"),
            lambda rng: (np.where(rng.random((32, 8)) < 0.05, 0, 1).astype(np.float32),),
            lambda a: np.all(a != 0, axis=1, keepdims=True).astype(np.uint8)))
        rows.append(Form(api, "language.where", "float32 condition tile, two tiles", _lang(api, "where", 3),
                         lambda rng: (_small_ints("float32", rng, 0, 2), _data("float32", 1, rng),
                                      _data("float32", 1, rng)),
                         lambda c, a, b: np.where(c != 0, _f64(a), _f64(b))))
    return rows


def _scan(a, b, init, f0, f1):
    """r_i = (a_i op0 r_(i-1)) op1 b_i along each row, from `init`."""
    out, r = np.empty(a.shape), np.broadcast_to(init, (a.shape[0],)).astype(np.float64)
    for i in range(a.shape[1]):
        r = f1(f0(a[:, i], r), b[:, i])
        out[:, i] = r
    return out


def _flags(rng):
    """A uint8 predicate of 0s and 1s (predicates are integer tiles)."""
    return rng.integers(0, 2, (32, 64)).astype(np.uint8)


def _rows_of_distinct(rng, P=32, F=16):
    """Each row a permutation of F distinct values; the first 8 values of each row shuffled as vals."""
    data = np.stack([rng.permutation(F) for _ in range(P)]).astype(np.float32) * 1.5
    vals = np.stack([rng.permutation(row[:8]) for row in data]).astype(np.float32)
    return data, vals


def _bn_stats(a):
    """(count, mean, sum of squared deviations) of the even elements, then of the odd ones, per partition."""
    halves = (_f64(a)[:, 0::2], _f64(a)[:, 1::2])
    return np.stack([c for h in halves for c in (np.full(h.shape[0], float(h.shape[1])), h.mean(1),
                                                  ((h - h.mean(1, keepdims=True)) ** 2).sum(1))], 1)


def _find8(data, vals):
    return np.array([[list(d).index(v) for v in vs] for d, vs in zip(data, vals)], np.uint32)


def _replace8(data, vals, imm):
    out = _f64(data).copy()
    for r, vs in enumerate(vals):
        for v in vs:
            out[r, list(out[r]).index(v)] = imm
    return out


def _isa_rows() -> list[Form]:
    """Single instructions of the current nki.isa and of the beta one, each against its written reference."""
    rows = []
    add, mul = np.add, np.multiply
    for dt in ("float32", "bfloat16"):
        tol = 2e-2 if dt == "bfloat16" else 1e-5
        for (o0, f0), (o1, f1) in ((("multiply", mul), ("add", add)), (("add", add), ("maximum", np.maximum))):
            rows.append(Form("current", "isa.tensor_tensor_scan", f"op0={o0} op1={o1} {dt}, initial 0.5", _current(
                lambda nisa, nl, dst, a, b, o0=o0, o1=o1: nisa.tensor_tensor_scan(
                    dst, a, b, 0.5, getattr(nl, o0), getattr(nl, o1)), out_dtype="float32"),
                lambda rng, dt=dt: (_data(dt, 1, rng, small=True), _data(dt, 1, rng, small=True)),
                lambda a, b, f0=f0, f1=f1: _scan(_f64(a), _f64(b), 0.5, f0, f1), 1e-4 if dt == "float32" else 5e-2))
        for (o0, f0), (o1, f1) in ((("multiply", mul), ("add", add)), (("subtract", np.subtract), ("maximum", np.maximum))):
            rows.append(Form("current", "isa.scalar_tensor_tensor", f"(data {o0} 1.5) {o1} tile, {dt}", _current(
                lambda nisa, nl, dst, a, b, o0=o0, o1=o1: nisa.scalar_tensor_tensor(
                    dst, a, getattr(nl, o0), 1.5, getattr(nl, o1), b)),
                lambda rng, dt=dt: (_data(dt, 2, rng), _data(dt, 2, rng)),
                lambda a, b, f0=f0, f1=f1: f1(f0(_f64(a), 1.5), _f64(b)), tol))
            rows.append(Form("beta", "isa.scalar_tensor_tensor", f"(data {o0} 1.5) {o1} tile, {dt}", _kernel(
                "beta", lambda nl, nisa, a, b, f0=f0, f1=f1: nisa.scalar_tensor_tensor(
                    data=a, op0=f0, operand0=1.5, op1=f1, operand1=b), lambda a, b: a.shape),
                lambda rng, dt=dt: (_data(dt, 2, rng), _data(dt, 2, rng)),
                lambda a, b, f0=f0, f1=f1: f1(f0(_f64(a), 1.5), _f64(b)), tol))
        rows.append(Form("current", "isa.tensor_scalar_reduce", f"sum of (data + 1) into reduce_res, {dt}", _current(
            lambda nisa, nl, dst, a, _z: nisa.tensor_scalar_reduce(
                nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf), a, nl.add, 1.0, nl.add, reduce_res=dst),
            out_dtype="float32", shape_of=1),
            lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((32, 1), np.float32)),
            lambda a, _z: (_f64(a) + 1).sum(1, keepdims=True), 1e-4))
        rows.append(Form("current", "isa.activation_reduce", f"op=exp, sum into reduce_res, {dt}", _current(
            lambda nisa, nl, dst, a, _z: nisa.activation_reduce(
                nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf), nl.exp, a, nl.add, dst),
            out_dtype="float32", shape_of=1),
            lambda rng, dt=dt: (_data(dt, 1, rng, small=True), np.zeros((32, 1), np.float32)),
            lambda a, _z: np.exp(_f64(a)).sum(1, keepdims=True), 1e-5))
        rows.append(Form("current", "isa.exponential", f"exp(src - max_value 1.0), {dt}", _current(
            lambda nisa, nl, dst, a: nisa.exponential(dst, a, max_value=1.0), out_dtype="float32"),
            lambda rng, dt=dt: (_data(dt, 2, rng, small=True),), lambda a: np.exp(_f64(a) - 1.0), 1e-5, "trn3"))
        rows.append(Form("current", "isa.select_reduce", f"predicate tile, on_true and on_false tiles, {dt}",
                         _current(lambda nisa, nl, dst, c, a, b: nisa.select_reduce(dst, c, a, b), shape_of=1,
                                  out_dtype="float32"),
                         lambda rng, dt=dt: (_small_ints(dt, rng, 0, 2), _data(dt, 1, rng), _data(dt, 1, rng)),
                         lambda c, a, b: np.where(_f64(c) != 0, _f64(a), _f64(b))))
        rows.append(Form("current", "isa.tensor_copy_predicated", f"src where predicate, dst kept elsewhere, {dt}",
                         _current(lambda nisa, nl, dst, a, b, c: (nisa.tensor_copy(dst, b),
                                                                  nisa.tensor_copy_predicated(dst, a, c))),
                         lambda rng, dt=dt: (_data(dt, 1, rng), _data(dt, 1, rng), _flags(rng)),
                         lambda a, b, c: np.where(c != 0, _f64(a), _f64(b))))
        rows.append(Form("current", "isa.affine_select", f"keep p - f >= 0 (causal), else -9, {dt}", _current(
            lambda nisa, nl, dst, a: nisa.affine_select(dst, [[-1, 64]], 1, a, -9.0, cmp_op=nl.greater_equal)),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: np.where(np.arange(32)[:, None] - np.arange(64)[None, :] >= 0, _f64(a), -9.0)))
        rows.append(Form("current", "isa.range_select", f"keep 8 <= f < 40, else -5, {dt}", _current(
            lambda nisa, nl, dst, a: nisa.range_select(dst, a, nl.greater_equal, nl.less, 8.0, 40.0,
                                                       on_false_value=-5.0)),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: np.where((np.arange(64) >= 8) & (np.arange(64) < 40), _f64(a), -5.0)))
        rows.append(Form("current", "isa.bn_stats", f"(count, mean, M2) of the even and odd elements, {dt}", _current(
            lambda nisa, nl, dst, a, _z: nisa.bn_stats(dst, a), out_dtype="float32", shape_of=1),
            lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((32, 6), np.float32)), lambda a, _z: _bn_stats(a), 1e-4))
        rows.append(Form("current", "isa.bn_aggr", f"of bn_stats: mean and variance per partition, {dt}", _current(
            lambda nisa, nl, dst, a, _z: (nisa.bn_stats(st := nl.ndarray((32, 6), nl.float32, buffer=nl.sbuf), a),
                                          nisa.bn_aggr(dst, st)), out_dtype="float32", shape_of=1),
            lambda rng, dt=dt: (_data(dt, 1, rng), np.zeros((32, 2), np.float32)),
            lambda a, _z: np.stack([_f64(a).mean(1), _f64(a).var(1)], 1), 1e-5))
        rows.append(Form("beta", "isa.bn_aggr", f"of bn_stats: mean and variance per partition, {dt}", _kernel(
            "beta", lambda nl, nisa, a: nisa.bn_aggr(nisa.bn_stats(a)), lambda a: (a.shape[0], 2), "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: np.stack([_f64(a).mean(1), _f64(a).var(1)], 1), tol))
        rows.append(Form("beta", "isa.bn_stats", f"(count, mean, M2) of the even and odd elements, {dt}", _kernel(
            "beta", lambda nl, nisa, a: nisa.bn_stats(a), lambda a: (a.shape[0], 6), "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            _bn_stats, max(tol, 1e-4)))
        rows.append(Form("beta", "isa.nc_matmul", f"{dt} [64, 32] x [64, 64] into PSUM", _kernel(
            "beta", lambda nl, nisa, a, b: nl.copy(nisa.nc_matmul(a, b)), lambda a, b: (a.shape[1], b.shape[1]),
            "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng, P=64)[:, :32], _data(dt, 1, rng, P=64)),
            lambda a, b: _f64(a).T @ _f64(b), 2e-2 if dt == "bfloat16" else 1e-4))
        rows.append(Form("beta", "isa.nc_transpose", f"{dt} [32, 64] -> [64, 32]", _kernel(
            "beta", lambda nl, nisa, a: nl.copy(nisa.nc_transpose(a)), lambda a: (a.shape[1], a.shape[0])),
            lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a: _f64(a).T))
        for op, fn in (("add", np.sum), ("maximum", np.max)):
            rows.append(Form("beta", "isa.tensor_reduce", f"op={op} {dt} over free axis 1, keepdims", _kernel(
                "beta", lambda nl, nisa, a, fn=fn: nisa.tensor_reduce(getattr(np, "add" if fn is np.sum else "maximum"),
                                                                      a, axis=1, keepdims=True),
                lambda a: (a.shape[0], 1), "float32"),
                lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a, fn=fn: fn(_f64(a), axis=1, keepdims=True),
                2e-2 if dt == "bfloat16" else 1e-5))
            rows.append(Form("beta", "isa.tensor_partition_reduce", f"op={op} {dt} across partitions", _kernel(
                "beta", lambda nl, nisa, a, fn=fn: nisa.tensor_partition_reduce(
                    getattr(np, "add" if fn is np.sum else "maximum"), a), lambda a: (1, a.shape[1]), "float32"),
                lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a, fn=fn: fn(_f64(a), axis=0, keepdims=True),
                2e-2 if dt == "bfloat16" else 1e-5))
        rows.append(Form("beta", "isa.reciprocal", f"{dt}", _beta_isa(lambda nisa, nl, a: nisa.reciprocal(a), 1),
                         lambda rng, dt=dt: (_data(dt, 2, rng, positive=True),), lambda a: 1 / _f64(a),
                         max(TOL[dt], 1e-6)))
        rows.append(Form("beta", "isa.max8", f"{dt} 64 values per partition", _kernel(
            "beta", lambda nl, nisa, a: nisa.max8(src=a), lambda a: (a.shape[0], 8)),
            lambda rng, dt=dt: (_data(dt, 1, rng),), _top8))
        rows.append(Form("beta", "isa.tensor_tensor_scan", f"op0=multiply op1=add {dt}, initial 0.5", _kernel(
            "beta", lambda nl, nisa, a, b: nisa.tensor_tensor_scan(a, b, 0.5, np.multiply, np.add, dtype=nl.float32),
            lambda a, b: a.shape, "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng, small=True), _data(dt, 1, rng, small=True)),
            lambda a, b: _scan(_f64(a), _f64(b), 0.5, mul, add), 1e-4 if dt == "float32" else 5e-2))
        rows.append(Form("beta", "isa.affine_select", f"keep p - f >= 0 (causal), else -9, {dt}", _kernel(
            "beta", lambda nl, nisa, a: nisa.affine_select(
                pred=(nl.mgrid[0:32, 0:64][0] - nl.mgrid[0:32, 0:64][1] >= 0), on_true_tile=a, on_false_value=-9.0),
            lambda a: a.shape),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: np.where(np.arange(32)[:, None] - np.arange(64)[None, :] >= 0, _f64(a), -9.0)))
        rows.append(Form("beta", "isa.select_reduce", f"predicate tile, on_true and on_false tiles, {dt}", _kernel(
            "beta", lambda nl, nisa, c, a, b: nisa.select_reduce(
                dst=nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf), predicate=c, on_true=a, on_false=b),
            lambda c, a, b: a.shape),
            lambda rng, dt=dt: (_small_ints(dt, rng, 0, 2), _data(dt, 1, rng), _data(dt, 1, rng)),
            lambda c, a, b: np.where(_f64(c) != 0, _f64(a), _f64(b))))
        rows.append(Form("beta", "isa.tensor_copy_predicated", f"src where predicate, dst kept elsewhere, {dt}",
                         _kernel("beta", lambda nl, nisa, a, b, c: nisa.tensor_copy_predicated(
                             src=a, dst=nl.copy(b), predicate=c), lambda a, b, c: a.shape),
                         lambda rng, dt=dt: (_data(dt, 1, rng), _data(dt, 1, rng), _flags(rng)),
                         lambda a, b, c: np.where(c != 0, _f64(a), _f64(b))))
        rows.append(Form("beta", "isa.activation_reduce", f"op=exp, sum into reduce_res, {dt}", _kernel(
            "beta", lambda nl, nisa, a: (nisa.activation_reduce(
                op=nl.exp, data=a, reduce_op=np.add, reduce_res=(r := nl.ndarray((32, 1), nl.float32,
                                                                                  buffer=nl.sbuf))), r)[1],
            lambda a: (a.shape[0], 1), "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng, small=True),), lambda a: np.exp(_f64(a)).sum(1, keepdims=True), 1e-5))
    for api in ("current", "beta"):
        rows.append(Form(api, "isa.nc_find_index8", "float32 rows of distinct values, 8 of them looked up", _kernel(
            api, (lambda nl, nisa, d, v: _find8_current(nl, nisa, d, v)) if api == "current" else
            (lambda nl, nisa, d, v: nisa.nc_find_index8(data=d, vals=v, dtype=nl.uint32)),
            lambda d, v: v.shape, "uint32"),
            lambda rng: _rows_of_distinct(rng), _find8))
        rows.append(Form(api, "isa.nc_match_replace8", "float32: the 8 values replaced by -1", _kernel(
            api, (lambda nl, nisa, d, v: _replace8_current(nl, nisa, d, v)) if api == "current" else
            (lambda nl, nisa, d, v: nisa.nc_match_replace8(data=d, vals=v, imm=-1.0)), lambda d, v: d.shape),
            lambda rng: _rows_of_distinct(rng), lambda d, v: _replace8(d, v, -1.0)))
    for dt in ("float32", "bfloat16", "int32"):
        for rank in FREE:
            rows.append(Form("current", "isa.dma_copy", f"SBUF to SBUF, {dt} {rank}-d free", _current(
                lambda nisa, nl, dst, a: nisa.dma_copy(dst, a)),
                lambda rng, dt=dt, rank=rank: (_data(dt, rank, rng),), lambda a: _f64(a)))
        rows.append(Form("beta", "isa.dma_copy", f"SBUF to SBUF, {dt}", _kernel(
            "beta", lambda nl, nisa, a: (nisa.dma_copy(dst=(t := nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)), src=a),
                                         t)[1], lambda a: a.shape),
            lambda rng, dt=dt: (_data(dt, 2, rng),), lambda a: _f64(a)))
    mask = list(range(31, -1, -1))
    rows.append(Form("current", "isa.nc_stream_shuffle", "float32, partitions reversed within the quadrant", _current(
        lambda nisa, nl, dst, a: nisa.nc_stream_shuffle(dst, a, mask)),
        lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a)[mask]))
    rows.append(Form("beta", "isa.nc_stream_shuffle", "float32, partitions reversed within the quadrant", _kernel(
        "beta", lambda nl, nisa, a: nisa.nc_stream_shuffle(
            src=a, dst=(t := nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)), shuffle_mask=mask) or t,
        lambda a: a.shape),
        lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a)[mask]))
    rows.append(Form("current", "isa.register_load", "a 1x1 int32 into a register, stored back (register_store)",
                     _current(lambda nisa, nl, dst, a: (nisa.register_load(r := nisa.register_alloc(0), a),
                                                        nisa.register_store(dst, r))),
                     lambda rng: (np.array([[1234567]], np.int32),), lambda a: a.astype(np.int64)))
    rows.append(Form("current", "isa.register_move", "a register copied to another, stored", _current(
        lambda nisa, nl, dst, a: (nisa.register_load(r := nisa.register_alloc(0), a),
                                  nisa.register_move(r2 := nisa.register_alloc(5), r), nisa.register_store(dst, r2))),
        lambda rng: (np.array([[-42]], np.int32),), lambda a: a.astype(np.int64)))
    rows.append(Form("current", "isa.register_alloc", "an initial value, stored", _current(
        lambda nisa, nl, dst, a: nisa.register_store(dst, nisa.register_alloc(77))),
        lambda rng: (np.zeros((1, 1), np.int32),), lambda a: np.full((1, 1), 77)))
    return rows


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _blocks(nl, nisa, a, loop):
    """Block i of 4 column blocks of `a` times i, each block written by its own iteration of `loop`."""
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    for i in loop(4):
        nisa.tensor_scalar(t[:, i * 16:(i + 1) * 16], a[:, i * 16:(i + 1) * 16], nl.multiply, float(i))
    return t


def _sum4(nl, nisa, a, loop):
    """a added to itself 4 times in `loop`, each iteration reading what the last one wrote."""
    acc = nl.zeros(a.shape, nl.float32, buffer=nl.sbuf)
    for _ in loop(4):
        acc = nl.add(acc, a)
    return acc


def _creation_rows() -> list[Form]:
    """Tiles made by the language (zeros, ones, full, copies, broadcasts), softmax, mod, the loops, the launch
    queries, and more single instructions."""
    rows = []
    ramp = lambda a: np.broadcast_to(np.arange(4).repeat(16)[None, :], a.shape)  # noqa: E731 - block index per column
    for api in ("current", "beta"):
        made = {"zeros": (lambda nl, a: nl.zeros(a.shape, nl.float32, buffer=nl.sbuf), lambda a: np.zeros(a.shape)),
                "ones": (lambda nl, a: nl.ones(a.shape, nl.float32, buffer=nl.sbuf), lambda a: np.ones(a.shape)),
                "full": (lambda nl, a: nl.full(a.shape, 2.5, nl.float32, buffer=nl.sbuf),
                         lambda a: np.full(a.shape, 2.5)),
                "zeros_like": (lambda nl, a: nl.zeros_like(a), lambda a: np.zeros(a.shape)),
                "copy": (lambda nl, a: nl.copy(a), _f64),
                "softmax": (lambda nl, a: nl.softmax(a, axis=-1), lambda a: _softmax(_f64(a))),
                "broadcast_to": (lambda nl, a: nl.broadcast_to(a[:, 0:1], shape=a.shape),
                                 lambda a: np.broadcast_to(_f64(a)[:, :1], a.shape))}
        for name, (body, ref) in made.items():
            rows.append(Form(api, f"language.{name}", "float32 [32, 64] tile", _kernel(
                api, lambda nl, nisa, a, body=body: body(nl, a), lambda a: a.shape, "float32"),
                lambda rng: (_data("float32", 1, rng),), lambda a, ref=ref: ref(a), 1e-6))
        rows.append(Form(api, "language.expand_dims", "[32, 64] -> [32, 64, 1]", _kernel(
            api, lambda nl, nisa, a: nl.expand_dims(a, 2), lambda a: a.shape + (1,)),
            lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a)[:, :, None]))
        for name, fn in (("mod", np.mod), ("fmod", np.fmod)):
            rows.append(Form(api, f"language.{name}", "float32 tile by positive tile", _lang(api, name, 2),
                             lambda rng: (_math_input("wide", "float32", rng), _math_input("positive", "float32", rng)),
                             lambda a, b, fn=fn: fn(_f64(a), _f64(b)), 1e-5))
        rows.append(Form(api, "language.program_id", "and num_programs, in a launch without a grid", _kernel(
            api, lambda nl, nisa, a: nl.full(a.shape, float(nl.program_id(0) + 10 * nl.num_programs()), nl.float32,
                                             buffer=nl.sbuf), lambda a: a.shape, "float32"),
            lambda rng: (_data("float32", 1, rng),), lambda a: np.full(a.shape, 10.0)))
        rows.append(Form(api, "language.is_sbuf", "with is_psum, is_hbm and is_on_chip of each buffer", _kernel(
            api, lambda nl, nisa, a: nl.full(a.shape, float(
                nl.is_sbuf(nl.sbuf) + 2 * nl.is_psum(nl.sbuf) + 4 * nl.is_hbm(nl.shared_hbm)
                + 8 * nl.is_on_chip(nl.psum) + 16 * nl.is_on_chip(nl.hbm)), nl.float32, buffer=nl.sbuf),
            lambda a: a.shape, "float32"),
            lambda rng: (_data("float32", 1, rng),), lambda a: np.full(a.shape, 1.0 + 4 + 8)))
        for loop in ("sequential_range", "static_range"):
            rows.append(Form(api, f"language.{loop}", "4 iterations, each reading what the last one wrote", _kernel(
                api, lambda nl, nisa, a, loop=loop: _sum4(nl, nisa, a, getattr(nl, loop)), lambda a: a.shape,
                "float32"),
                lambda rng: (_data("float32", 1, rng),), lambda a: 4 * _f64(a), 1e-6))
    rows.append(Form("current", "language.affine_range", "4 independent iterations, one column block each", _kernel(
        "current", lambda nl, nisa, a: _blocks(nl, nisa, a, nl.affine_range), lambda a: a.shape, "float32"),
        lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a) * ramp(a), 1e-6))
    rows.append(Form("current", "isa.tensor_scalar_cumulative", "op0=multiply 1.0, op1=add: a running sum",
                     _current(lambda nisa, nl, dst, a: nisa.tensor_scalar_cumulative(dst, a, nl.multiply, nl.add, 1.0)),
                     lambda rng: (_data("float32", 1, rng),), lambda a: np.cumsum(_f64(a), axis=1), 1e-5))
    rows.append(Form("current", "isa.dma_transpose", "bfloat16 [16, 64] -> [64, 16]", _kernel(
        "current", lambda nl, nisa, a: (nisa.dma_transpose(t := nl.ndarray((a.shape[1], a.shape[0]), a.dtype,
                                                                            buffer=nl.sbuf), a), t)[1],
        lambda a: (a.shape[1], a.shape[0])),
        lambda rng: (_data("bfloat16", 1, rng, P=16),), lambda a: _f64(a).T))
    return rows


def _find8_current(nl, nisa, d, v):
    out = nl.ndarray(v.shape, nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(out, d, v)
    return out


def _replace8_current(nl, nisa, d, v):
    out = nl.ndarray(d.shape, d.dtype, buffer=nl.sbuf)
    nisa.nc_match_replace8(out, d, v, -1.0)
    return out


# -- the rest of both references: data movement, creation, random numbers, loops, launches, GpSimd and MX
# instructions, collectives, direct allocation ---------------------------------------------------------------------
def _modules(api):
    if api == "beta":
        import trnsim.nki.beta as nki
        import trnsim.nki.beta.isa as nisa
        import trnsim.nki.beta.language as nl
    else:
        import trnsim.nki as nki
        import trnsim.nki.isa as nisa
        import trnsim.nki.language as nl
    return nki, nisa, nl


def _raw(api, body, grid=None, post=None):
    """A kernel of either API whose `body(nl, nisa, *hbm_args)` returns its own HBM output(s); launched on
    `grid` (kernel[grid]); `post(out, *args)` (numpy, written here) turns what it returns into the value
    compared."""
    def build():
        nki, nisa, nl = _modules(api)

        @nki.jit
        def kernel(*xs):
            return body(nl, nisa, *xs)
        run = kernel if grid is None else kernel[grid]
        return run if post is None else (lambda *args: post(run(*args), *args))
    return build


def _out(nl, shape, dtype):
    return nl.ndarray(tuple(shape), dtype, buffer=nl.shared_hbm)


def _loaded(nl, x, dtype=None):
    """store(out, load(x)) of either API, out in `dtype` (default x's)."""
    out = _out(nl, x.shape, dtype or x.dtype)
    nl.store(out, nl.load(x))
    return out


def _uniform_stats(x):
    """mean, variance, min and max of values that should be uniform in [0, 1)."""
    v = _f64(x).reshape(-1)
    return np.array([v.mean(), v.var(), v.min(), v.max()])


UNIFORM = np.array([0.5, 1 / 12, 0.0, 1.0])  # what _uniform_stats gives of 2048 uniform draws, within 0.03


def _dropped(out, x, *_):
    """[fraction of zeros, count of kept elements that are not x's]."""
    out, x = _f64(out), _f64(x)
    return np.array([np.mean(out == 0), np.sum((out != 0) & (out != x))])


def _gelu_sig_dx(x):
    s = _sig(1.702 * x)
    return s + 1.702 * x * s * (1 - s)


def _rms(x, w, n):
    x = _f64(x)
    return x / np.sqrt((x * x).sum(1, keepdims=True) / n + 1e-6) * _f64(w)


def _both_language_rows() -> list[Form]:
    """Language functions both references list: data movement, creation, random tiles, rms_norm, gathers."""
    rows = []
    for api in ("current", "beta"):
        for dt in DTYPES:
            for rank in FREE:
                rows.append(Form(api, "language.load", f"{dt} {rank}-d free, stored back", _raw(
                    api, lambda nl, nisa, x: _loaded(nl, x)),
                    lambda rng, dt=dt, rank=rank: (_data(dt, rank, rng),), _f64))
        rows.append(Form(api, "language.load", "bfloat16 HBM with dtype=float32: a casting DMA", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape, nl.float32),
                                      nl.store(o, nl.load(x, dtype=nl.float32)))[0]),
            lambda rng: (_data("bfloat16", 1, rng),), _f64))
        rows.append(Form(api, "language.load", "a partition slice x[8:24] and a free slice x[:, 16:48]", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, (16, 32), x.dtype), nl.store(o, nl.load(x[8:24, 16:48])))[0]),
            lambda rng: (_data("float32", 1, rng),), lambda x: _f64(x)[8:24, 16:48]))
        rows.append(Form(api, "language.store", "two row blocks of one HBM tensor, each from its own tile", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, (64, 64), x.dtype), nl.store(o[0:32], nl.negative(nl.load(x))),
                                      nl.store(o[32:64], nl.load(x)))[0]),
            lambda rng: (_data("float32", 1, rng),), lambda x: np.concatenate([-_f64(x), _f64(x)])))
        rows.append(Form(api, "language.store", "float32 tile into a bfloat16 HBM tensor: a casting DMA", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape, nl.bfloat16), nl.store(o, nl.load(x)))[0]),
            lambda rng: (_data("float32", 1, rng),), lambda x: _f64(x.astype(BF16))))
        rows.append(Form(api, "language.store", "a PSUM tile (matmul result), by way of SBUF", _raw(
            api, lambda nl, nisa, a, b: (o := _out(nl, (a.shape[1], b.shape[1]), nl.float32),
                                         nl.store(o, nl.matmul(nl.load(a), nl.load(b), transpose_x=True)))[0]),
            lambda rng: (_data("float32", 1, rng, P=64)[:, :32], _data("float32", 1, rng, P=64)),
            lambda a, b: _f64(a).T @ _f64(b), 1e-4))
        for dt in ("float32", "bfloat16"):
            rows.append(Form(api, "language.load_transpose2d", f"{dt} HBM [32, 64] -> SBUF [64, 32]", _raw(
                api, lambda nl, nisa, x: (o := _out(nl, x.shape[::-1], x.dtype),
                                          nl.store(o, nl.load_transpose2d(x)))[0]),
                lambda rng, dt=dt: (_data(dt, 1, rng),), lambda x: _f64(x).T))
        for buf in ("sbuf", "psum"):
            rows.append(Form(api, "language.ndarray", f"float32 in {buf}, written by a copy", _kernel(
                api, lambda nl, nisa, a, buf=buf, api=api: _copy_into(api, nl, nisa, nl.ndarray(a.shape, nl.float32,
                                                                                   buffer=getattr(nl, buf)), a),
                lambda a: a.shape, "float32"),
                lambda rng: (_data("float32", 1, rng),), _f64))
        rows.append(Form(api, "language.ndarray", "int32 in shared_hbm, written by a DMA", _raw(
            api, lambda nl, nisa, x: (o := nl.ndarray(x.shape, nl.int32, buffer=nl.shared_hbm),
                                      nl.store(o, nl.load(x)))[0]),
            lambda rng: (_data("int32", 2, rng),), _f64))
        rows.append(Form(api, "language.empty_like", "of a tile, written by a copy", _kernel(
            api, lambda nl, nisa, a, api=api: _copy_into(api, nl, nisa, nl.empty_like(a), a), lambda a: a.shape),
            lambda rng: (_data("float32", 2, rng),), _f64))
        rows.append(Form(api, "language.empty_like", "dtype=float32 of a bfloat16 tile", _kernel(
            api, lambda nl, nisa, a, api=api: _copy_into(api, nl, nisa, nl.empty_like(a, dtype=nl.float32), a),
            lambda a: a.shape,
            "float32"),
            lambda rng: (_data("bfloat16", 1, rng),), _f64))
        rows.append(Form(api, "language.ds", "x[:, ds(16, 32)] and x[ds(8, 16), :] of a tile", _kernel(
            api, lambda nl, nisa, a: nl.copy(a[nl.ds(8, 16), :][:, nl.ds(16, 32)]), lambda a: (16, 32)),
            lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a)[8:24, 16:48]))
        rows.append(Form(api, "language.ds", "an HBM slice x[ds(0, 16), ds(32, 32)]", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, (16, 32), x.dtype),
                                      nl.store(o, nl.load(x[nl.ds(0, 16), nl.ds(32, 32)])))[0]),
            lambda rng: (_data("float32", 1, rng),), lambda x: _f64(x)[0:16, 32:64]))
        const = np.arange(64, dtype=np.float32).reshape(1, 64) / 8
        rows.append(Form(api, "language.shared_constant", "a [1, 64] numpy constant loaded and broadcast-added",
                         _kernel(api, lambda nl, nisa, a: nl.add(a, nl.broadcast_to(
                             nl.load(nl.shared_constant(const)), shape=a.shape)), lambda a: a.shape),
                         lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a) + const, 1e-6))
        for dt in ("uint8", "float32"):
            rows.append(Form(api, "language.shared_identity_matrix", f"32 x 32, {dt}", _raw(
                api, lambda nl, nisa, x, dt=dt, api=api: _identity(nl, api, 32, getattr(nl, dt))),
                lambda rng: (np.zeros(1, np.float32),), lambda x: np.eye(32)))
        for name, fn in (("abs_max", lambda a, b: np.where(np.abs(a) > np.abs(b), a, b)),  # signed; b on a tie
                         ("abs_min", lambda a, b: np.where(np.abs(a) < np.abs(b), a, b))):
            for dt in ("float32", "bfloat16"):  # trn3 operators (NKI 0.4.0 release notes)
                rows.append(Form(api, f"language.{name}", f"{dt} tile op tile", _lang(api, name, 2),
                                 lambda rng, dt=dt: (_data(dt, 2, rng), _data(dt, 2, rng)),
                                 lambda a, b, fn=fn: fn(_f64(a), _f64(b)), 0.0, "trn3"))
            rows.append(Form(api, f"language.{name}", "float32 tile op scalar", _lang(api, name, 1, -0.5),
                             lambda rng: (_data("float32", 2, rng),), lambda a, fn=fn: fn(_f64(a), -0.5), 0.0, "trn3"))
            rows.append(Form(api, f"language.{name}", "float32 tile op a [P, 1] column, many ties (which give y)",
                             _lang(api, name, 2), lambda rng: (_small_ints("float32", rng, -2, 3),
                                                               rng.integers(-2, 3, (32, 1)).astype(np.float32)),
                             lambda a, b, fn=fn: fn(_f64(a), _f64(b)), 0.0, "trn3"))
        for dt in ("float32", "bfloat16") if api == "current" else ():  # a current-API name only
            rows.append(Form(api, "language.gelu_apprx_sigmoid_dx", f"{dt} tile",
                             _lang(api, "gelu_apprx_sigmoid_dx", 1),
                             lambda rng, dt=dt: (_math_input("small", dt, rng),),
                             lambda a: _gelu_sig_dx(_f64(a)), 2e-2 if dt == "bfloat16" else 2e-5))
        for wshape, what in (((32, 64), "a full weight tile"), ((1, 64), "a [1, F] weight row")):
            rows.append(Form(api, "language.rms_norm", f"float32 over free axis 1, n=64, {what}", _kernel(
                api, lambda nl, nisa, x, w: nl.rms_norm(x, w, axis=1, n=64), lambda x, w: x.shape),
                lambda rng, wshape=wshape: (_data("float32", 1, rng), rng.standard_normal(wshape).astype(np.float32)),
                lambda x, w: _rms(x, w, 64), 1e-4))
        rows.append(Form(api, "language.gather_flattened", "float32 [32, 64] data, uint32 [32, 16] indices", _kernel(
            api, lambda nl, nisa, d, i: nl.gather_flattened(d, i), lambda d, i: i.shape, "float32"),
            lambda rng: (_data("float32", 1, rng), rng.integers(0, 64, (32, 16)).astype(np.uint32)),
            lambda d, i: np.take_along_axis(_f64(d), i.astype(np.int64), 1)))
        rows.append(Form(api, "language.gather_flattened", "float32 [32, 4, 16] data: the free dims flattened",
                         _kernel(api, lambda nl, nisa, d, i: nl.gather_flattened(d, i), lambda d, i: i.shape,
                                 "float32"),
                         lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),
                                      rng.integers(0, 64, (32, 8)).astype(np.uint32)),
                         lambda d, i: np.take_along_axis(_f64(d).reshape(32, -1), i.astype(np.int64), 1)))
        rows.append(Form(api, "language.rand", "float32 [32, 64]: uniform in [0, 1)", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape, nl.float32), nl.store(o, nl.rand(x.shape, nl.float32)))[0],
            post=lambda out, x: _uniform_stats(out)),
            lambda rng: (np.zeros((32, 64), np.float32),), lambda x: UNIFORM, 0.03))
        rows.append(Form(api, "language.random_seed", "the same seed twice: the same draws (their difference 0)",
                         _raw(api, lambda nl, nisa, s: _reseeded(nl, s)),
                         lambda rng: (np.array([[1234]], np.int32),), lambda s: np.zeros((32, 64))))
        for rate in (0.0, 1.0):
            rows.append(Form(api, "language.dropout", f"rate={rate}: every element {'kept' if rate == 0 else 'zeroed'}",
                             _kernel(api, lambda nl, nisa, a, rate=rate: nl.dropout(a, rate), lambda a: a.shape),
                             lambda rng: (_data("float32", 1, rng, positive=True),),
                             lambda a, rate=rate: _f64(a) * (1 - rate)))
        rows.append(Form(api, "language.dropout", "rate=0.5: about half zeroed, the rest kept as they were", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), nl.store(o, nl.dropout(nl.load(x), 0.5)))[0],
            post=_dropped),
            lambda rng: (_data("float32", 1, rng, positive=True),), lambda x: np.array([0.5, 0.0]), 0.06))
    return rows


def _copy_into(api, nl, nisa, t, a):
    """`a` copied into the tile `t`; an SBUF copy of t returned."""
    if api == "beta":
        t[...] = nl.copy(a, dtype=t.dtype)
    else:
        nisa.tensor_copy(t, a)
    return nl.copy(t)


def _identity(nl, api, n, dtype):
    out = _out(nl, (n, n), dtype)
    m = nl.shared_identity_matrix(n, dtype=dtype)
    nl.store(out, nl.load(m) if api == "beta" else m)
    return out


def _reseeded(nl, s):
    out = _out(nl, (32, 64), nl.float32)
    seed = nl.load(s)
    nl.random_seed(seed)
    a = nl.rand((32, 64), nl.float32)
    nl.random_seed(seed)
    b = nl.rand((32, 64), nl.float32)
    nl.store(out, nl.subtract(a, b))
    return out


def _printed(api, prefix):
    """A kernel device_printing its loaded input; it returns [1.0] when what it printed first is the prefix
    and the values as numpy prints them, else [0.0]."""
    def build():
        import contextlib
        import io
        kernel = _raw(api, lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), t := nl.load(x),
                                                nl.device_print(prefix, t), nl.store(o, t))[0])()

        def run(x):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                kernel(x)
            return np.array([float(text.getvalue().startswith(f"{prefix} {x}\n"))])  # a replay may print again
        return run
    return build


def _count_down(nl, nisa, n, x):
    """x added once per round of a while_loop on a register counting down from n (kept in a tile)."""
    out = _out(nl, x.shape, x.dtype)
    t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(t, n)
    r = nisa.register_alloc(0)
    nisa.register_load(r, t)
    acc, xt = nl.zeros(x.shape, nl.float32, buffer=nl.sbuf), nl.load(x)

    def body(reg):
        nisa.tensor_tensor(acc, acc, xt, nl.add)
        nisa.tensor_scalar(t, t, nl.add, -1)
        nisa.register_load(reg, t)
        return reg
    nl.while_loop(r, body)
    nl.store(out, acc)
    return out


def _fori(nl, nisa, n, x, bound):
    out = _out(nl, x.shape, x.dtype)
    acc, xt = nl.zeros(x.shape, nl.float32, buffer=nl.sbuf), nl.load(x)
    if bound == "register":
        r = nisa.register_alloc(0)
        nisa.register_load(r, nl.load(n))
        hi = r
    else:
        hi = 3
    nl.fori_loop(0, hi, lambda i: nisa.tensor_tensor(acc, acc, xt, nl.add))
    nl.store(out, acc)
    return out


def _dynamic(nl, nisa, n, x):
    out = _out(nl, x.shape, x.dtype)
    acc, xt = nl.zeros(x.shape, nl.float32, buffer=nl.sbuf), nl.load(x)
    r = nisa.register_alloc(0)
    nisa.register_load(r, nl.load(n))
    for _ in nl.dynamic_range(0, r):
        nisa.tensor_tensor(acc, acc, xt, nl.add)
    nl.store(out, acc)
    return out


def _per_program(nl, x):
    """Program (i, j) of the launch writes x[i, j] * (1 + 10 * num_programs(axis) + 100 * program_ndim())."""
    nd = nl.program_ndim()
    ids = [nl.program_id(a) for a in range(max(nd, 1))]
    out = _out(nl, x.shape, x.dtype)
    scale = 1 + sum(10 ** (a + 1) * nl.num_programs(a) for a in range(nd)) + 1000 * nd
    nl.store(out[tuple(ids)], nl.multiply(nl.load(x[tuple(ids)]), float(scale)))
    return out


def _grid_scale(x, grid):
    return _f64(x) * (1 + sum(10 ** (a + 1) * g for a, g in enumerate(grid)) + 1000 * len(grid))


def _control_rows() -> list[Form]:
    """Loops with runtime bounds, buffer queries, device_print, no_reorder and the launch-grid queries."""
    rows = []
    count = lambda rng: (np.array([[3]], np.int32), _data("float32", 1, rng))  # noqa: E731
    rows.append(Form("current", "language.dynamic_range", "a register upper bound read from HBM (0.6 name)", _raw(
        "current", _dynamic), count, lambda n, x: 3 * _f64(x), 1e-6))
    for bound in ("int", "register"):
        rows.append(Form("current", "language.fori_loop", f"0 to 3 with an {bound} bound, body adding x", _raw(
            "current", lambda nl, nisa, n, x, bound=bound: _fori(nl, nisa, n, x, bound)), count,
            lambda n, x: 3 * _f64(x), 1e-6))
    rows.append(Form("current", "language.while_loop", "on a register counting down from 3", _raw(
        "current", _count_down), count, lambda n, x: 3 * _f64(x), 1e-6))
    queries = {"is_psum": ("psum", "sbuf"), "is_hbm": ("shared_hbm", "psum"), "is_on_chip": ("sbuf", "shared_hbm")}
    for name, (yes, no) in queries.items():
        rows.append(Form("current", f"language.{name}", f"true of {yes}, false of {no}", _kernel(
            "current", lambda nl, nisa, a, name=name, yes=yes, no=no: nl.full(a.shape, float(
                getattr(nl, name)(getattr(nl, yes)) + 2 * getattr(nl, name)(getattr(nl, no))), nl.float32,
                buffer=nl.sbuf), lambda a: a.shape, "float32"),
            lambda rng: (_data("float32", 1, rng),), lambda a: np.ones(a.shape)))
    rows.append(Form("current", "language.no_reorder", "a block of two dependent instructions", _kernel(
        "current", lambda nl, nisa, a: _in_order(nl, nisa, a), lambda a: a.shape, "float32"),
        lambda rng: (_data("float32", 1, rng),), lambda a: (_f64(a) + 1) * 2, 1e-6))
    for api in ("current", "beta"):
        rows.append(Form(api, "language.device_print", "a [2, 3] tile: the prefix and the values", _printed(
            api, "x ="), lambda rng: (np.arange(6, dtype=np.float32).reshape(2, 3),), lambda x: np.ones(1)))
    rows.append(Form("current", "language.num_programs", "kernel[2]: 2 programs, program_ndim 1", _raw(
        "current", lambda nl, nisa, x: _per_program(nl, x), grid=2),
        lambda rng: (_data("float32", 1, rng)[:2].reshape(2, 1, 64).copy(),), lambda x: _grid_scale(x, (2,)), 1e-6))
    rows.append(Form("current", "language.program_ndim", "0 in a launch without a grid", _kernel(
        "current", lambda nl, nisa, a: nl.full(a.shape, float(nl.program_ndim()), nl.float32, buffer=nl.sbuf),
        lambda a: a.shape, "float32"), lambda rng: (_data("float32", 1, rng),), lambda a: np.zeros(a.shape)))
    for grid in ((4,), (2, 3)):
        for name in ("num_programs", "program_ndim"):
            rows.append(Form("beta", f"language.{name}", f"a {list(grid)} launch grid", _raw(
                "beta", lambda nl, nisa, x: _per_program(nl, x), grid=grid),
                lambda rng, grid=grid: (rng.standard_normal(grid + (4, 8)).astype(np.float32),),
                lambda x, grid=grid: _grid_scale(x, grid), 1e-6))
    return rows


def _in_order(nl, nisa, a):
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    with nl.no_reorder():
        nisa.tensor_scalar(t, a, nl.add, 1.0)
        nisa.tensor_scalar(t, t, nl.multiply, 2.0)
    return t


def _beta_index_rows() -> list[Form]:
    """Beta-only names: index grids, atomic_rmw, the grid's all_reduce, affine_range and loop_reduce."""
    rows = []
    rows.append(Form("beta", "language.arange", "x[i_p, i_f] with i_p = arange(32)[:, None], i_f = arange(64)[None, :]",
                     _raw("beta", lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), nl.store(
                         o, nl.load(x[nl.arange(32)[:, None], nl.arange(64)[None, :]])))[0]),
                     lambda rng: (_data("float32", 1, rng),), _f64))
    rows.append(Form("beta", "language.arange", "an affine index: x[i_p, 2 * i_f + 1], the odd columns", _raw(
        "beta", lambda nl, nisa, x: (o := _out(nl, (32, 32), x.dtype), nl.store(
            o, nl.load(x[nl.arange(32)[:, None], 2 * nl.arange(32)[None, :] + 1])))[0]),
        lambda rng: (_data("float32", 1, rng),), lambda x: _f64(x)[:, 1::2]))
    rows.append(Form("beta", "language.mgrid", "i = mgrid[0:32, 0:64]; x[i.p, i.x]", _raw(
        "beta", lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), i := nl.mgrid[0:32, 0:64],
                                     nl.store(o[i.p, i.x], nl.load(x[i.p, i.x])))[0]),
        lambda rng: (_data("float32", 1, rng),), _f64))
    rows.append(Form("beta", "language.mgrid", "3-d: mgrid[0:32, 0:4, 0:16] indexing a [32, 4, 16] tensor", _raw(
        "beta", lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), i := nl.mgrid[0:32, 0:4, 0:16],
                                     nl.store(o[i.p, i.x, i.y], nl.load(x[i.p, i.x, i.y])))[0]),
        lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),), _f64))
    rows.append(Form("beta", "language.atomic_rmw", "op=np.add of a tile into a whole HBM tensor", _raw(
        "beta", lambda nl, nisa, x, y: (o := _loaded(nl, x), nl.atomic_rmw(o, value=nl.load(y), op=np.add))[0]),
        lambda rng: (_data("float32", 1, rng), _data("float32", 1, rng)), lambda x, y: _f64(x) + _f64(y), 1e-6))
    rows.append(Form("beta", "language.atomic_rmw", "rows named by an index tile, one row named twice", _raw(
        "beta", lambda nl, nisa, t, ids, r: (o := _loaded(nl, t), nl.atomic_rmw(
            o[nl.load(ids), nl.arange(8)[None, :]], value=nl.load(r), op=np.add))[0]),
        lambda rng: (_data("float32", 1, rng)[:, :8].copy(), np.array([[3], [5], [3], [0]], np.int32),
                     rng.standard_normal((4, 8)).astype(np.float32)),
        lambda t, ids, r: _f64(t) + np.array([_f64(r)[ids[:, 0] == k].sum(0) for k in range(32)]), 1e-6))
    rows.append(Form("beta", "language.all_reduce", "op=np.add over a [4] grid: every program gets the sum", _raw(
        "beta", lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), i := nl.program_id(0), nl.store(
            o[i], nl.all_reduce(nl.load(x[i]), op=np.add, program_axes=0)))[0], grid=4),
        lambda rng: (rng.standard_normal((4, 8, 16)).astype(np.float32),),
        lambda x: np.broadcast_to(_f64(x).sum(0), x.shape), 1e-6))
    rows.append(Form("beta", "language.all_reduce", "op=np.maximum over axis 1 of a [2, 2] grid", _raw(
        "beta", lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), i := (nl.program_id(0), nl.program_id(1)),
                                     nl.store(o[i], nl.all_reduce(nl.load(x[i]), op=np.maximum, program_axes=[1])))[0],
        grid=(2, 2)),
        lambda rng: (rng.standard_normal((2, 2, 8, 16)).astype(np.float32),),
        lambda x: np.broadcast_to(_f64(x).max(1, keepdims=True), x.shape)))
    rows.append(Form("beta", "language.affine_range", "4 independent iterations, one column block each", _kernel(
        "beta", lambda nl, nisa, a: _beta_blocks(nl, a), lambda a: a.shape, "float32"),
        lambda rng: (_data("float32", 1, rng),),
        lambda a: _f64(a) * np.broadcast_to(np.arange(4).repeat(16)[None, :], a.shape), 1e-6))
    for op, fn in (("add", np.sum), ("maximum", np.max)):
        rows.append(Form("beta", "language.loop_reduce", f"op=np.{op} over the 4 iterations of an affine_range",
                         _kernel("beta", lambda nl, nisa, a, op=op: _loop_reduced(nl, a, getattr(np, op)),
                                 lambda a: (a.shape[0], 16), "float32"),
                         lambda rng: (_data("float32", 1, rng),),
                         lambda a, fn=fn: fn(_f64(a).reshape(32, 4, 16), axis=1), 1e-6))
    return rows


def _beta_blocks(nl, a):
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        t[:, i * 16:(i + 1) * 16] = nl.multiply(a[:, i * 16:(i + 1) * 16], i)
    return t


def _loop_reduced(nl, a, op):
    """dst[...] = loop_reduce(x, op, [i]) is dst = op(dst, x) in each iteration: dst starts at op's identity."""
    acc = nl.full((a.shape[0], 16), 0.0 if op is np.add else -1e30, nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        acc[...] = nl.loop_reduce(a[:, i * 16:(i + 1) * 16], op=op, loop_indices=[i])
    return acc


def _bits_uniform(bits, *_):
    """_uniform_stats of random unsigned integers scaled by their range."""
    b = np.asarray(bits)
    return _uniform_stats(b.view(f"u{b.dtype.itemsize}").astype(np.float64) / 2.0 ** (8 * b.dtype.itemsize))


def _draws(nl, nisa, x, make):
    """`make(nl, nisa, tile)` fills SBUF tiles of x's shape and dtype; each is stored into its own output."""
    outs = []
    for t in make(nl, nisa, lambda: nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)):
        o = _out(nl, x.shape, x.dtype)
        nl.store(o, t)
        outs.append(o)
    return tuple(outs)


def _same_draws(outs, *_):
    """[1 when the two draws are equal, 1 when the first has many distinct values]."""
    a, b = (np.asarray(o) for o in outs)
    return np.array([float(np.array_equal(a, b)), float(np.unique(a).size > a.size // 2)])


def _seeded(nl, nisa, new, s):
    seed = nl.load(s)
    a = new()
    nisa.set_rng_seed(seed)
    nisa.rng(a)
    b = new()
    nisa.set_rng_seed(seed)
    nisa.rng(b)
    return a, b


def _state_resumed(nl, nisa, new):
    st = nl.ndarray((32, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(st)
    a = new()
    nisa.rng(a, engine=nisa.engine.gpsimd)
    nisa.rand_set_state(st)
    b = new()
    nisa.rng(b, engine=nisa.engine.gpsimd)
    return a, b


def _bounds(ids):
    """[start, end) of the run of equal ids each element is in; id 0 (padding) gets [n, -1]."""
    ids = _f64(ids).reshape(-1)
    n = ids.size
    out = np.empty((2, n))
    for i, v in enumerate(ids):
        if v == 0:
            out[:, i] = (n, -1)
            continue
        s = i
        while s > 0 and ids[s - 1] == v:
            s -= 1
        e = i + 1
        while e < n and ids[e] == v:
            e += 1
        out[:, i] = (s, e)
    return out[None]


def _local_gather(src, index, k, n):
    """Per 16-partition GpSimd core: the core's indices in partition-first order, the first n of them, each
    taking k consecutive elements of every partition of the core."""
    out = []
    for c in range(0, src.shape[0], 16):
        picks = index[c:c + 16].flatten(order="F")[:n].astype(np.int64)
        cols = (picks[:, None] + np.arange(k)[None, :]).reshape(-1)
        out.append(_f64(src[c:c + 16]).reshape(16, -1)[:, cols])
    return np.concatenate(out)


def _nonzero(src, offset, pad, keep):
    """Partition 0 of each 16-partition core: indices of its non-zeros + offset, padding, the count; the other
    partitions keep `keep`."""
    out = np.full((src.shape[0], src.shape[1] + 1), keep, np.int64)
    for p in range(0, src.shape[0], 16):
        hits = np.flatnonzero(src[p]) + offset
        out[p] = np.r_[hits, np.full(src.shape[1] - hits.size, pad), hits.size]
    return out


def _snake_top(x, n, k):
    """The k largest of the n-element snake (element e at partition e % 16, column e // 16), ascending, and
    their snake positions, as rows [values..., positions...]."""
    snake = _f64(x).T.reshape(-1)[:n]
    order = np.argsort(snake, kind="stable")[-k:]
    return np.r_[snake[order], order]


def _topk_rows(outs, x):
    """Row 0 of each 16-partition core of (values, indices), as [values..., indices...] per core."""
    v, i = (np.asarray(o) for o in outs)
    return np.stack([np.r_[_f64(v[p]), i[p].astype(np.float64)] for p in range(0, x.shape[0], 16)])


def _mx(x):
    """MXFP8 e4m3fn values of x [K, F]: blocks of 32 along K share the scale 2^(floor(log2 amax) - 7) (one
    step above the OCP sample conversion), elements rounded to e4m3fn."""
    import ml_dtypes
    blocks = _f64(x).reshape(-1, 32, x.shape[1])
    scale = 2.0 ** (np.floor(np.log2(np.abs(blocks).max(1, keepdims=True))) - 7)
    q = np.clip(blocks / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return (q * scale).reshape(x.shape)


def _mx_matmul(nl, nisa, a, b):
    """a [512, M], b [512, N] (bf16) quantized by quantize_mx (K = 4 x 128 partitions, 4 along the free
    dim) and multiplied by nc_matmul_mx into an fp32 [M, N]."""
    K, M = a.shape
    out = _out(nl, (M, b.shape[1]), nl.float32)
    qs = []
    for x in (a, b):
        F = x.shape[1]
        src = nl.ndarray((128, F, 4), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(src, x.reshape((128, 4, F)).permute((0, 2, 1)))  # src[p, f, j] = x[4p + j, f]
        q = nl.ndarray((128, F), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((128, F), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(q, src.reshape((128, 4 * F)), s)
        qs.append((q, s))
    ps = nl.ndarray((M, b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(ps, qs[0][0], qs[1][0], qs[0][1], qs[1][1])
    nl.store(out, nl.copy(ps))
    return out


def _lnc2(body):
    """A current-API kernel launched on LNC 2: `body(nl, nisa, rank, *args)` per core."""
    return _raw("current", lambda nl, nisa, *xs: body(nl, nisa, nl.program_id(0), *xs), grid=2)


def _barrier(nl, nisa, r, x):
    """Each core writes its half of a shared tensor, both meet at core_barrier, then each reads it all."""
    n = x.shape[1]
    shared = nl.ndarray((2 * n, x.shape[2]), x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape[:1] + (2 * n, x.shape[2]), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(shared[r * n:(r + 1) * n], x[r])
    nisa.core_barrier(shared, (0, 1))
    t = nl.ndarray((2 * n, x.shape[2]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, shared)
    nisa.dma_copy(out[r], t)
    return out


def _swap(nl, nisa, r, x, engine):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    src = nl.load(x[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src, dst, send_to_rank=1 - r, recv_from_rank=1 - r, pipe_id=0,
                  dma_engine=getattr(nisa.dma_engine, engine))
    nl.store(out[r], dst)
    return out


def _current_isa_rows() -> list[Form]:
    """The rest of the current nki.isa: random numbers, GpSimd gathers and scans, DMA compute, MX, the
    instructions between the two cores of an LNC 2 launch, and the target query."""
    rows = []
    for dt in ("uint16", "int32", "uint8"):
        for eng in ("vector", "gpsimd"):
            rows.append(Form("current", "isa.rng", f"{dt} bits, engine={eng}: uniform over the dtype's range", _raw(
                "current", lambda nl, nisa, x, eng=eng: _draws(nl, nisa, x, lambda nl, nisa, new: [
                    (t := new(), nisa.rng(t, engine=getattr(nisa.engine, eng)))[0]])[0], post=_bits_uniform),
                lambda rng, dt=dt: (np.zeros((32, 64), dt),), lambda x: UNIFORM, 0.03))
    for lo, hi in ((0.0, 1.0), (2.0, 5.0)):
        rows.append(Form("current", "isa.rand2", f"float32 uniform in [{lo}, {hi}]", _raw(
            "current", lambda nl, nisa, x, lo=lo, hi=hi: _draws(nl, nisa, x, lambda nl, nisa, new: [
                (t := new(), nisa.rand2(t, lo, hi))[0]])[0],
            post=lambda out, x, lo=lo, hi=hi: _uniform_stats((_f64(out) - lo) / (hi - lo))),
            lambda rng: (np.zeros((32, 64), np.float32),), lambda x: UNIFORM, 0.03, "trn3"))
    rows.append(Form("current", "isa.set_rng_seed", "the same [1, 1] seed twice: rng repeats its draws", _raw(
        "current", lambda nl, nisa, x, s: _draws(nl, nisa, x, lambda nl, nisa, new: _seeded(nl, nisa, new, s)),
        post=_same_draws),
        lambda rng: (np.zeros((32, 64), np.uint32), np.array([[99]], np.int32)), lambda x, s: np.ones(2)))
    for name in ("rand_get_state", "rand_set_state"):
        rows.append(Form("current", f"isa.{name}", "GpSimd uint32 [32, 6] state saved, drawn from, restored: the "
                         "draws repeat", _raw("current", lambda nl, nisa, x: _draws(nl, nisa, x, _state_resumed),
                                              post=_same_draws),
                         lambda rng: (np.zeros((32, 64), np.uint32),), lambda x: np.ones(2)))
    for prob in (0.0, 1.0):
        rows.append(Form("current", "isa.dropout", f"scalar prob={prob}", _current(
            lambda nisa, nl, dst, a, prob=prob: nisa.dropout(dst, a, prob)),
            lambda rng: (_data("float32", 2, rng, positive=True),), lambda a, prob=prob: _f64(a) * (1 - prob)))
    rows.append(Form("current", "isa.dropout", "a [P, 1] prob tile: 0 on even partitions, 1 on odd", _current(
        lambda nisa, nl, dst, a, p: nisa.dropout(dst, a, p)),
        lambda rng: (_data("float32", 1, rng, positive=True), (np.arange(32) % 2).astype(np.float32)[:, None]),
        lambda a, p: _f64(a) * (1 - p)))
    rows.append(Form("current", "isa.dropout", "scalar prob=0.5: about half zeroed, the rest kept", _raw(
        "current", lambda nl, nisa, x: _draws(nl, nisa, x, lambda nl, nisa, new: [
            (t := new(), nisa.dropout(t, nl.load(x), 0.5))[0]])[0], post=_dropped),
        lambda rng: (_data("float32", 1, rng, positive=True),), lambda x: np.array([0.5, 0.0]), 0.06))
    ids = np.array([[1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 0, 0, 5, 5, 0, 0]])
    for dt in ("int32", "float32"):
        rows.append(Form("current", "isa.sequence_bounds", f"{dt} segment ids with padding, [1, 16] -> [1, 2, 16]",
                         _kernel("current", lambda nl, nisa, s: (b := nl.ndarray((1, 2, s.shape[1]), s.dtype,
                                                                                 buffer=nl.sbuf),
                                                                  nisa.sequence_bounds(b, s))[0],
                                 lambda s: (1, 2, s.shape[1])),
                         lambda rng, dt=dt: (ids.astype(dt),), _bounds))
    for k, n in ((1, None), (4, 20)):
        rows.append(Form("current", "isa.local_gather", f"float32, 2 GpSimd cores, num_elem_per_idx={k}, "
                         f"num_valid_indices={n}", _current(
                             lambda nisa, nl, dst, src, idx, _o, k=k, n=n: nisa.local_gather(
                                 dst, src, idx, num_elem_per_idx=k, num_valid_indices=n), shape_of=2),
                         lambda rng, k=k, n=n: (_data("float32", 1, rng), rng.integers(0, 64 - k, (32, 2)).astype(
                             np.uint16), np.zeros((32, (n or 32) * k), np.float32)),
                         lambda src, idx, _o, k=k, n=n: _local_gather(src, idx, k, n or 32)))
    for dt, shape in (("float32", (32, 64)), ("bfloat16", (32, 64)), ("float32", (32, 4, 16))):
        rows.append(Form("current", "isa.nc_n_gather", f"{dt} data {list(shape)}, uint32 [32, 24] indices into its "
                         "flattened free dims", _current(
                             lambda nisa, nl, dst, d, i: nisa.nc_n_gather(dst, d, i), shape_of=1),
                         lambda rng, dt=dt, shape=shape: (rng.standard_normal(shape).astype(DTYPES[dt]),
                                                          rng.integers(0, 64, (32, 24)).astype(np.uint32)),
                         lambda d, i: np.take_along_axis(_f64(d).reshape(32, -1), i.astype(np.int64), 1)))
    rows.append(Form("current", "isa.dma_compute", "SBUF: dst = srcs[0] + srcs[1] + srcs[2], float32", _current(
        lambda nisa, nl, dst, a, b, c: nisa.dma_compute(dst, [a, b, c], nl.add)),
        lambda rng: tuple(_data("float32", 2, rng) for _ in range(3)), lambda a, b, c: _f64(a) + _f64(b) + _f64(c),
        1e-6))
    rows.append(Form("current", "isa.dma_compute", "HBM to HBM with scales=[1.0, 1.0], bfloat16 srcs", _raw(
        "current", lambda nl, nisa, a, b: (o := _out(nl, a.shape, nl.float32),
                                           nisa.dma_compute(o, [a, b], nl.add, scales=[1.0, 1.0]))[0]),
        lambda rng: (_data("bfloat16", 1, rng), _data("bfloat16", 1, rng)), lambda a, b: _f64(a) + _f64(b), 1e-6))
    def data(rng, dt):
        return np.where(rng.random((32, 20)) < 0.3, rng.integers(1, 9, (32, 20)), 0).astype(dt)
    for dt in ("int32", "float32"):
        rows.append(Form("current", "isa.nonzero_with_count", f"{dt}, index_offset=100, padding_val=-1; partitions "
                         "0 and 16 written", _current(
                             lambda nisa, nl, dst, s, _o: (nisa.memset(dst, 7), nisa.nonzero_with_count(
                                 dst, s, index_offset=100, padding_val=-1)), out_dtype="int32", shape_of=1),
                         lambda rng, dt=dt: (data(rng, dt), np.zeros((32, 21), np.int32)),
                         lambda s, _o: _nonzero(s, 100, -1, 7)))
    for n, k in ((40, 5), (48, 8)):
        rows.append(Form("current", "isa.topk", f"n={n} bfloat16 snake over 16 partitions, K={k}", _raw(
            "current", lambda nl, nisa, x, n=n, k=k: _topk(nl, nisa, x, n, k), post=_topk_rows),
            lambda rng: (rng.permutation(32 * 3).reshape(32, 3).astype(BF16),),
            lambda x, n=n, k=k: np.stack([_snake_top(x[p:p + 16], n, k) for p in (0, 16)])))
    for op, (o0, o1, fn) in {"exp": ("multiply", "add", lambda x: np.exp(2 * x - 1)),
                             "tanh": ("bypass", "bypass", np.tanh),
                             "relu": ("subtract", "bypass", lambda x: np.maximum(0.5 - x, 0))}.items():
        rev = o0 == "subtract"
        rows.append(Form("current", "isa.activate2", f"op={op}, (data {o0} imm0) {o1} imm1"
                         + (", reverse0" if rev else ""), _current(
                             lambda nisa, nl, dst, a, op=op, o0=o0, o1=o1, rev=rev: nisa.activate2(
                                 dst, getattr(nl, op), a, imm0=0.5 if rev else 2.0, imm1=-1.0, op0=getattr(nl, o0),
                                 op1=getattr(nl, o1), reverse0=rev), out_dtype="float32"),
                         lambda rng: (_data("float32", 2, rng, small=True),), lambda a, fn=fn: fn(_f64(a)), 1e-5,
                         "trn3"))
    rows.append(Form("current", "isa.activate2", "op=exp with reduce_op=add into reduce_res", _current(
        lambda nisa, nl, dst, a, _z: nisa.activate2(nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf), nl.exp, a,
                                                    imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass,
                                                    reduce_op=nl.add, reduce_res=dst,
                                                    reduce_cmd=nisa.reduce_cmd.reset_reduce),
        out_dtype="float32", shape_of=1),
        lambda rng: (_data("float32", 1, rng, small=True), np.zeros((32, 1), np.float32)),
        lambda a, _z: np.exp(_f64(a)).sum(1, keepdims=True), 1e-5, "trn3"))
    def mx_in(rng):
        return rng.standard_normal((512, 32)).astype(BF16), rng.standard_normal((512, 64)).astype(BF16)
    rows.append(Form("current", "isa.nc_matmul_mx", "MXFP8 e4m3fn_x4 operands, uint8 scales, [512, 32] x [512, 64]",
                     _raw("current", _mx_matmul), mx_in, lambda a, b: _mx(a).T @ _mx(b), 1e-4, "trn3"))
    rows.append(Form("current", "isa.quantize_mx", "bfloat16 [512, 32] to MXFP8, read back through an identity "
                     "matmul", _raw("current", _mx_matmul),
                     lambda rng: (rng.standard_normal((512, 32)).astype(BF16), np.eye(512, dtype=BF16)),
                     lambda a, b: _mx(a).T, 1e-6, "trn3"))
    rows.append(Form("current", "isa.register_store", "a register into an SBUF tile, then a loaded value", _current(
        lambda nisa, nl, dst, a: (nisa.register_store(dst[:, 0:1], nisa.register_alloc(-7)),
                                  nisa.register_load(r := nisa.register_alloc(0), a[:, 1:2]),
                                  nisa.register_store(dst[:, 1:2], r))),
        lambda rng: (np.array([[0, 31337]], np.int32),), lambda a: np.array([[-7, 31337]])))
    for target, gen in (("trn2", 3), ("trn3", 4)):
        for api in ("current", "beta"):
            rows.append(Form(api, "isa.get_nc_version", f"on {target}: gen{gen}", _kernel(
                api, lambda nl, nisa, a: nl.full(a.shape, float(nisa.get_nc_version().value), nl.float32,
                                                 buffer=nl.sbuf), lambda a: a.shape, "float32"),
                lambda rng: (np.zeros((1, 1), np.float32),), lambda a, gen=gen: np.full(a.shape, gen), 0.0, target))
    rows.append(Form("current", "isa.core_barrier", "LNC 2: each core writes half a shared tensor, then reads it all",
                     _lnc2(_barrier), lambda rng: (rng.standard_normal((2, 16, 8)).astype(np.float32),),
                     lambda x: np.broadcast_to(np.concatenate([x[0], x[1]]), (2, 32, 8))))
    for eng in ("dma", "gpsimd_dma"):
        rows.append(Form("current", "isa.sendrecv", f"LNC 2: the two cores swap tiles, dma_engine={eng}", _lnc2(
            lambda nl, nisa, r, x, eng=eng: _swap(nl, nisa, r, x, eng)),
            lambda rng: (rng.standard_normal((2, 16, 8)).astype(np.float32),), lambda x: _f64(x)[::-1]))
    return rows


def _topk(nl, nisa, x, n, k):
    P = x.shape[0]
    v, i = nl.ndarray((P, k), nl.bfloat16, buffer=nl.sbuf), nl.ndarray((P, k), nl.uint32, buffer=nl.sbuf)
    nisa.topk(v, i, nl.load(x), n=n)
    vals, idx = _out(nl, (P, k), nl.bfloat16), _out(nl, (P, k), nl.uint32)
    nl.store(vals, v)
    nl.store(idx, i)
    return vals, idx


def _ranks(body):
    """An LNC 2 kernel of the current API running `body(nl, nisa, cc, G, r, x)` on each rank r of the group
    [[0, 1]]; x holds each rank's input along dim 0."""
    def run(nl, nisa, r, *xs):
        import trnsim.nki.collectives as cc
        return body(nl, nisa, cc, cc.ReplicaGroup([[0, 1]]), r, *xs)
    return _lnc2(run)


def _per_rank(nl, nisa, r, shape, dtype, tile):
    """The [2, ...] output whose row r this rank writes from `tile` (SBUF or HBM)."""
    out = nl.ndarray((2,) + tuple(shape), dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out[r], tile)
    return out


def _sbuf_collective(nl, nisa, r, x, call, shape=None):
    """call(src, dst) on SBUF tiles: src is this rank's x[r], dst of `shape` (x[r]'s by default)."""
    t = nl.load(x[r])
    d = nl.ndarray(shape or t.shape, t.dtype, buffer=nl.sbuf)
    call(t, d)
    return _per_rank(nl, nisa, r, d.shape, d.dtype, d)


def _hbm_collective(nl, nisa, r, x, call, shape):
    d = nl.ndarray(shape, x.dtype, buffer=nl.hbm)
    call(x[r], d)
    return _per_rank(nl, nisa, r, shape, x.dtype, d)


def _ring_ids(nl, nisa, cc, G, r, x):
    """The ranks whose data this rank holds at ring steps 0, 1 and 2, through registers into a [1, 3] tile."""
    t = nl.ndarray((1, 3), nl.int32, buffer=nl.sbuf)
    for i in range(3):
        nisa.register_store(t[:, i:i + 1], cc.collective_permute_implicit_current_processing_rank_id(i, G))
    return _per_rank(nl, nisa, r, (1, 3), nl.int32, t)


_V_SLOT = 12  # elements of each rank's slot in a variable-size collective's flat dst


def _v_collective(nl, nisa, cc, G, r, x, md, kind, split):
    """A variable-size collective of flat buffers: dst starts at -1 (to see what the collective leaves alone),
    this rank's uint32 metadata md[r] in HBM; called whole or as prepare + trigger."""
    dst = nl.ndarray((2 * _V_SLOT,), x.dtype, buffer=nl.hbm)
    fill = nl.ndarray((1, 2 * _V_SLOT), x.dtype, buffer=nl.sbuf)
    nisa.memset(fill, -1.0)
    nisa.dma_copy(dst.reshape((1, 2 * _V_SLOT)), fill)
    meta = nl.ndarray(md.shape[1:], md.dtype, buffer=nl.hbm)
    nisa.dma_copy(meta, md[r])
    args = ([x[r]], [dst], G, meta)
    if split:
        getattr(cc, f"{kind}_trigger")(getattr(cc, f"{kind}_prepare")(*args))
    else:
        getattr(cc, kind)(*args)
    return _per_rank(nl, nisa, r, (2 * _V_SLOT,), x.dtype, dst)


def _v_rows() -> list[Form]:
    """all_gather_v and all_to_all_v: metadata rows 0 and 1 hold each destination's (count, source
    displacement); incoming chunks land in slot s of sender s."""
    rows = []
    gather_md = np.zeros((2, 3, 2), np.uint32)
    gather_md[0, :2] = [[5, 0], [3, 0]]  # rank 0 sends x0[3:8] to every rank
    gather_md[1, :2] = [[9, 0], [20, 0]]  # rank 1 sends x1[20:29]
    to_all_md = np.zeros((2, 3, 2), np.uint32)
    to_all_md[0, :2] = [[4, 7], [0, 10]]  # rank 0: x0[0:4] to itself, x0[10:17] to rank 1
    to_all_md[1, :2] = [[2, 0], [30, 0]]  # rank 1: x1[30:32] to rank 0, nothing to itself

    def gathered(x, md):
        out = np.full((2, 2 * _V_SLOT), -1.0)
        for s in range(2):
            count, displ = md[s, 0, 0], md[s, 1, 0]
            out[:, s * _V_SLOT:s * _V_SLOT + count] = x[s, displ:displ + count]
        return out

    def exchanged(x, md):
        out = np.full((2, 2 * _V_SLOT), -1.0)
        for s in range(2):
            for d in range(2):
                count, displ = md[s, 0, d], md[s, 1, d]
                out[d, s * _V_SLOT:s * _V_SLOT + count] = x[s, displ:displ + count]
        return out
    for kind, md, ref in (("all_gather_v", gather_md, gathered), ("all_to_all_v", to_all_md, exchanged)):
        for split in (False, True):
            rows.append(Form("current", f"collectives.{kind}", "HBM flat buffers, HBM metadata" +
                             (", as prepare + trigger" if split else ""), _ranks(
                                 lambda nl, nisa, cc, G, r, x, m, kind=kind, split=split: _v_collective(
                                     nl, nisa, cc, G, r, x, m, kind, split)),
                             lambda rng, md=md: (rng.standard_normal((2, 64)).astype(np.float32), md), ref))
    return rows


def _collective_rows() -> list[Form]:
    """nki.collectives between the two ranks of an LNC 2 launch, values checked rank by rank."""
    rows = []
    two = lambda shape: (lambda rng: (rng.standard_normal((2,) + shape).astype(np.float32),))  # noqa: E731
    for op, fn in (("add", np.add), ("maximum", np.maximum)):
        rows.append(Form("current", "collectives.all_reduce", f"op={op} on SBUF tiles", _ranks(
            lambda nl, nisa, cc, G, r, x, op=op: _sbuf_collective(nl, nisa, r, x, lambda s, d: cc.all_reduce(
                [s], [d], G, getattr(nl, op)))), two((32, 16)),
            lambda x, fn=fn: np.broadcast_to(fn(_f64(x[0]), _f64(x[1])), x.shape), 1e-6))
    rows.append(Form("current", "collectives.all_reduce", "op=add on HBM tensors, keywords", _ranks(
        lambda nl, nisa, cc, G, r, x: _hbm_collective(nl, nisa, r, x, lambda s, d: cc.all_reduce(
            srcs=[s], dsts=[d], replica_group=G, op=nl.add), x.shape[1:])), two((256, 16)),
        lambda x: np.broadcast_to(_f64(x[0]) + _f64(x[1]), x.shape), 1e-6))
    rows.append(Form("current", "collectives.all_gather", "HBM, collective_dim=0: the ranks' tensors stacked", _ranks(
        lambda nl, nisa, cc, G, r, x: _hbm_collective(nl, nisa, r, x, lambda s, d: cc.all_gather(
            [s], [d], G, collective_dim=0), (2 * x.shape[1], x.shape[2]))), two((64, 16)),
        lambda x: np.broadcast_to(np.concatenate([x[0], x[1]]), (2, 128, 16))))
    rows.append(Form("current", "collectives.all_gather", "SBUF, collective_dim=1: side by side along the free dim",
                     _ranks(lambda nl, nisa, cc, G, r, x: _sbuf_collective(nl, nisa, r, x, lambda s, d: cc.all_gather(
                         [s], [d], G, collective_dim=1), (x.shape[1], 2 * x.shape[2]))), two((32, 16)),
                     lambda x: np.broadcast_to(np.concatenate([x[0], x[1]], 1), (2, 32, 32))))
    rows.append(Form("current", "collectives.reduce_scatter", "HBM, collective_dim=0, op=add: rank i gets part i",
                     _ranks(lambda nl, nisa, cc, G, r, x: _hbm_collective(
                         nl, nisa, r, x, lambda s, d: cc.reduce_scatter([s], [d], G, collective_dim=0, op=nl.add),
                         (x.shape[1] // 2, x.shape[2]))), two((256, 16)),
                     lambda x: (_f64(x[0]) + _f64(x[1])).reshape(2, 128, 16), 1e-6))
    rows.append(Form("current", "collectives.all_to_all", "HBM, collective_dim=0: part j of rank i to rank j", _ranks(
        lambda nl, nisa, cc, G, r, x: _hbm_collective(nl, nisa, r, x, lambda s, d: cc.all_to_all(
            [s], [d], G, collective_dim=0), x.shape[1:])), two((256, 16)),
        lambda x: np.stack([np.concatenate([x[0][j * 128:(j + 1) * 128], x[1][j * 128:(j + 1) * 128]])
                            for j in range(2)])))
    rows.append(Form("current", "collectives.collective_permute", "pairs (0, 1) and (1, 0): the ranks swap", _ranks(
        lambda nl, nisa, cc, G, r, x: _hbm_collective(nl, nisa, r, x, lambda s, d: cc.collective_permute(
            [s], [d], source_target_pairs=[(0, 1), (1, 0)]), x.shape[1:])), two((64, 16)), lambda x: _f64(x)[::-1]))
    rows.append(Form("current", "collectives.collective_permute_implicit", "one ring step: each rank gets its "
                     "predecessor's tensor", _ranks(
                         lambda nl, nisa, cc, G, r, x: _hbm_collective(
                             nl, nisa, r, x, lambda s, d: cc.collective_permute_implicit([[s]], [[d]], G),
                             x.shape[1:])), two((64, 16)), lambda x: _f64(x)[::-1]))
    rows.append(Form("current", "collectives.collective_permute_implicit_reduce",
                     "op=add of two srcs sent one ring step",
                     _ranks(lambda nl, nisa, cc, G, r, x: _hbm_collective(
                         nl, nisa, r, x, lambda s, d: cc.collective_permute_implicit_reduce(
                             [[s]], [[x[1 - r]]], [[d]], G, nl.add), x.shape[1:])), two((64, 16)),
                     lambda x: np.broadcast_to(_f64(x[0]) + _f64(x[1]), x.shape), 1e-6))
    rows.append(Form("current", "collectives.collective_permute_implicit_current_processing_rank_id",
                     "ring steps 0, 1, 2 of a ring of two: own rank, peer, own", _ranks(_ring_ids),
                     lambda rng: (np.zeros((2, 1, 1), np.float32),),
                     lambda x: np.array([[[0, 1, 0]], [[1, 0, 1]]])))
    rows.append(Form("current", "collectives.rank_id", "each rank scales its input by rank + 1", _ranks(
        lambda nl, nisa, cc, G, r, x: _per_rank(nl, nisa, r, x.shape[1:], x.dtype, nl.multiply(
            nl.load(x[r]), float(cc.rank_id() + 1)))), two((32, 16)),
        lambda x: _f64(x) * np.array([1.0, 2.0])[:, None, None], 1e-6))
    return rows


def _dyn_blocks(nl, nisa, a, how):
    """Column block i of the result is block 3 - i of `a`, copied with a loop-dependent free offset."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    for i in nl.sequential_range(4):
        if how == "src":
            t[:, i * 16:(i + 1) * 16] = nisa.tensor_copy_dynamic_src(a[:, (3 - i) * 16:(4 - i) * 16])
        else:
            nisa.tensor_copy_dynamic_dst(dst=t[:, i * 16:(i + 1) * 16], src=a[:, (3 - i) * 16:(4 - i) * 16])
    return t


def _reversed_blocks(a):
    return np.concatenate([_f64(a)[:, (3 - i) * 16:(4 - i) * 16] for i in range(4)], 1)


def _beta_isa_more_rows() -> list[Form]:
    """The beta isa functions no row above reaches."""
    rows = []
    for dt in ("float32", "bfloat16"):
        rows.append(Form("beta", "isa.tensor_scalar_reduce", f"sum of (data + 1) into reduce_res, {dt}", _kernel(
            "beta", lambda nl, nisa, a: (nisa.tensor_scalar_reduce(
                data=a, op0=np.add, operand0=1.0, reduce_op=np.add,
                reduce_res=(r := nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf))), r)[1],
            lambda a: (a.shape[0], 1), "float32"),
            lambda rng, dt=dt: (_data(dt, 1, rng),), lambda a: (_f64(a) + 1).sum(1, keepdims=True), 1e-4))
        rows.append(Form("beta", "isa.range_select", f"keep 8 <= f < 40, else -5, {dt}", _kernel(
            "beta", lambda nl, nisa, a: nisa.range_select(on_true_tile=a, comp_op0=np.greater_equal, comp_op1=np.less,
                                                          bound0=8.0, bound1=40.0, on_false_value=-5.0),
            lambda a: a.shape),
            lambda rng, dt=dt: (_data(dt, 1, rng),),
            lambda a: np.where((np.arange(64) >= 8) & (np.arange(64) < 40), _f64(a), -5.0)))
        rows.append(Form("beta", "isa.dma_transpose", f"{dt} [16, 64] -> [64, 16]", _kernel(
            "beta", lambda nl, nisa, a: nisa.dma_transpose(a), lambda a: a.shape[::-1]),
            lambda rng, dt=dt: (_data(dt, 1, rng, P=16),), lambda a: _f64(a).T))
    rows.append(Form("beta", "isa.dma_transpose", "bfloat16 3-d [16, 4, 8]: axes reversed", _kernel(
        "beta", lambda nl, nisa, a: nisa.dma_transpose(a), lambda a: a.shape[::-1]),
        lambda rng: (rng.standard_normal((16, 4, 8)).astype(BF16),), lambda a: np.transpose(_f64(a), (2, 1, 0))))
    for how in ("src", "dst"):
        rows.append(Form("beta", f"isa.tensor_copy_dynamic_{how}", "column blocks reversed, the offset set by a "
                         "sequential_range index", _kernel(
                             "beta", lambda nl, nisa, a, how=how: _dyn_blocks(nl, nisa, a, how), lambda a: a.shape),
                         lambda rng: (_data("float32", 1, rng),), _reversed_blocks))
    for dt in ("int32", "float32"):
        rows.append(Form("beta", "isa.iota", f"{dt}: p * 100 + 2 * f over a [32, 64] grid", _kernel(
            "beta", lambda nl, nisa, a, dt=dt: nisa.iota(nl.arange(32)[:, None] * 100 + 2 * nl.arange(64)[None, :],
                                                         dtype=getattr(nl, dt)), lambda a: a.shape, dt),
            lambda rng: (np.zeros((32, 64), np.float32),),
            lambda a: 100 * np.arange(32)[:, None] + 2 * np.arange(64)[None, :]))
    rows.append(Form("beta", "isa.iota", "a scalar expression (program_id + 5): a [1, 1] tile", _kernel(
        "beta", lambda nl, nisa, a: nisa.iota(nl.program_id(0) + 5, dtype=nl.int32), lambda a: (1, 1), "int32"),
        lambda rng: (np.zeros((1, 1), np.float32),), lambda a: np.full((1, 1), 5)))
    for prob in (0.0, 1.0):
        rows.append(Form("beta", "isa.dropout", f"scalar prob={prob}", _kernel(
            "beta", lambda nl, nisa, a, prob=prob: nisa.dropout(a, prob), lambda a: a.shape),
            lambda rng: (_data("float32", 2, rng, positive=True),), lambda a, prob=prob: _f64(a) * (1 - prob)))
    ids = np.array([[1, 1, 2, 2, 2, 0, 3, 0]])
    rows.append(Form("beta", "isa.sequence_bounds", "int32 segment ids with padding, [1, 8] -> [1, 2, 8]", _kernel(
        "beta", lambda nl, nisa, s: nisa.sequence_bounds(segment_ids=s), lambda s: (1, 2, s.shape[1])),
        lambda rng: (ids.astype(np.int32),), _bounds))
    rows.append(Form("beta", "isa.local_gather", "float32, 2 GpSimd cores, 2 elements per index, 12 valid", _kernel(
        "beta", lambda nl, nisa, src, idx: nisa.local_gather(src, idx, num_elem_per_idx=2, num_valid_indices=12),
        lambda src, idx: (32, 12, 2)),
        lambda rng: (_data("float32", 1, rng), rng.integers(0, 62, (32, 1)).astype(np.uint16)),
        lambda src, idx: _local_gather(src, idx, 2, 12).reshape(32, 12, 2)))
    return rows


def _doubled(nl, x):
    out = _out(nl, x.shape, x.dtype)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def _timed(run):
    """The kernel's output, then 1.0 when the benchmark result it left holds a positive p50 latency."""
    def timed(x):
        out = run(x)
        return np.r_[_f64(out).ravel(), float(run.benchmark_result.nc_latency.get_latency_percentile(50) > 0)]
    return timed


def _launch(kind):
    """A kernel doubling its input, launched the way `kind` documents."""
    def build():
        if kind.startswith("current"):
            import trnsim.nki as nki
            import trnsim.nki.language as nl
        else:
            import trnsim.nki.beta as nki
            import trnsim.nki.beta.language as nl

        def doubled(x):
            return _doubled(nl, x)

        def into(x, out):  # the beta output convention of SDK 2.20: the output is an argument
            nl.store(out, nl.multiply(nl.load(x), 2.0))
        return {"current jit": lambda: nki.jit(doubled),
                "current jit options": lambda: nki.jit(platform_target="trn2")(doubled),
                "current simulate": lambda: nki.simulate(nki.jit(doubled)),
                "current simulate fn": lambda: nki.simulate(doubled),
                "beta jit": lambda: nki.jit(doubled),
                "beta jit mode": lambda: nki.jit(mode="simulation")(doubled),
                "beta jit out": lambda: lambda x: (o := np.zeros_like(x), nki.jit(into)(x, o))[0],
                "beta simulate_kernel": lambda: lambda x: nki.simulate_kernel(nki.jit(doubled), x),
                "beta baremetal": lambda: nki.baremetal(doubled),
                "beta benchmark": lambda: _timed(nki.benchmark(warmup=2, iters=5)(doubled)),
                "beta profile": lambda: _timed(nki.profile(working_directory=None)(doubled))}[kind]()
    return build


def _placed(nl, ncc, x, buffer):
    """4 row blocks of x through a [4, par_dim(32), F] SBUF tensor placed by `buffer`, each doubled."""
    n = x.shape[0] // 32
    out = _out(nl, x.shape, x.dtype)
    buf = nl.ndarray((n, nl.par_dim(32), x.shape[1]), x.dtype, buffer=buffer)
    for i in nl.affine_range(n):
        buf[i] = nl.load(x[i * 32:(i + 1) * 32, :])
        nl.store(out[i * 32:(i + 1) * 32, :], nl.multiply(buf[i], 2.0))
    return out


def _psum_placed(nl, nisa, ncc, a, b, buffer):
    """2 column blocks of a.T @ b accumulated over 2 K tiles in PSUM blocks placed by `buffer`."""
    K, M = a.shape
    N = b.shape[1] // 2
    out = _out(nl, (M, 2 * N), nl.float32)
    acc = nl.ndarray((2, nl.par_dim(M), N), nl.float32, buffer=buffer)
    for j in nl.affine_range(2):
        acc[j] = nl.zeros((M, N), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 64):
            acc[j] += nisa.nc_matmul(nl.load(a[k * 64:(k + 1) * 64, :]),
                                     nl.load(b[k * 64:(k + 1) * 64, j * N:(j + 1) * N]))
    for j in nl.affine_range(2):
        nl.store(out[:, j * N:(j + 1) * N], nl.copy(acc[j]))
    return out


def _compiled(option):
    """A beta kernel doubling its input under the compile option `option` (a decorator)."""
    def build():
        import trnsim.nki.beta as nki
        import trnsim.nki.beta.compiler as ncc
        import trnsim.nki.beta.language as nl
        return getattr(ncc, option)(nki.jit(lambda x: _doubled(nl, x)))
    return build


def _beta_compiler(body):
    def build():
        import trnsim.nki.beta.compiler as ncc
        return _raw("beta", lambda nl, nisa, *xs: body(nl, nisa, ncc, *xs))()
    return build


def _launch_rows() -> list[Form]:
    """Kernel launches of both APIs (jit, simulate, simulate_kernel, baremetal, benchmark, profile), and the beta
    compiler's direct allocation and compile options."""
    rows = []
    x = lambda rng: (_data("float32", 1, rng),)  # noqa: E731
    forms = {"current jit": ("nki.jit", "a decorated function"), "current jit options": ("nki.jit", "with options"),
             "current simulate": ("nki.simulate", "of a jit kernel"),
             "current simulate fn": ("nki.simulate", "of a function"),
             "beta jit": ("nki.jit", "a decorated function, allocate-and-return"),
             "beta jit mode": ("nki.jit", "mode='simulation'"),
             "beta jit out": ("nki.jit", "the output passed as an argument (SDK 2.20 convention)"),
             "beta simulate_kernel": ("nki.simulate_kernel", "simulate_kernel(kernel, x)"),
             "beta baremetal": ("nki.baremetal", "a decorated function")}
    for kind, (function, form) in forms.items():
        rows.append(Form(kind.split()[0], function, form, _launch(kind), x, lambda a: 2 * _f64(a)))
    for kind in ("beta benchmark", "beta profile"):
        rows.append(Form("beta", f"nki.{kind.split()[1]}", "values, and a positive p50 nc_latency", _launch(kind), x,
                         lambda a: np.r_[2 * _f64(a).ravel(), 1.0]))
    rows.append(Form("beta", "compiler.sbuf.mod_alloc", "base_addr=0, num_free_tiles=(2,): 4 blocks in 2 tiles",
                     _beta_compiler(lambda nl, nisa, ncc, x: _placed(nl, ncc, x, ncc.sbuf.mod_alloc(
                         base_addr=0, num_free_tiles=(2,)))),
                     lambda rng: (rng.standard_normal((128, 16)).astype(np.float32),), lambda x: 2 * _f64(x)))
    rows.append(Form("beta", "compiler.sbuf.alloc", "func(idx, pdim_size, fdim_size) -> (partition, byte address)",
                     _beta_compiler(lambda nl, nisa, ncc, x: _placed(nl, ncc, x, ncc.sbuf.alloc(
                         lambda idx, pdim_size, fdim_size: (0, 1024 + idx[0] * fdim_size)))),
                     lambda rng: (rng.standard_normal((128, 16)).astype(np.float32),), lambda x: 2 * _f64(x)))
    rows.append(Form("beta", "compiler.sbuf.auto_alloc", "the compiler's allocator", _beta_compiler(
        lambda nl, nisa, ncc, x: _placed(nl, ncc, x, ncc.sbuf.auto_alloc())),
        lambda rng: (rng.standard_normal((128, 16)).astype(np.float32),), lambda x: 2 * _f64(x)))
    def mm(rng):
        return rng.standard_normal((128, 32)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32)
    for name, buffer in (("mod_alloc", lambda ncc: ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,))),
                         ("alloc", lambda ncc: ncc.psum.alloc(lambda idx, pdim_size, fdim_size: (5 + idx[0], 0, 0))),
                         ("auto_alloc", lambda ncc: ncc.psum.auto_alloc())):
        rows.append(Form("beta", f"compiler.psum.{name}", "2 accumulating matmul blocks" + {
            "mod_alloc": " in banks 2 and 3", "alloc": ": func -> (bank, partition, byte)", "auto_alloc": ""}[name],
            _beta_compiler(lambda nl, nisa, ncc, a, b, buffer=buffer: _psum_placed(nl, nisa, ncc, a, b, buffer(ncc))),
            mm, lambda a, b: _f64(a).T @ _f64(b), 1e-4))
    for option in ("skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc"):
        rows.append(Form("beta", f"compiler.{option}", "a decorated kernel computes as without it", _compiled(option),
                         x, lambda a: 2 * _f64(a)))
    return rows


def _psum_operand(nl, nisa, a, b, how):
    """a copied into PSUM, then tensor_tensor(a_psum, b) written to SBUF (how="read") or to PSUM (how="write")."""
    p = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.tensor_copy(p, a)
    if how == "read":
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(t, p, b, nl.add)
        return t
    q = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.tensor_tensor(q, p, b, nl.add)
    return nl.copy(q)


def _at_partition(nl, nisa, a, start):
    """Partitions start..start+32 of a [64, F] tile scaled by 3 into a [32, F] tile at partition 0."""
    t = nl.ndarray((32, a.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(t, a[start:start + 32], nl.multiply, 3.0)
    return t


def _pe_transpose(nl, nisa, a):
    p = nl.ndarray(a.shape[::-1], nl.float32, buffer=nl.psum)
    nisa.nc_transpose(p, a, engine=nisa.engine.tensor)
    return nl.copy(p)


def _two_matmuls(nl, nisa, a, b):
    """K split in two matmuls accumulating into one PSUM tile."""
    ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, a[0:64], b[0:64])
    nisa.nc_matmul(ps, a[64:128], b[64:128], accumulate=True)
    return nl.copy(ps)


def _matmul_3d(nl, nisa, a, b):
    """Moving operand [K, H, W]: the result is [M, H, W]."""
    ps = nl.ndarray((a.shape[1],) + tuple(b.shape[1:]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, a, b)
    return nl.copy(ps)


def _breadth_rows() -> list[Form]:
    """Parameter forms beyond the plain ones: PSUM operands, partition offsets, two operators with reversal,
    bias and scale tiles, casts, engines, accumulation, several reduced axes, masks."""
    rows = []
    for how in ("read", "write"):
        rows.append(Form("current", "isa.tensor_tensor", f"data1 in PSUM, dst in {'SBUF' if how == 'read' else 'PSUM'}",
                         _kernel("current", lambda nl, nisa, a, b, how=how: _psum_operand(nl, nisa, a, b, how),
                                 lambda a, b: a.shape, "float32"),
                         lambda rng: (_data("float32", 1, rng), _data("float32", 1, rng)),
                         lambda a, b: _f64(a) + _f64(b), 1e-6))
    for start in (0, 32):
        rows.append(Form("current", "isa.tensor_scalar", f"a partition slice starting at partition {start}", _kernel(
            "current", lambda nl, nisa, a, start=start: _at_partition(nl, nisa, a, start), lambda a: (32, a.shape[1]),
            "float32"),
            lambda rng: (_data("float32", 1, rng, P=64),), lambda a, start=start: 3 * _f64(a)[start:start + 32], 1e-6))
    for rev0, rev1 in ((False, False), (True, False), (False, True), (True, True)):
        def ref(a, rev0=rev0, rev1=rev1):
            t = 2.0 - _f64(a) if rev0 else _f64(a) - 2.0
            return 0.5 / t if rev1 else t / 0.5
        rows.append(Form("current", "isa.tensor_scalar", f"op0=subtract 2.0, op1=divide 0.5, reverse0={rev0}, "
                         f"reverse1={rev1}", _current(
                             lambda nisa, nl, dst, a, rev0=rev0, rev1=rev1: nisa.tensor_scalar(
                                 dst, a, nl.subtract, 2.0, reverse0=rev0, op1=nl.divide, operand1=0.5,
                                 reverse1=rev1)),
                         lambda rng: (_data("float32", 2, rng, positive=True) + 2.5,), ref, 1e-5))
    rows.append(Form("current", "isa.activation", "op=exp with a bias tile [P, 1] and a scale tile [P, 1]", _current(
        lambda nisa, nl, dst, a, b, s: nisa.activation(dst, nl.exp, a, bias=b, scale=s)),
        lambda rng: (_data("float32", 1, rng, small=True), rng.standard_normal((32, 1)).astype(np.float32) / 4,
                     rng.standard_normal((32, 1)).astype(np.float32)),
        lambda a, b, s: np.exp(_f64(a) * _f64(s) + _f64(b)), 1e-5))
    rows.append(Form("current", "isa.activation", "op=tanh, scalar scale 0.5, 3-d free", _current(
        lambda nisa, nl, dst, a: nisa.activation(dst, nl.tanh, a, scale=0.5)),
        lambda rng: (_data("float32", 3, rng),), lambda a: np.tanh(0.5 * _f64(a)), 1e-5))
    for src, dst in (("float32", "bfloat16"), ("int32", "float32"), ("float32", "int32"), ("bfloat16", "float32")):
        rows.append(Form("current", "isa.tensor_copy", f"{src} to a {dst} dst: the copy casts", _current(
            lambda nisa, nl, dst, a: nisa.tensor_copy(dst, a), out_dtype=dst),
            lambda rng, src=src: (_data(src, 2, rng) * (3 if src == "float32" else 1),),
            lambda a, dst=dst: _cast(a, dst)))
    rows.append(Form("current", "isa.tensor_copy", "engine=scalar (the activation engine)", _current(
        lambda nisa, nl, dst, a: nisa.tensor_copy(dst, a, engine=nisa.engine.scalar)),
        lambda rng: (_data("float32", 2, rng),), _f64))
    for eng in ("vector", "gpsimd"):
        rows.append(Form("current", "isa.memset", f"float32 -1.5, engine={eng}", _current(
            lambda nisa, nl, dst, a, eng=eng: nisa.memset(dst, -1.5, engine=getattr(nisa.engine, eng))),
            lambda rng: (_data("float32", 2, rng),), lambda a: np.full(a.shape, -1.5)))
    rows.append(Form("current", "isa.nc_transpose", "float32 [32, 64] on the tensor engine into PSUM", _kernel(
        "current", lambda nl, nisa, a: _pe_transpose(nl, nisa, a), lambda a: a.shape[::-1], "float32"),
        lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a).T, 1e-6))
    rows.append(Form("current", "isa.nc_matmul", "K=128 in two matmuls accumulating into one PSUM tile", _kernel(
        "current", lambda nl, nisa, a, b: _two_matmuls(nl, nisa, a, b), lambda a, b: (a.shape[1], b.shape[1]),
        "float32"),
        lambda rng: (_data("float32", 1, rng, P=128)[:, :32].copy(), _data("float32", 1, rng, P=128)),
        lambda a, b: _f64(a).T @ _f64(b), 1e-4))
    rows.append(Form("current", "isa.nc_matmul", "moving operand [K, 4, 16]: result [M, 4, 16]", _kernel(
        "current", lambda nl, nisa, a, b: _matmul_3d(nl, nisa, a, b), lambda a, b: (a.shape[1],) + b.shape[1:],
        "float32"),
        lambda rng: (_data("float32", 1, rng, P=64)[:, :32].copy(),
                     rng.standard_normal((64, 4, 16)).astype(np.float32)),
        lambda a, b: np.einsum("km,khw->mhw", _f64(a), _f64(b)), 1e-4))
    for api in ("current", "beta"):
        rows.append(Form(api, "language.transpose", "int32 [32, 64] -> [64, 32]: an integer transpose", _kernel(
            api, lambda nl, nisa, a: nl.copy(nl.transpose(a)), lambda a: a.shape[::-1]),
            lambda rng: (_data("int32", 1, rng),), lambda a: _f64(a).T))
        rows.append(Form(api, "language.load", "a (1,)-shaped HBM tensor, its element read as tile[0, 0]", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, (1, 1), x.dtype), nl.store(o, nl.copy(nl.load(x)[0, 0])))[0]),
            lambda rng: (np.array([4.25], np.float32),), lambda x: np.full((1, 1), 4.25)))
        rows.append(Form(api, "language.store", "uint32 tile into an int32 HBM tensor: the DMA casts through FP32, "
                         "saturating", _raw(
                             api, lambda nl, nisa, x: (o := _out(nl, x.shape, nl.int32), nl.store(o, nl.load(x)))[0]),
                         lambda rng: (np.array([[0xFFFFFFFF, 7, 0x80000000, 16777217]], np.uint32),),
                         lambda x: np.clip(_f64(x.astype(np.float32)), -2 ** 31, 2 ** 31 - 1)))
        rows.append(Form(api, "language.store", "uint32 tile into a uint32 HBM tensor: equal dtypes move bytes", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape, nl.uint32), nl.store(o, nl.load(x)))[0]),
            lambda rng: (np.array([[0xFFFFFFFF, 7, 0x80000000, 16777217]], np.uint32),), lambda x: x))
    for op, fn in (("add", np.sum), ("maximum", np.max)):
        rows.append(Form("current", "isa.tensor_reduce", f"op={op} over free axes (1, 2) of a 3-d tile, negate=True",
                         _current(lambda nisa, nl, dst, a, _z, op=op: nisa.tensor_reduce(
                             dst, getattr(nl, op), a, axis=(1, 2), negate=True), out_dtype="float32", shape_of=1),
                         lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),
                                      np.zeros((32, 1), np.float32)),
                         lambda a, _z, fn=fn: -fn(_f64(a), axis=(1, 2))[:, None], 1e-5))
    rows.append(Form("beta", "language.matmul", "an SBUF accumulator: acc += matmul(a, b)", _kernel(
        "beta", lambda nl, nisa, a, b: _sbuf_acc(nl, a, b), lambda a, b: (a.shape[1], b.shape[1]), "float32"),
        lambda rng: (_data("float32", 1, rng, P=64)[:, :32].copy(), _data("float32", 1, rng, P=64)),
        lambda a, b: 1 + _f64(a).T @ _f64(b), 1e-4))
    for api in ("current", "beta"):
        rows.append(Form(api, "isa.nc_match_replace8", "float32 with dst_idx: the 8 positions written too", _kernel(
            api, (lambda nl, nisa, d, v, api=api: _replace8_idx(nl, nisa, d, v, api)), lambda d, v: (d.shape[0], 8),
            "float32"),
            lambda rng: _rows_of_distinct(rng), lambda d, v: _find8(d, v).astype(np.float64)))
        rows.append(Form(api, "isa.nc_match_replace8", "vals repeating a value: dst_idx pairs the repeats with their "
                         "positions in descending order", _kernel(
                             api, (lambda nl, nisa, d, v, api=api: _replace8_idx(nl, nisa, d, v, api)),
                             lambda d, v: (d.shape[0], 8), "float32"),
                         lambda rng: (np.tile(np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32), (2, 1)),
                                      np.tile(np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32), (2, 1))),
                         lambda d, v: np.tile([[2, 10, 9, 8, 7, 6, 5, 4]], (2, 1))))
    rows.append(Form("current", "isa.nc_find_index8", "a value not in the row: the all-ones sentinel; uint16 dst",
                     _kernel("current", lambda nl, nisa, d, v: _find8_u16(nl, nisa, d, v), lambda d, v: v.shape,
                             "uint16"),
                     lambda rng: (np.arange(32, dtype=np.float32)[None, :].repeat(4, 0),
                                  np.array([[5, 99, 0, 31, 7, -1, 12, 13]], np.float32).repeat(4, 0)),
                     lambda d, v: np.where(np.isin(v, d[0]), v, 0xFFFF)))
    return rows


def _cast(a, dst):
    """numpy's value of a cast to dst as an engine writes it: round to nearest even, integers saturate."""
    x = _f64(a)
    if dst == "int32":
        return np.clip(np.rint(x), -2 ** 31, 2 ** 31 - 1)
    return _f64(x.astype(DTYPES[dst]))


def _sbuf_acc(nl, a, b):
    acc = nl.full((a.shape[1], b.shape[1]), 1.0, nl.float32, buffer=nl.sbuf)
    acc += nl.matmul(a, b, transpose_x=True)
    return acc


def _find8_u16(nl, nisa, d, v):
    out = nl.ndarray(v.shape, nl.uint16, buffer=nl.sbuf)
    nisa.nc_find_index8(out, d, v)
    return out


def _replace8_idx(nl, nisa, d, v, api):
    """The positions nc_match_replace8 writes into dst_idx, as float32."""
    idx = nl.ndarray((d.shape[0], 8), nl.uint32, buffer=nl.sbuf)
    if api == "beta":
        nisa.nc_match_replace8(data=d, vals=v, imm=-1.0, dst_idx=idx)
    else:
        nisa.nc_match_replace8(nl.ndarray(d.shape, d.dtype, buffer=nl.sbuf), d, v, -1.0, dst_idx=idx)
    return nl.copy(idx, dtype=nl.float32)


def _axes_rows() -> list[Form]:
    """Reductions and softmax over the last two free axes of a 3-d tile, and the dtype= of element-wise ops."""
    rows = []
    reds = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod}
    x3 = lambda rng: (rng.uniform(0.8, 1.2, (32, 4, 16)).astype(np.float32),)  # noqa: E731 - prod stays near 1
    for api in ("current", "beta"):
        for name, fn in reds.items():
            for keep in (True, False):
                rows.append(Form(api, f"language.{name}",
                                 f"float32 over free axes (1, 2) of a 3-d tile, keepdims={keep}",
                                 _kernel(api, lambda nl, nisa, a, name=name, keep=keep: getattr(nl, name)(
                                     a, axis=(1, 2), keepdims=keep), lambda a, keep=keep: (
                                     a.shape[0], 1, 1) if keep else (a.shape[0], 1), "float32"),
                                 x3, lambda a, fn=fn, keep=keep: fn(_f64(a), axis=(1, 2)).reshape(
                                     (-1, 1, 1) if keep else (-1, 1)), 1e-5))
        rows.append(Form(api, "language.all", "over free axes (1, 2) of a 3-d tile", _kernel(
            api, lambda nl, nisa, a: nl.all(a, axis=(1, 2)), lambda a: (a.shape[0], 1), "uint8"),
            lambda rng: (np.where(rng.random((32, 2, 4)) < 0.1, 0, 1).astype(np.float32),),
            lambda a: np.all(a != 0, axis=(1, 2))[:, None].astype(np.uint8)))
        rows.append(Form(api, "language.softmax", "over free axes (1, 2) of a 3-d tile", _kernel(
            api, lambda nl, nisa, a: nl.softmax(a, axis=(1, 2)), lambda a: a.shape, "float32"),
            lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),),
            lambda a: _softmax(_f64(a).reshape(32, -1)).reshape(a.shape), 1e-6))
        for name, fn in (("add", np.add), ("multiply", np.multiply)):
            rows.append(Form(api, f"language.{name}", "float32 tiles with dtype=bfloat16: the result rounded",
                             _kernel(api, lambda nl, nisa, a, b, name=name: getattr(nl, name)(a, b, dtype=nl.bfloat16),
                                     lambda a, b: a.shape, "bfloat16"),
                             lambda rng: (_data("float32", 2, rng), _data("float32", 2, rng)),
                             lambda a, b, fn=fn: _f64(fn(_f64(a), _f64(b)).astype(np.float32).astype(BF16)), 8e-3))
        rows.append(Form(api, "language.abs", "dtype=float16", _kernel(
            api, lambda nl, nisa, a: nl.abs(a, dtype=nl.float16), lambda a: a.shape, "float16"),
            lambda rng: (_data("float32", 2, rng),), lambda a: _f64(np.abs(a).astype(np.float16))))
        rows.append(Form(api, "language.exp", "bfloat16 tile with dtype=float32", _kernel(
            api, lambda nl, nisa, a: nl.exp(a, dtype=nl.float32), lambda a: a.shape, "float32"),
            lambda rng: (_data("bfloat16", 2, rng, small=True),), lambda a: np.exp(_f64(a)), 1e-5))
    return rows


def _shuffle_keep(nl, nisa, a, b):
    """b copied, then a shuffled into it with mask 255 on odd partitions (those keep b's rows)."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(t, b)
    nisa.nc_stream_shuffle(t, a, [255 if i % 2 else 31 - i for i in range(32)])
    return t


def _shuffled_keep(a, b):
    out = _f64(b).copy()
    for i in range(0, 32, 2):
        out[i] = _f64(a)[31 - i]
    return out


def _select_max(nl, nisa, c, a, r):
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.select_reduce(d, c, a, -100.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)


def _exp_sum(nl, nisa, a, m, r):
    d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.exponential(d, a, max_value=m, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)


def _more_param_rows() -> list[Form]:
    """Parameters of the current isa left at their defaults above."""
    rows = []
    rows.append(Form("current", "isa.nc_stream_shuffle", "mask 255 leaves a partition of dst unmodified, two quadrants",
                     _current(lambda nisa, nl, dst, a, b: nisa.tensor_copy(dst, _shuffle_keep(nl, nisa, a, b))),
                     lambda rng: (_data("float32", 1, rng), _data("float32", 1, rng)), _shuffled_keep))
    rows.append(Form("current", "isa.select_reduce", "scalar on_false, the max of the result into reduce_res", _current(
        lambda nisa, nl, dst, c, a, _z: _select_max(nl, nisa, c, a, dst), out_dtype="float32", shape_of=2),
        lambda rng: (_flags(rng).astype(np.float32), _data("float32", 1, rng), np.zeros((32, 1), np.float32)),
        lambda c, a, _z: np.where(c != 0, _f64(a), -100.0).max(1, keepdims=True)))
    rows.append(Form("current", "isa.select_reduce", "reverse_pred, a [P, 1] on_false column", _current(
        lambda nisa, nl, dst, c, a, f: nisa.select_reduce(dst, c, a, f, reverse_pred=True)),
        lambda rng: (_flags(rng).astype(np.float32), _data("float32", 1, rng),
                     rng.standard_normal((32, 1)).astype(np.float32)),
        lambda c, a, f: np.where(c == 0, _f64(a), _f64(f))))
    rows.append(Form("current", "isa.tensor_copy_predicated", "a scalar src, reverse_pred=True", _current(
        lambda nisa, nl, dst, b, c: (nisa.tensor_copy(dst, b), nisa.tensor_copy_predicated(dst, 9.0, c,
                                                                                          reverse_pred=True))),
        lambda rng: (_data("float32", 1, rng), _flags(rng)), lambda b, c: np.where(c == 0, 9.0, _f64(b))))
    rows.append(Form("current", "isa.exponential", "a [P, 1] max_value, the sum into reduce_res", _current(
        lambda nisa, nl, dst, a, m, _z: _exp_sum(nl, nisa, a, m, dst), out_dtype="float32", shape_of=2),
        lambda rng: (_data("float32", 1, rng, small=True), rng.standard_normal((32, 1)).astype(np.float32),
                     np.zeros((32, 1), np.float32)),
        lambda a, m, _z: np.exp(_f64(a) - _f64(m)).sum(1, keepdims=True), 1e-5, "trn3"))
    for rev0, rev1 in ((True, False), (False, True)):
        def ref(a, b, init, rev0=rev0, rev1=rev1):
            f0 = (lambda x, r: r - x) if rev0 else (lambda x, r: x - r)
            f1 = (lambda y, d: d - y) if rev1 else (lambda y, d: y - d)
            return _scan(_f64(a), _f64(b), _f64(init)[:, 0], f0, f1)
        rows.append(Form("current", "isa.tensor_tensor_scan", f"op0=op1=subtract, reverse0={rev0}, reverse1={rev1}, "
                         "a [P, 1] initial tile", _current(
                             lambda nisa, nl, dst, a, b, i, rev0=rev0, rev1=rev1: nisa.tensor_tensor_scan(
                                 dst, a, b, i, nl.subtract, nl.subtract, reverse0=rev0, reverse1=rev1)),
                         lambda rng: (_data("float32", 1, rng, small=True)[:, :16].copy(),
                                      _data("float32", 1, rng, small=True)[:, :16].copy(),
                                      rng.standard_normal((32, 1)).astype(np.float32)), ref, 1e-4))
    rows.append(Form("current", "isa.iota", "int32 3-d pattern [[64, 2], [8, 4], [1, 8]]", _current(
        lambda nisa, nl, dst, a: nisa.iota(dst, [[64, 2], [8, 4], [1, 8]], offset=0, channel_multiplier=1000)),
        lambda rng: (np.zeros((32, 2, 4, 8), np.int32),),
        lambda a: 1000 * np.arange(32)[:, None, None, None] + (64 * np.arange(2)[:, None, None]
                                                               + 8 * np.arange(4)[:, None] + np.arange(8))))
    rows.append(Form("current", "isa.affine_select", "cmp_op=greater with an offset: keep 10 + p - f > 0", _current(
        lambda nisa, nl, dst, a: nisa.affine_select(dst, [[-1, 64]], 1, a, 0.0, cmp_op=nl.greater, offset=10)),
        lambda rng: (_data("float32", 1, rng),),
        lambda a: np.where(10 + np.arange(32)[:, None] - np.arange(64)[None, :] > 0, _f64(a), 0.0)))
    rows.append(Form("current", "isa.dma_transpose", "axes=(1, 0) given, bfloat16 HBM [16, 64] -> SBUF [64, 16]", _raw(
        "current", lambda nl, nisa, x: (t := nl.ndarray(x.shape[::-1], x.dtype, buffer=nl.sbuf),
                                        nisa.dma_transpose(t, x, axes=(1, 0)), o := _out(nl, t.shape, x.dtype),
                                        nisa.dma_copy(o, t))[2]),
        lambda rng: (_data("bfloat16", 1, rng, P=16),), lambda x: _f64(x).T))
    rows.append(Form("current", "isa.memset", "a PSUM tile", _kernel(
        "current", lambda nl, nisa, a: (p := nl.ndarray(a.shape, nl.float32, buffer=nl.psum), nisa.memset(p, 0.25),
                                        nl.copy(p))[2], lambda a: a.shape, "float32"),
        lambda rng: (_data("float32", 1, rng),), lambda a: np.full(a.shape, 0.25)))
    rows.append(Form("current", "isa.tensor_scalar_cumulative", "reduce_cmd=load_reduce from imm1=10, op1=maximum",
                     _current(lambda nisa, nl, dst, a: nisa.tensor_scalar_cumulative(
                         dst, a, nl.add, nl.maximum, 1.0, imm1=10.0, reduce_cmd=nisa.reduce_cmd.load_reduce)),
                     lambda rng: (_data("float32", 1, rng) * 5,),
                     lambda a: np.maximum.accumulate(np.c_[np.full(32, 10.0), _f64(a) + 1], axis=1)[:, 1:], 1e-5))
    rows.append(Form("current", "isa.dma_copy", "dst_rmw_op=add: HBM += SBUF", _raw(
        "current", lambda nl, nisa, x, y: (o := _loaded(nl, x), nisa.dma_copy(o, nl.load(y), dst_rmw_op=nl.add))[0]),
        lambda rng: (_data("float32", 1, rng), _data("float32", 1, rng)), lambda x, y: _f64(x) + _f64(y), 1e-6))
    rows.append(Form("current", "isa.dma_copy", "HBM to HBM, float32 to bfloat16 (the DMA casts)", _raw(
        "current", lambda nl, nisa, x: (o := _out(nl, x.shape, nl.bfloat16), nisa.dma_copy(o, x))[0]),
        lambda rng: (_data("float32", 1, rng),), lambda x: _f64(x.astype(BF16))))
    return rows


def _masked(nl, nisa, x, op, cond):
    """zeros stored, then `op(t, mask)` of the loaded x stored where cond(i_p, i_f) holds."""
    out = _out(nl, x.shape, nl.float32)
    nl.store(out, nl.zeros(x.shape, nl.float32, buffer=nl.sbuf))
    i_p, i_f = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
    m = cond(i_p, i_f)
    t = nl.load(x[i_p, i_f], mask=m)
    nl.store(out[i_p, i_f], value=op(nl, nisa, t, m), mask=m)
    return out


MASKS = {"i_p < 16": (lambda p, f: p < 16, lambda p, f: p < 16),
         "i_f >= 40": (lambda p, f: f >= 40, lambda p, f: f >= 40),
         "(i_p < 20) & (i_f < 24)": (lambda p, f: (p < 20) & (f < 24), lambda p, f: (p < 20) & (f < 24)),
         "i_f <= i_p (a triangle)": (lambda p, f: f <= p, lambda p, f: f <= p)}
MASKED_OPS = {"language.exp": (lambda nl, nisa, t, m: nl.exp(t, mask=m), np.exp),
              "language.add": (lambda nl, nisa, t, m: nl.add(t, 2.0, mask=m), lambda x: x + 2),
              "isa.activation": (lambda nl, nisa, t, m: nisa.activation(op=nl.square, data=t, mask=m), np.square),
              "isa.tensor_scalar": (lambda nl, nisa, t, m: nisa.tensor_scalar(t, np.multiply, 3.0, mask=m),
                                    lambda x: 3 * x),
              "isa.tensor_copy": (lambda nl, nisa, t, m: nisa.tensor_copy(t, mask=m), lambda x: x)}


def _mask_rows() -> list[Form]:
    """The beta API's mask= on load, store, language and isa calls: rectangles and a triangle."""
    rows = []
    for text, (cond, keep) in MASKS.items():
        for function, (op, fn) in MASKED_OPS.items():
            rows.append(Form("beta", function, f"mask=({text}) on load, the op and store", _raw(
                "beta", lambda nl, nisa, x, op=op, cond=cond: _masked(nl, nisa, x, op, cond)),
                lambda rng: (_data("float32", 1, rng, small=True),),
                lambda x, fn=fn, keep=keep: np.where(keep(np.arange(32)[:, None], np.arange(64)[None, :]),
                                                     fn(_f64(x)), 0.0), 1e-6))
        for function in ("language.load", "language.store"):
            rows.append(Form("beta", function, f"mask=({text})", _raw(
                "beta", lambda nl, nisa, x, cond=cond: _masked(nl, nisa, x, lambda nl, nisa, t, m: nl.copy(t, mask=m),
                                                               cond)),
                lambda rng: (_data("float32", 1, rng),),
                lambda x, keep=keep: np.where(keep(np.arange(32)[:, None], np.arange(64)[None, :]), _f64(x), 0.0)))
    return rows


NPY = (np.arange(16 * 32) % 7).reshape(16, 32)  # small integers: exact in every dtype below


def _npy_constant(nl, dtype, by_path):
    """NPY in `dtype` given to shared_constant (as an array, or saved to a .npy file and given by its path),
    loaded and stored."""
    import os
    import tempfile
    import ml_dtypes
    constant = NPY.astype(getattr(ml_dtypes, dtype, None) or np.dtype(dtype))
    if by_path:
        np.save(path := os.path.join(tempfile.mkdtemp(), "constant.npy"), constant)
        constant = path
    out = _out(nl, NPY.shape, getattr(nl, dtype))
    nl.store(out, nl.load(nl.shared_constant(constant)))
    return out


def _language_param_rows() -> list[Form]:
    """Current nki.language parameters left at their defaults above."""
    rows = []
    for dt in ("int32", "uint8", "float16", "bfloat16", "float8_e4m3fn"):
        # numpy's .npy format has no bfloat16 or fp8 (it saves them as raw bytes): those come as arrays
        path = dt in ("int32", "uint8", "float16")
        rows.append(Form("current", "language.shared_constant", f"{'a .npy path' if path else 'an array'} holding "
                         f"{dt} values", _raw("current", lambda nl, nisa, x, dt=dt, path=path: _npy_constant(
                             nl, dt, path)), lambda rng: (np.zeros(1, np.float32),), lambda x: NPY))
    rows.append(Form("current", "language.ndarray", "address=(32, 1024): a tile placed at partition 32, byte 1024",
                     _kernel("current", lambda nl, nisa, a: _copy_into("current", nl, nisa, nl.ndarray(
                         a.shape, a.dtype, buffer=nl.sbuf, address=(32, 1024)), a), lambda a: a.shape),
                     lambda rng: (_data("float32", 1, rng),), _f64))
    rows.append(Form("current", "language.shared_identity_matrix", "into a given dst tile", _kernel(
        "current", lambda nl, nisa, a: nl.shared_identity_matrix(32, dtype=nl.float32,
                                                                 dst=nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)),
        lambda a: (32, 32), "float32"), lambda rng: (np.zeros((32, 32), np.float32),), lambda a: np.eye(32)))
    rows.append(Form("current", "language.device_print", "an HBM tensor", _printed_hbm("t ="),
                     lambda rng: (np.arange(6, dtype=np.float32).reshape(2, 3),), lambda x: np.ones(1)))
    rows.append(Form("current", "language.rand", "float32 in PSUM: uniform in [0, 1)", _raw(
        "current", lambda nl, nisa, x: (o := _out(nl, x.shape, nl.float32),
                                        nl.store(o, nl.copy(nl.rand(x.shape, nl.float32, buffer=nl.psum))))[0],
        post=lambda out, x: _uniform_stats(out)),
        lambda rng: (np.zeros((32, 64), np.float32),), lambda x: UNIFORM, 0.03))
    return rows


def _printed_hbm(prefix):
    """device_print of a kernel's HBM argument: [1.0] when the prefix and the values were printed first."""
    def build():
        import contextlib
        import io
        kernel = _raw("current", lambda nl, nisa, x: (nl.device_print(prefix, x), _loaded(nl, x))[1])()

        def run(x):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                kernel(x)
            return np.array([float(text.getvalue().startswith(f"{prefix} {x}\n"))])
        return run
    return build


def _more_language_rows() -> list[Form]:
    """More documented forms of the language in both APIs: matmul without transpose_x, broadcasts along the
    partition dim, per-partition dropout rates, casting transposes and loads, expand_dims in the middle."""
    rows = []
    for api in ("current", "beta"):
        rows.append(Form(api, "language.matmul", "transpose_x=False: x [32, 64] @ y [64, 48]", _kernel(
            api, lambda nl, nisa, a, b: nl.copy(nl.matmul(a, b)), lambda a, b: (a.shape[0], b.shape[1]), "float32"),
            lambda rng: (_data("float32", 1, rng), rng.standard_normal((64, 48)).astype(np.float32)),
            lambda a, b: _f64(a) @ _f64(b), 1e-4))
        rows.append(Form(api, "language.broadcast_to", "[1, 64] to [32, 64]: along the partition dim", _kernel(
            api, lambda nl, nisa, a: nl.broadcast_to(a[0:1, :], shape=a.shape), lambda a: a.shape, "float32"),
            lambda rng: (_data("float32", 1, rng),), lambda a: np.broadcast_to(_f64(a)[:1], a.shape), 1e-6))
        rows.append(Form(api, "language.broadcast_to", "a [32, 1, 1] tile to [32, 4, 16], dtype=bfloat16",
                         _kernel(api, lambda nl, nisa, a: nl.broadcast_to(nl.expand_dims(a[:, 0:1], 2),
                                                                          shape=(32, 4, 16), dtype=nl.bfloat16),
                                 lambda a: (32, 4, 16), "bfloat16"),
                         lambda rng: (_data("float32", 1, rng),),
                         lambda a: np.broadcast_to(_f64(a[:, :1].astype(BF16))[:, :, None], (32, 4, 16))))
        rows.append(Form(api, "language.dropout", "a [P, 1] rate tile: 0 on even partitions, 1 on odd", _kernel(
            api, lambda nl, nisa, a, r: nl.dropout(a, r), lambda a, r: a.shape),
            lambda rng: (_data("float32", 1, rng, positive=True), (np.arange(32) % 2).astype(np.float32)[:, None]),
            lambda a, r: _f64(a) * (1 - r)))
        rows.append(Form(api, "language.transpose", "float32 with dtype=bfloat16", _kernel(
            api, lambda nl, nisa, a: nl.copy(nl.transpose(a, dtype=nl.bfloat16)), lambda a: a.shape[::-1], "bfloat16"),
            lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a.astype(BF16)).T))
        rows.append(Form(api, "language.load_transpose2d", "bfloat16 HBM with dtype=float32", _raw(
            api, lambda nl, nisa, x: (o := _out(nl, x.shape[::-1], nl.float32),
                                      nl.store(o, nl.load_transpose2d(x, dtype=nl.float32)))[0]),
            lambda rng: (_data("bfloat16", 1, rng),), lambda x: _f64(x).T))
        rows.append(Form(api, "language.expand_dims", "[32, 64] -> [32, 1, 64] (axis=1)", _kernel(
            api, lambda nl, nisa, a: nl.copy(nl.expand_dims(a, 1)), lambda a: (a.shape[0], 1, a.shape[1])),
            lambda rng: (_data("float32", 1, rng),), lambda a: _f64(a)[:, None, :]))
        rows.append(Form(api, "language.where", "a scalar y", _kernel(
            api, lambda nl, nisa, c, a: nl.where(c, a, -3.0), lambda c, a: a.shape),
            lambda rng: (_small_ints("float32", rng, 0, 2), _data("float32", 1, rng)),
            lambda c, a: np.where(c != 0, _f64(a), -3.0)))
    return rows


def _reduce_chain(nl, nisa, a, r):
    """Two tensor_scalar_reduce calls, on the two column halves of a, summing into the Vector engine's lane
    accumulators (lanes are partitions: both halves share them); only the last call writes reduce_res."""
    h = a.shape[1] // 2
    t = nl.ndarray((a.shape[0], h), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(t, a[:, :h], nl.add, 1.0, nl.add, reduce_res=None,
                              reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar_reduce(t, a[:, h:], nl.add, 1.0, nl.add, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)


def _release_rows() -> list[Form]:
    """Forms the current API's release notes added: accumulator chains, small DMA transposes, trn3 operators
    and FP8 (OCP) matmuls."""
    rows = []
    rows.append(Form("current", "isa.tensor_scalar_reduce", "a chain: reduce_res=None, then reduce into reduce_res",
                     _current(lambda nisa, nl, dst, a, _z: _reduce_chain(nl, nisa, a, dst), out_dtype="float32",
                              shape_of=1),
                     lambda rng: (_data("float32", 1, rng), np.zeros((32, 1), np.float32)),
                     lambda a, _z: (_f64(a) + 1).sum(1, keepdims=True), 1e-4))
    for p, f in ((4, 64), (8, 100), (2, 128)):
        rows.append(Form("current", "isa.dma_transpose", f"bfloat16 [{p}, {f}] -> [{f}, {p}] with hwdge", _raw(
            "current", lambda nl, nisa, x: (t := nl.ndarray(x.shape[::-1], x.dtype, buffer=nl.sbuf),
                                            nisa.dma_transpose(t, x, dge_mode=nisa.dge_mode.hwdge),
                                            o := _out(nl, t.shape, x.dtype), nisa.dma_copy(o, t))[2]),
            lambda rng, p=p, f=f: (rng.standard_normal((p, f)).astype(BF16),), lambda x: _f64(x).T))
    for op, fn in (("square", np.square), ("relu", lambda x: np.maximum(x, 0))):
        rows.append(Form("current", "isa.tensor_scalar", f"op0={op} (a trn3 operator), op1=add 1.0", _current(
            lambda nisa, nl, dst, a, op=op: nisa.tensor_scalar(dst, a, getattr(nl, op), 0.0, op1=nl.add, operand1=1.0)),
            lambda rng: (_data("float32", 2, rng),), lambda a, fn=fn: fn(_f64(a)) + 1, 1e-6, "trn3"))
    import ml_dtypes
    for name in ("float8_e4m3fn", "float8_e4m3", "float8_e5m2"):
        dt = getattr(ml_dtypes, name)
        rows.append(Form("current", "isa.nc_matmul", f"{name} operands on trn3", _matmul_fp8(),
                         lambda rng, dt=dt: (rng.standard_normal((64, 32)).astype(dt),
                                             rng.standard_normal((64, 64)).astype(dt)),
                         lambda a, b: _f64(a).T @ _f64(b), 1e-5, "trn3"))
    return rows


def _matmul_fp8():
    return _raw("current", lambda nl, nisa, a, b: (
        sa := nl.load(a), sb := nl.load(b), ps := nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum),
        nisa.nc_matmul(ps, sa, sb), o := _out(nl, ps.shape, nl.float32), nl.store(o, nl.copy(ps)))[4])


def _viewed(view, shape_of, dtype=None):
    """A current-API kernel storing a copy of `view(t)` of the loaded first argument (other arguments loaded
    too, given to view); the output has shape `shape_of(*args)` and dtype `dtype` (the argument's)."""
    def body(nl, nisa, x, *rest):
        t = nl.load(x)
        v = view(nl, t, *[nl.load(r) for r in rest])
        out = _out(nl, shape_of(x, *rest), getattr(nl, dtype) if dtype else x.dtype)
        c = nl.ndarray(v.shape, v.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(c, v)
        nl.store(out, c)
        return out
    return _raw("current", body)


def _tensor_rows() -> list[Form]:
    """Methods of nki.language.NkiTensor (the views of NKI 0.5): each view copied out and compared with numpy's."""
    rows = []
    x2 = lambda rng: (_data("float32", 1, rng),)  # noqa: E731 - [32, 64]
    x3 = lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),)  # noqa: E731
    views = {
        "slice": ("slice(1, 8, 40, 2): every other column of 8..40", x2, lambda nl, t: t.slice(1, 8, 40, 2),
                  lambda x: _f64(x)[:, 8:40:2]),
        "select": ("select(1, 2) of a [32, 4, 16] tile", x3, lambda nl, t: t.select(1, 2), lambda x: _f64(x)[:, 2]),
        "permute": ("permute((0, 2, 1)) of a [32, 4, 16] tile", x3, lambda nl, t: t.permute((0, 2, 1)),
                    lambda x: np.transpose(_f64(x), (0, 2, 1))),
        "broadcast": ("broadcast(1, 4) of a [32, 1, 16] view", x3, lambda nl, t: t[:, 1:2, :].broadcast(1, 4),
                      lambda x: np.broadcast_to(_f64(x)[:, 1:2], (32, 4, 16))),
        "expand_dim": ("expand_dim(1) of a [32, 64] tile", x2, lambda nl, t: t.expand_dim(1),
                       lambda x: _f64(x)[:, None]),
        "squeeze_dim": ("squeeze_dim(1) of a [32, 1, 16] view", x3, lambda nl, t: t[:, 3:4, :].squeeze_dim(1),
                        lambda x: _f64(x)[:, 3]),
        "reshape_dim": ("reshape_dim(1, (4, -1)) of a [32, 64] tile", x2, lambda nl, t: t.reshape_dim(1, (4, -1)),
                        lambda x: _f64(x).reshape(32, 4, 16)),
        "flatten_dims": ("flatten_dims(1, 2) of a [32, 4, 16] tile", x3, lambda nl, t: t.flatten_dims(1, 2),
                         lambda x: _f64(x).reshape(32, 64)),
        "reshape": ("reshape((32, 2, 32)) of a [32, 4, 16] tile", x3, lambda nl, t: t.reshape((32, 2, 32)),
                    lambda x: _f64(x).reshape(32, 2, 32)),
        "rearrange": ("('b', ('h', 'w')) -> ('b', 'w', 'h'), h=4, of a [32, 64] tile", x2,
                      lambda nl, t: t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}),
                      lambda x: np.transpose(_f64(x).reshape(32, 4, 16), (0, 2, 1))),
        "ap": ("ap([[64, 32], [2, 32]], offset=1): the odd columns", x2,
               lambda nl, t: t.ap(pattern=[[64, 32], [2, 32]], offset=1), lambda x: _f64(x)[:, 1::2]),
        "ap ": ("t[8:16, 4:36].ap([[64, 8], [1, 8]], offset=2): from the view's start, 2 further", x2,
                lambda nl, t: t[8:16, 4:36].ap([[64, 8], [1, 8]], offset=2), lambda x: _f64(x)[8:16, 6:14]),
        "__getitem__": ("t[:, 0:64:4] and t[..., 3] of a 3-d tile", x3, lambda nl, t: t[:, 0:4:2][..., 3],
                        lambda x: _f64(x)[:, 0:4:2, 3]),
    }
    for method, (form, inputs, view, ref) in views.items():
        rows.append(Form("current", f"language.NkiTensor.{method.strip()}", form, _viewed(
            lambda nl, t, view=view: view(nl, t), lambda x, view=view, ref=ref: ref(np.zeros(x.shape)).shape),
            inputs, ref))
    for dt, ratio in (("uint8", 4), ("int32", 1)):
        rows.append(Form("current", "language.NkiTensor.view", f"float32 [32, 64] viewed as {dt}", _viewed(
            lambda nl, t, dt=dt: t.view(getattr(nl, dt)), lambda x, ratio=ratio: (32, 64 * ratio), dt), x2,
            lambda x, dt=dt: x.view(dt).astype(np.int64)))
    rows.append(Form("current", "language.NkiTensor.ap", "an HBM view x[4:12].ap([[64, 8], [1, 16]], offset=3)",
                     _raw("current", lambda nl, nisa, x: (t := nl.ndarray((8, 16), x.dtype, buffer=nl.sbuf),
                                                          nisa.dma_copy(t, x[4:12].ap([[64, 8], [1, 16]], offset=3)),
                                                          o := _out(nl, (8, 16), x.dtype), nl.store(o, t))[2]),
                     x2, lambda x: _f64(x)[4:12, 3:19]))
    rows.append(Form("current", "language.NkiTensor.get_pattern", "ap(get_pattern()) is the same view", _viewed(
        lambda nl, t: t[:, 4:36].ap(pattern=t[:, 4:36].get_pattern()), lambda x: (32, 32)), x2,
        lambda x: _f64(x)[:, 4:36]))
    rows.append(Form("current", "language.NkiTensor.is_contiguous", "a tile, a column slice, a stepped slice, a "
                     "permuted 3-d tile", _kernel("current", lambda nl, nisa, a, b: nl.full((1, 4), float(
                         a.is_contiguous() + 2 * a[:, 8:16].is_contiguous() + 4 * a[:, 0:64:2].is_contiguous()
                         + 8 * b.permute((0, 2, 1)).is_contiguous()), nl.float32, buffer=nl.sbuf),
                         lambda a, b: (1, 4), "float32"),
                     lambda rng: (_data("float32", 1, rng), rng.standard_normal((32, 4, 16)).astype(np.float32)),
                     lambda a, b: np.full((1, 4), 1.0 + 2)))
    rows.append(Form("current", "language.NkiTensor.vector_select", "an HBM [64, 8] tensor, per-partition row "
                     "offsets [32, 1]", _raw("current", lambda nl, nisa, x, i: _gathered(nl, nisa, x, i)),
                     lambda rng: (rng.standard_normal((64, 8)).astype(np.float32),
                                  rng.integers(0, 64, (32, 1)).astype(np.int32)),
                     lambda x, i: _f64(x)[i[:, 0]]))
    rows.append(Form("current", "language.NkiTensor.is_indirect", "false of a tile, true of a vector_select",
                     _raw("current", lambda nl, nisa, x, i: _indirect_flags(nl, x, i)),
                     lambda rng: (rng.standard_normal((64, 8)).astype(np.float32), np.zeros((32, 1), np.int32)),
                     lambda x, i: np.full((1, 1), 2.0)))
    rows.append(Form("current", "language.NkiTensor.indirect", "an SBUF [128, 64] tensor read through 24 column "
                     "offsets of an index [128, 2] (column k at index[k % 16, k // 16]) by tensor_copy",
                     _raw("current", lambda nl, nisa, x, i: _indirect_copy(nl, nisa, x, i, 24)),
                     lambda rng: (rng.standard_normal((128, 64)).astype(np.float32),
                                  rng.integers(0, 64, (128, 2)).astype(np.int32)),
                     lambda x, i: _f64(x)[:, [i[k % 16, k // 16] for k in range(24)]], 0.0, "trn3"))
    return rows


def _indirect_copy(nl, nisa, x, i, n):
    t, idx = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf), nl.ndarray(i.shape, i.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    nisa.dma_copy(idx, i)
    d = nl.ndarray((x.shape[0], n), x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(d, t.indirect(idx, n))
    out = _out(nl, d.shape, d.dtype)
    nisa.dma_copy(out, d)
    return out


def _gathered(nl, nisa, x, i):
    out = _out(nl, (i.shape[0], x.shape[1]), x.dtype)
    t = nl.ndarray((i.shape[0], x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x.vector_select(0, nl.load(i)))
    nl.store(out, t)
    return out


def _indirect_flags(nl, x, i):
    out = _out(nl, (1, 1), nl.float32)
    flags = float(x.is_indirect() + 2 * x.vector_select(0, nl.load(i)).is_indirect())
    nl.store(out, nl.full((1, 1), flags, nl.float32, buffer=nl.sbuf))
    return out


def _beta_breadth_rows() -> list[Form]:
    """Beta isa parameter forms beyond the plain ones: engines, bias and scale tiles, two operators reversed,
    casts by dtype=, several reduced axes with negate, integer and GpSimd forms."""
    rows = []
    b = "beta"
    for eng, shape in (("vector", (32, 32)), ("tensor", (32, 64))):
        rows.append(Form(b, "isa.nc_transpose", f"engine={eng}, float32 {list(shape)}", _kernel(
            b, lambda nl, nisa, a, eng=eng: nl.copy(nisa.nc_transpose(a, engine=getattr(nisa, f"{eng}_engine"))),
            lambda a: a.shape[::-1]),
            lambda rng, shape=shape: (rng.standard_normal(shape).astype(np.float32),), lambda a: _f64(a).T, 1e-6))
    rows.append(Form(b, "isa.activation", "op=exp with a [P, 1] bias tile and a [P, 1] scale tile", _kernel(
        b, lambda nl, nisa, a, bias, s: nisa.activation(op=nl.exp, data=a, bias=bias, scale=s),
        lambda a, bias, s: a.shape),
        lambda rng: (_data("float32", 1, rng, small=True), rng.standard_normal((32, 1)).astype(np.float32) / 4,
                     rng.standard_normal((32, 1)).astype(np.float32)),
        lambda a, bias, s: np.exp(_f64(a) * _f64(s) + _f64(bias)), 1e-5))
    rows.append(Form(b, "isa.tensor_scalar", "(2.0 - data) * [P, 1] column, reverse0", _kernel(
        b, lambda nl, nisa, a, c: nisa.tensor_scalar(a, np.subtract, 2.0, reverse0=True, op1=np.multiply, operand1=c),
        lambda a, c: a.shape),
        lambda rng: (_data("float32", 2, rng), rng.standard_normal((32, 1)).astype(np.float32)),
        lambda a, c: (2.0 - _f64(a)) * _f64(c)[:, :, None], 1e-6))
    rows.append(Form(b, "isa.tensor_copy", "float32 to bfloat16 by dtype=, on the scalar engine", _kernel(
        b, lambda nl, nisa, a: nisa.tensor_copy(a, dtype=nl.bfloat16, engine=nisa.scalar_engine), lambda a: a.shape,
        "bfloat16"),
        lambda rng: (_data("float32", 2, rng),), lambda a: _f64(a.astype(BF16))))
    rows.append(Form(b, "isa.tensor_reduce", "op=maximum over free axes (1, 2), negate=True, keepdims", _kernel(
        b, lambda nl, nisa, a: nisa.tensor_reduce(np.maximum, a, axis=(1, 2), negate=True, keepdims=True),
        lambda a: (a.shape[0], 1, 1), "float32"),
        lambda rng: (rng.standard_normal((32, 4, 16)).astype(np.float32),),
        lambda a: -_f64(a).max(axis=(1, 2), keepdims=True), 1e-6))
    for op, fn in (("add", np.add), ("bitwise_and", np.bitwise_and), ("maximum", np.maximum)):
        rows.append(Form(b, "isa.tensor_tensor", f"int32 op={op} on the GpSimd engine", _kernel(
            b, lambda nl, nisa, x, y, op=op: nisa.tensor_tensor(x, y, getattr(np, op), engine=nisa.gpsimd_engine),
            lambda x, y: x.shape, "int32"),
            lambda rng: (rng.integers(-1000, 1000, (32, 64)).astype(np.int32),
                         rng.integers(-1000, 1000, (32, 64)).astype(np.int32)),
            lambda x, y, fn=fn: fn(x.astype(np.int64), y.astype(np.int64))))
    rows.append(Form(b, "isa.memset", "engine=gpsimd, bfloat16", _kernel(
        b, lambda nl, nisa, a: nisa.memset(a.shape, -2.5, nl.bfloat16, engine=nisa.gpsimd_engine), lambda a: a.shape,
        "bfloat16"), lambda rng: (_data("float32", 2, rng),), lambda a: np.full(a.shape, -2.5)))
    rows.append(Form(b, "isa.dma_copy", "HBM to HBM, whole tensors", _raw(
        b, lambda nl, nisa, x: (o := _out(nl, x.shape, x.dtype), nisa.dma_copy(dst=o, src=x))[0]),
        lambda rng: (_data("float32", 2, rng),), _f64))
    rows.append(Form(b, "isa.nc_matmul", "is_transpose=True with an identity moving tile: NaN and Inf kept", _kernel(
        b, lambda nl, nisa, a: nl.copy(nisa.nc_matmul(a, nl.load(nl.shared_identity_matrix(32, dtype=nl.float32)),
                                                      is_transpose=True)), lambda a: a.shape[::-1], "float32"),
        _with_nonfinite, lambda a: _f64(a).T))
    rows.append(Form("current", "isa.nc_matmul", "is_transpose=True with an identity moving tile: NaN and Inf kept",
                     _kernel("current", lambda nl, nisa, a: _pe_transpose_mode(nl, nisa, a), lambda a: a.shape[::-1],
                             "float32"), _with_nonfinite, lambda a: _f64(a).T))
    return rows


def _with_nonfinite(rng):
    a = _data("float32", 1, rng)[:, :32].copy()
    a[3, 5], a[7, 1], a[0, 31] = np.nan, np.inf, -np.inf
    return (a,)


def _pe_transpose_mode(nl, nisa, a):
    ps = nl.ndarray(a.shape[::-1], nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, a, nl.shared_identity_matrix(a.shape[0], dtype=nl.float32), is_transpose=True)
    return nl.copy(ps)


def _coalesced(nl, nisa, r, x, call, shapes):
    """call(srcs, dsts) with two HBM tensors per list: rows 0..31 and 32..63 of x[r]; each dst copied out."""
    srcs = [x[r][0:32], x[r][32:64]]
    dsts = [nl.ndarray(s, x.dtype, buffer=nl.hbm) for s in shapes]
    call(srcs, dsts)
    outs = []
    for d in dsts:
        outs.append(_per_rank(nl, nisa, r, d.shape, x.dtype, d))
    return tuple(outs)


def _stacked(outs, *_):
    return np.concatenate([np.asarray(o).reshape(2, -1) for o in outs], 1)


def _coalesced_rows() -> list[Form]:
    """Coalesced collectives (lists of two HBM tensors) and collectives on SBUF along other dims."""
    rows = []
    x = lambda rng: (rng.standard_normal((2, 64, 16)).astype(np.float32),)  # noqa: E731
    halves = lambda x: (x[:, 0:32], x[:, 32:64])  # noqa: E731 - each rank's two srcs
    rows.append(Form("current", "collectives.all_reduce", "coalesced: two HBM tensors in one call", _ranks_post(
        lambda nl, nisa, cc, G, r, x: _coalesced(nl, nisa, r, x, lambda s, d: cc.all_reduce(s, d, G, nl.add),
                                                 [(32, 16), (32, 16)])), x,
        lambda x: np.broadcast_to(np.concatenate([(h[0] + h[1]).reshape(-1) for h in halves(_f64(x))]), (2, 1024)),
        1e-6))
    rows.append(Form("current", "collectives.all_gather", "coalesced: two HBM tensors, collective_dim=0", _ranks_post(
        lambda nl, nisa, cc, G, r, x: _coalesced(nl, nisa, r, x, lambda s, d: cc.all_gather(s, d, G, 0),
                                                 [(64, 16), (64, 16)])), x,
        lambda x: np.broadcast_to(np.concatenate([np.concatenate([h[0], h[1]]).reshape(-1) for h in halves(_f64(x))]),
                                  (2, 2048))))
    rows.append(Form("current", "collectives.reduce_scatter", "coalesced: two HBM tensors, collective_dim=0",
                     _ranks_post(lambda nl, nisa, cc, G, r, x: _coalesced(
                         nl, nisa, r, x, lambda s, d: cc.reduce_scatter(s, d, G, 0, nl.add), [(16, 16), (16, 16)])), x,
                     lambda x: np.stack([np.concatenate([(h[0] + h[1])[k * 16:(k + 1) * 16].reshape(-1)
                                                         for h in halves(_f64(x))]) for k in range(2)]), 1e-6))
    rows.append(Form("current", "collectives.all_to_all", "coalesced: two HBM tensors, collective_dim=0", _ranks_post(
        lambda nl, nisa, cc, G, r, x: _coalesced(nl, nisa, r, x, lambda s, d: cc.all_to_all(s, d, G, 0),
                                                 [(32, 16), (32, 16)])), x,
        lambda x: np.stack([np.concatenate([np.concatenate([h[0][k * 16:(k + 1) * 16], h[1][k * 16:(k + 1) * 16]])
                                            .reshape(-1) for h in halves(_f64(x))]) for k in range(2)])))
    for dim in (0, 1):
        shape = (16, 16) if dim == 0 else (32, 8)
        rows.append(Form("current", "collectives.reduce_scatter", f"SBUF tiles, collective_dim={dim}", _ranks(
            lambda nl, nisa, cc, G, r, x, shape=shape, dim=dim: _sbuf_collective(
                nl, nisa, r, x, lambda s, d: cc.reduce_scatter([s], [d], G, collective_dim=dim, op=nl.add), shape)),
            lambda rng: (rng.standard_normal((2, 32, 16)).astype(np.float32),),
            lambda x, dim=dim: np.stack(np.split(_f64(x[0]) + _f64(x[1]), 2, axis=dim)), 1e-6))
    return rows


def _ranks_post(body):
    """_ranks, its outputs stacked rank by rank ([2, n]) for one comparison."""
    def build():
        run = _ranks(body)()
        return lambda *args: _stacked(run(*args))
    return build


def _sign_rows() -> list[Form]:
    """Signs the reference spells out: right_shift is the ALU's logical shift (no arithmetic one), mod takes the
    divisor's sign and fmod the dividend's."""
    rows = []
    for api in ("current", "beta"):
        rows.append(Form(api, "language.right_shift", "negative int32: a logical shift (zeros come in)",
                         _lang(api, "right_shift", 2),
                         lambda rng: (rng.integers(-10 ** 6, 10 ** 6, (32, 64)).astype(np.int32),
                                      rng.integers(0, 8, (32, 64)).astype(np.int32)),
                         lambda a, b: (a.view(np.uint32) >> b.astype(np.uint32)).view(np.int32).astype(np.int64)))
        rows.append(Form(api, "language.left_shift", "negative int32", _lang(api, "left_shift", 2),
                         lambda rng: (rng.integers(-10 ** 4, 10 ** 4, (32, 64)).astype(np.int32),
                                      rng.integers(0, 8, (32, 64)).astype(np.int32)),
                         lambda a, b: np.left_shift(a, b).astype(np.int64)))
        for name, fn in (("mod", np.mod), ("fmod", np.fmod)):
            rows.append(Form(api, f"language.{name}", "float32 signed tiles, negative divisors included",
                             _lang(api, name, 2),
                             lambda rng: (_math_input("wide", "float32", rng),
                                          (_math_input("positive", "float32", rng)
                                           * rng.choice([-1, 1], (32, 64))).astype(np.float32)),
                             lambda a, b, fn=fn: fn(_f64(a), _f64(b)), 1e-5))
    return rows


def _reference_rows() -> list[Form]:
    return (_both_language_rows() + _control_rows() + _beta_index_rows() + _current_isa_rows() + _collective_rows() + _v_rows()
            + _beta_isa_more_rows() + _launch_rows() + _breadth_rows() + _axes_rows()
            + _more_param_rows() + _mask_rows() + _language_param_rows()
            + _more_language_rows() + _release_rows() + _tensor_rows()
            + _beta_breadth_rows() + _coalesced_rows() + _sign_rows())


FORMS: list[Form] = _rows() + _reference_rows()
