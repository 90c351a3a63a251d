"""The semantics tables: ALU operators (op/op0/op1 of Vector/GpSimd instructions) and ScalarE activation
functions, one line each, computed in FP32 as the engines do (reference 3.8, 3.9).

Where hardware differs from numpy the line says so. Activation functions are piecewise polynomials on
hardware; these are the exact functions, so values agree to the hardware's approximation error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from trnsim.core.errors import KernelError
from trnsim.errors import UnknownNameError


@dataclass(frozen=True)
class AluOp:
    name: str
    fn: Callable
    kind: str  # "arith" (FP32 math) | "bitvec" (integer bit patterns) | "unary"
    reduce: Callable | None = None  # numpy ufunc used when the op reduces along an axis
    identity: float | None = None


def _f(a, b, fn):
    with np.errstate(all="ignore"):
        return fn(a, b)


def _power(a, b):
    """Arithmetic ops take integers through floats (the ISA reference's operator table), so an integer raised
    to a negative power is a fraction (2 ** -2 = 0.25), which the output conversion rounds and saturates into
    an integer destination; numpy's integer power refuses negative exponents. Float64 keeps integer results
    exact up to 2**53, past any integer destination's range."""
    if a.dtype.kind in "iub" or b.dtype.kind in "iub":
        a, b = a.astype(np.float64), b.astype(np.float64)
    return _f(a, b, np.power)


def _shift_right(a, b):
    # Logical shift on the unsigned bit pattern: the ALU has no arithmetic right shift.
    ua = a.astype(np.uint64) & np.uint64((1 << (8 * a.dtype.itemsize)) - 1)
    return (ua >> b.astype(np.uint64)).astype(a.dtype)


_ALU = [
    AluOp("add", np.add, "arith", np.add, 0.0),
    AluOp("subtract", np.subtract, "arith", np.subtract, 0.0),
    AluOp("multiply", np.multiply, "arith", np.multiply, 1.0),
    AluOp("divide", lambda a, b: _f(a, b, np.divide), "arith"),
    AluOp("maximum", np.maximum, "arith", np.maximum, -np.inf),
    AluOp("minimum", np.minimum, "arith", np.minimum, np.inf),
    # The signed operand of the larger (smaller) magnitude; b on a tie (nki.language.abs_max, abs_min)
    AluOp("abs_max", lambda a, b: np.where(np.abs(a) > np.abs(b), a, b), "arith"),
    AluOp("abs_min", lambda a, b: np.where(np.abs(a) < np.abs(b), a, b), "arith"),
    AluOp("power", _power, "arith"),
    AluOp("fmod", lambda a, b: _f(a, b, np.fmod), "arith"),  # the ALU remainder keeps the dividend's sign
    AluOp("mod", lambda a, b: _f(a, b, np.mod), "arith"),
    AluOp("equal", lambda a, b: (a == b).astype(np.float32), "arith"),
    AluOp("not_equal", lambda a, b: (a != b).astype(np.float32), "arith"),
    AluOp("greater", lambda a, b: (a > b).astype(np.float32), "arith"),
    AluOp("greater_equal", lambda a, b: (a >= b).astype(np.float32), "arith"),
    AluOp("less", lambda a, b: (a < b).astype(np.float32), "arith"),
    AluOp("less_equal", lambda a, b: (a <= b).astype(np.float32), "arith"),
    AluOp("logical_and", lambda a, b: ((a != 0) & (b != 0)).astype(np.float32), "arith"),
    AluOp("logical_or", lambda a, b: ((a != 0) | (b != 0)).astype(np.float32), "arith"),
    AluOp("logical_xor", lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32), "arith"),
    AluOp("bitwise_and", np.bitwise_and, "bitvec", np.bitwise_and),
    AluOp("bitwise_or", np.bitwise_or, "bitvec", np.bitwise_or),
    AluOp("bitwise_xor", np.bitwise_xor, "bitvec", np.bitwise_xor),
    AluOp("left_shift", lambda a, b: np.left_shift(a, b.astype(a.dtype)), "bitvec"),
    AluOp("right_shift", _shift_right, "bitvec"),
    # Unary ALU ops ignore their scalar operand.
    AluOp("invert", lambda a, b: np.invert(a), "bitvec"),
    AluOp("abs", lambda a, b: np.abs(a), "unary"),
    AluOp("square", lambda a, b: a * a, "unary"),
    AluOp("relu", lambda a, b: np.maximum(a, 0), "unary"),
    AluOp("rsqrt", lambda a, b: _f(a, a, lambda x, _: 1 / np.sqrt(x)), "unary"),
    AluOp("reciprocal", lambda a, b: _f(a, a, lambda x, _: 1 / x), "unary"),
    AluOp("negative", lambda a, b: -a, "unary"),
    AluOp("bypass", lambda a, b: a, "unary"),  # skip this stage of a two-op chain
]
ALU: dict[str, AluOp] = {o.name: o for o in _ALU}
ALU["max"], ALU["min"] = ALU["maximum"], ALU["minimum"]


