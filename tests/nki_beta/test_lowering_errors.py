"""Bad forms of the `nl.*` ops give a named trnsim error with the rule and the kernel's line, the same in
both API generations (nki/lower.py checks them), never a Python builtin exception."""
import os

import numpy as np
import pytest

import trnsim.nki as nki_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki_beta
import trnsim.nki.beta.language as nl_beta
from trnsim.core.errors import DTypeError, ShapeError
from trnsim.nki.lower import OperandError

X = np.ones((8, 16), np.float32)
I = np.full((8, 16), 3, np.int32)
V = np.ones((16,), np.float32)

# name -> (call(nl, x, i, v) in a kernel (x, i loaded; v the 1-d HBM argument), error class, rule words)
CASES = {
    "negative dim": (lambda nl, x, i, v: nl.ndarray((-1, 4), nl.float32, buffer=nl.sbuf), ShapeError, "a dim is a count"),
    "1-d load_transpose2d": (lambda nl, x, i, v: nl.load_transpose2d(v), ShapeError, "must be a 2-d tile"),
    "1-d transpose": (lambda nl, x, i, v: nl.transpose(v), ShapeError, "must be a 2-d tile"),
    "1-d matmul": (lambda nl, x, i, v: nl.matmul(v, v), ShapeError, "must be a 2-d tile"),
    "broadcast_to": (lambda nl, x, i, v: nl.broadcast_to(x, (8, 7)), ShapeError, "cannot broadcast to [8, 7]"),
    "expand_dims tuple": (lambda nl, x, i, v: nl.expand_dims(x, (1, 2)), ShapeError, "must be one int"),
    "axis out of range": (lambda nl, x, i, v: nl.sum(x, axis=5), ShapeError, "axis 5 is out of range"),
    "rms_norm n=0": (lambda nl, x, i, v: nl.rms_norm(x, x, axis=1, n=0), OperandError, "must be > 0"),
    "bitwise on float": (lambda nl, x, i, v: nl.bitwise_and(x, x), DTypeError, "bit-vector op"),
    "shift on float": (lambda nl, x, i, v: nl.left_shift(x, 2), DTypeError, "bit-vector op"),
    "invert on float": (lambda nl, x, i, v: nl.invert(x), DTypeError, "bit-vector op"),
    "NaN scalar": (lambda nl, x, i, v: nl.bitwise_and(i, float("nan")), OperandError, "integer scalar"),
    "scalar past int32": (lambda nl, x, i, v: nl.bitwise_or(i, 2 ** 40), OperandError, "integer scalar"),
    "shift past the width": (lambda nl, x, i, v: nl.right_shift(i, 40), OperandError, "0..31"),
    "negative integer power": (lambda nl, x, i, v: nl.power(i, -1, dtype=nl.int32), OperandError, "exponent >= 0"),
}


@pytest.mark.parametrize("gen", ["current", "beta"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_forms_are_named_errors_at_the_kernel_line(case, gen):
    call, error, rule = CASES[case]
    nki, nl = (nki_cur, nl_cur) if gen == "current" else (nki_beta, nl_beta)

    def kernel(x, i, v):
        call(nl, nl.load(x), nl.load(i), v)
    with pytest.raises(error) as e:
        nki.jit(kernel)(X, I, V)
    assert rule in str(e.value)
    path, line = e.value.location.rsplit(":", 1)
    assert os.path.samefile(path, __file__) and int(line) == call.__code__.co_firstlineno


@pytest.mark.parametrize("gen", ["current", "beta"])
def test_good_integer_forms_still_run(gen):
    """The checks refuse only what they name: shifts within the width, in-range scalars, and a power with a
    non-negative exponent run and match numpy."""
    nki, nl = (nki_cur, nl_cur) if gen == "current" else (nki_beta, nl_beta)

    def kernel(i):
        t = nl.load(i)
        r = nl.bitwise_xor(nl.left_shift(t, 3), 5)
        out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(r, nl.power(t, 2, dtype=nl.int32)))
        return out
    got = nki.jit(kernel)(I)
    np.testing.assert_array_equal(got, ((I << 3) ^ 5) + I ** 2)
