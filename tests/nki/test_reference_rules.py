"""Rules of the NKI API reference the conformance table found trnsim breaking: nl.all's default dtype per API
generation, shared constants saved from bfloat16 / fp8 arrays, and what nki.profile writes."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.language as nl
import trnsim.nki.beta as bnki
import trnsim.nki.beta.language as bnl
from trnsim.core import DTypeError, ProfileOutputWarning


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_current_all_defaults_to_the_input_dtype(rng, dt):
    """Current reference: nl.all's dtype, if not given, is the input tile's."""
    x = np.where(rng.random((16, 8)) < 0.2, 0, 1).astype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32)

    @nki.jit
    def k(a):
        r = nl.all(nl.load(a), axis=1)
        o = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(o, r)
        return o
    out = k(x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(out, np.float64)[:, 0], np.all(x != 0, axis=1).astype(np.float64))


def test_beta_all_defaults_to_bool(rng):
    """Beta reference: nl.all(x, axis, *, dtype=bool)."""
    x = np.where(rng.random((16, 8)) < 0.2, 0, 1).astype(np.float32)
    seen = {}

    @bnki.jit
    def k(a):
        r = bnl.all(bnl.load(a), axis=1)
        seen["dtype"] = np.dtype(r.dtype)
        o = bnl.ndarray((16, 1), bnl.float32, buffer=bnl.shared_hbm)
        bnl.store(o, r)
        return o
    out = k(x)
    assert seen["dtype"] == np.dtype(np.bool_)
    np.testing.assert_array_equal(out[:, 0], np.all(x != 0, axis=1).astype(np.float32))


@pytest.mark.parametrize("api", ["current", "beta"])
@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_shared_constant_from_a_raw_bytes_npy_names_why(tmp_path, api, dt):
    path = str(tmp_path / "c.npy")
    np.save(path, np.ones((4, 8), dt))
    assert np.load(path).dtype.kind == "V"  # what numpy gives back: records of raw bytes
    jit, lang = (nki.jit, nl) if api == "current" else (bnki.jit, bnl)

    @jit
    def k(a):
        lang.shared_constant(path)
        return a
    with pytest.raises(DTypeError, match=r"raw .*byte records .*bfloat16 and fp8.*ml_dtypes") as err:
        k(np.zeros((4, 8), np.float32))
    assert "c.npy" in str(err.value) and "test_reference_rules.py:" in str(err.value)


def test_shared_constant_from_an_ml_dtypes_array_keeps_its_values(rng):
    c = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)

    @nki.jit
    def k(a):
        t = nl.load(nl.shared_constant(c))
        o = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(o, nl.copy(t, nl.float32))
        return o
    np.testing.assert_array_equal(k(np.zeros(1, np.float32)), c.astype(np.float32))


def test_profile_file_names_warn_once_and_write_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def doubled(a):
        o = bnl.ndarray(a.shape, a.dtype, buffer=bnl.shared_hbm)
        bnl.store(o, bnl.multiply(bnl.load(a), 2.0))
        return o
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(2):
            k = bnki.profile(working_directory=str(tmp_path), save_neff_name="k.neff", save_trace_name="k.ntff")(doubled)
        out = k(x)
    mine = [w for w in caught if issubclass(w.category, ProfileOutputWarning)]
    assert len(mine) == 1
    assert "save_neff_name='k.neff'" in str(mine[0].message) and "save_trace_name='k.ntff'" in str(mine[0].message)
    np.testing.assert_array_equal(out, x * 2)
    assert k.benchmark_result.timing is not None
    assert not list(tmp_path.iterdir())


# -- activation / activate2 engine= (NKI 0.7: Scalar, or GpSimd on NeuronCore-v4) ------------------------------
import trnsim.nki.isa as nisa  # noqa: E402
from trnsim.core import EngineError, GenerationError, MemorySpaceError, Op  # noqa: E402
from trnsim.core import timing  # noqa: E402


@nki.jit
def _acts(x, bias, eng):
    t = nl.load(x)
    a, b = (nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf) for _ in range(2))
    nisa.activation(a, nl.exp, t, bias=nl.load(bias), scale=0.5, engine=eng)
    nisa.activate2(b, nl.tanh, t, imm0=2.0, imm1=0.25, op0=nl.multiply, op1=nl.subtract, engine=eng)
    outs = [nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm) for _ in range(2)]
    nisa.dma_copy(outs[0], a)
    nisa.dma_copy(outs[1], b)
    return outs


@pytest.mark.parametrize("eng", ["scalar", "gpsimd"])
def test_activation_engine_keeps_values_and_times_on_that_engine(rng, trn, eng):
    trn("trn3")
    x = rng.standard_normal((64, 96)).astype(np.float32)
    bias = rng.standard_normal((64, 1)).astype(np.float32)
    a, b = _acts(x, bias, getattr(nisa.engine, eng))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(a, np.exp(x64 * 0.5 + bias), rtol=1e-5)
    np.testing.assert_allclose(b, np.tanh(x64 * 2.0 - 0.25), rtol=1e-5, atol=1e-6)
    nc = _acts.last_cores[0]
    acts = [r for r in nc.stream if r.op in (Op.ACTIVATION, Op.ACTIVATE2)]
    assert [r.engine.value for r in acts] == [eng, eng]
    timed = timing.summarize("acts", [timing.simulate(nc.stream, "trn3")], nc.spec).instructions
    other = {"scalar": "GpSimdE", "gpsimd": "ScalarE"}[eng]
    assert timed[{"scalar": "ScalarE", "gpsimd": "GpSimdE"}[eng]] == 2 and other not in timed


def test_gpsimd_activation_is_trn3_only(rng, trn):
    x, bias = np.ones((8, 16), np.float32), np.zeros((8, 1), np.float32)
    with pytest.raises(GenerationError, match=r"activation on the gpsimd engine needs NeuronCore-v4.*v3 \(trn2\)"):
        _acts(x, bias, nisa.engine.gpsimd)


@pytest.mark.parametrize("kw", [{"reduce_cmd": "reset_reduce"}, {"reduce_res": True}])
def test_gpsimd_activation_has_no_accumulator(trn, kw):
    trn("trn3")

    @nki.jit
    def k(x):
        t = nl.load(x)
        a = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        extra = {"reduce_res": r} if "reduce_res" in kw else {"reduce_cmd": nisa.reduce_cmd.reset_reduce}
        nisa.activation(a, nl.exp, t, engine=nisa.engine.gpsimd, **extra)
        return x
    with pytest.raises(EngineError, match=r"accumulator .* scalar engine's only") as err:
        k(np.ones((8, 16), np.float32))
    assert "test_reference_rules.py:" in str(err.value)


def test_activation_on_the_vector_engine_is_refused(trn):
    trn("trn3")
    with pytest.raises(MemorySpaceError, match=r"activation runs on scalar/gpsimd, not on engine vector"):
        _acts(np.ones((8, 16), np.float32), np.zeros((8, 1), np.float32), nisa.engine.vector)


# -- trn3 operators: abs_max / abs_min, and square / relu as a tensor_scalar op0 ------------------------------------
def _abs_max_kernel(x, y):
    o = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(o, nl.abs_max(nl.load(x), nl.load(y)))
    return o


def _op0_kernel(op, reduce):
    def k(x):
        t = nl.load(x)
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        if reduce:
            nisa.tensor_scalar_reduce(d, t, getattr(nl, op), 0.0, nl.add, r)
        else:
            nisa.tensor_scalar(d, t, getattr(nl, op), 0.0, op1=nl.add, operand1=1.0)
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(o, d)
        return o
    return nki.jit(k)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_abs_max_is_refused_before_trn3(trn, target):
    trn(target)
    x = np.ones((8, 16), np.float32)
    with pytest.raises(GenerationError, match=rf"op=abs_max needs NeuronCore-v4.*trn3 operators.*\({target}\)"):
        nki.jit(_abs_max_kernel)(x, x)


def test_abs_max_on_trn3_keeps_the_signed_larger_magnitude(rng, trn):
    trn("trn3")
    x, y = (rng.integers(-3, 4, (8, 16)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(nki.jit(_abs_max_kernel)(x, y), np.where(np.abs(x) > np.abs(y), x, y))


@pytest.mark.parametrize("reduce", [False, True])
@pytest.mark.parametrize("op", ["square", "relu"])
def test_square_and_relu_as_op0_are_trn3_operators(rng, trn, op, reduce):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    with pytest.raises(GenerationError, match=rf"op0={op} needs NeuronCore-v4.*\(trn2\)"):
        _op0_kernel(op, reduce)(x)
    trn("trn3")
    want = {"square": np.square, "relu": lambda v: np.maximum(v, 0)}[op](x.astype(np.float64))
    np.testing.assert_allclose(_op0_kernel(op, reduce)(x), want if reduce else want + 1, rtol=1e-6)


def test_square_and_relu_as_activations_stay_on_every_target(rng, trn):
    """nl.square / nl.relu run on the Scalar engine's activation functions, which every generation has."""
    x = rng.standard_normal((8, 16)).astype(np.float32)

    @nki.jit
    def k(a):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(o, nl.add(nl.square(nl.load(a)), nl.relu(nl.load(a))))
        return o
    np.testing.assert_allclose(k(x), np.square(x.astype(np.float64)) + np.maximum(x, 0), rtol=1e-6)