def alu(name) -> AluOp:
    name = op_name(name)
    if name not in ALU:
        raise UnknownNameError("ALU operator", name, sorted(ALU))
    return ALU[name]


# numpy's reductions name the ALU op they fold with: beta kernels pass np.sum as an activation or tensor_reduce
# reduce_op (nki-samples' attention kernels do), which the compiler takes as the addition it is.
_REDUCTIONS = {"sum": "add", "prod": "multiply", "amax": "max", "amin": "min"}


def op_name(op) -> str:
    """An operator's name from a string or an nki.language function (`nl.add` -> 'add', `np.sum` -> 'add')."""
    if op is None:
        return "bypass"
    name = getattr(op, "op_name", None) or getattr(op, "__name__", None) or str(op)
    return _REDUCTIONS.get(name, name)


# -- activation functions --------------------------------------------------------------------------
def _erf(x):
    # Abramowitz & Stegun 7.1.26 refined by one Newton-free correction: |error| < 1.5e-7, below FP32 ulp at 1.
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return np.sign(x) * y


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _gelu_dx(x):
    return 0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _gelu_sig_dx(x):
    s = _sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


def _softplus(x):
    return np.logaddexp(0.0, x)


ACTIVATIONS: dict[str, Callable] = {
    "copy": lambda x: x, "identity": lambda x: x, "bypass": lambda x: x,
    "square": lambda x: x * x, "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, 0),
    "gelu": _gelu, "gelu_dx": _gelu_dx, "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(1.702 * x), "gelu_apprx_sigmoid_dx": _gelu_sig_dx,
    "silu": lambda x: x * _sigmoid(x), "silu_dx": _silu_dx, "tanh": np.tanh, "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)), "erf": _erf,
    "erf_dx": lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x), "exp": np.exp, "sign": np.sign, "abs": np.abs,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "reciprocal": lambda x: 1.0 / x,
    "sin": np.sin, "cos": np.cos, "arctan": np.arctan, "tan": np.tan, "negative": np.negative,
}


def activation_fn(op, relu_param: float = 0.0) -> Callable:
    name = op_name(op)
    if name == "prelu":  # leaky relu with slope relu_param below zero
        return lambda x: np.where(x >= 0, x, x * np.float32(relu_param))
    if name not in ACTIVATIONS:
        raise UnknownNameError("activation function", name, sorted(ACTIVATIONS) + ["prelu"])
    fn = ACTIVATIONS[name]

    def run(x):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x), dtype=np.float32)
    return run


def reduce_ufunc(op) -> AluOp:
    o = alu(op)
    if o.reduce is None:
        raise KernelError(f"{o.name} cannot be a reduction op; reductions: "
                          f"{', '.join(sorted(n for n, x in ALU.items() if x.reduce is not None))}")
    return o
