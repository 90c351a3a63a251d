"""Single-instruction conformance: every instruction against its numpy reference (tests/core/reference.py),
with dtype edge cases, and at least one rule each instruction must refuse."""
import ml_dtypes
import numpy as np
import pytest

from tests.core import reference as ref
from tests.core.conftest import on_chip, read
from trnsim.core import (REGISTRY, DTypeError, FreeSizeError, GenerationError, KernelError, MemorySpaceError,
                         NeuronCore, Op, ShapeError)
from trnsim.core.isa.alu import ACTIVATIONS, ALU
from trnsim.errors import TrnsimError

BF16, F32 = ml_dtypes.bfloat16, np.float32
R = np.random.default_rng(7)


def test_every_opcode_has_rules_and_a_reference():
    """Each opcode has check, semantics and cost rules and a numpy reference in the test suite."""
    for op in Op:
        d = REGISTRY[op]
        assert callable(d.check) and callable(d.semantics) and callable(d.cost), op
        assert callable(ref.INSTRUCTIONS.get(op.value)), f"no numpy reference for {op.value}"


def test_every_alu_op_and_activation_has_a_reference():
    """The ALU and activation tables of the core are covered, name for name, by the numpy references."""
    covered = set(ref.ALU) | set(ref.BITVEC) | set(ref.UNARY) | set(ref.UNARY_BITVEC) | set(ref.ALU_ALIASES)
    assert set(ALU) == covered
    assert set(ACTIVATIONS) == set(ref.ACT) | set(ref.ACT_ALIASES)


@pytest.mark.parametrize("name", sorted(ref.UNARY))
def test_unary_alu_ops(nc, name):
    """Unary ALU ops in a tensor_scalar stage ignore their operand and match numpy."""
    x = R.uniform(0.5, 3, (8, 16)).astype(F32) * np.where(R.random((8, 16)) > 0.5, 1, -1).astype(F32)
    if name == "rsqrt":
        x = np.abs(x)
    if name in ("square", "relu"):  # as a tensor_scalar op0, trn3 operators (NKI 0.4.0 release notes)
        nc = NeuronCore("trn3")
    dst = nc.tensor((8, 16), "float32")
    nc.issue(Op.TENSOR_SCALAR, dst=dst, data=on_chip(nc, x), op0=name, operand0=7.0)
    np.testing.assert_allclose(read(dst), ref.UNARY[name](x), rtol=1e-6)


def test_every_record_has_a_cost(nc):
    """The cost rule of a recorded instruction returns the work description the timing model replays."""
    a = on_chip(nc, R.standard_normal((128, 64), F32))
    nc.issue(Op.TENSOR_SCALAR, dst=a, data=a, op0="add", operand0=1.0)
    for rec in nc.stream:
        c = REGISTRY[rec.op].cost(rec, nc.spec)
        assert c.engine in ("dma", "vector") and c.partitions == 128


# -- Tensor engine ------------------------------------------------------------------------------------------------
def test_nc_matmul_values_and_accumulation(nc):
    """bf16 matmul equals float64 numpy; accumulate=True adds; fp32 pairs only with fp32/tf32."""
    st, mv = R.standard_normal((128, 128)).astype(BF16), R.standard_normal((128, 256)).astype(BF16)
    s, m = on_chip(nc, st), on_chip(nc, mv)
    ps = nc.tensor((128, 256), "float32", "psum")
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=s, moving=m)
    np.testing.assert_allclose(read(ps), ref.matmul(st, mv), rtol=1e-5, atol=1e-4)
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=s, moving=m, accumulate=True)
    np.testing.assert_allclose(read(ps), 2 * ref.matmul(st, mv), rtol=1e-5, atol=1e-4)
    with pytest.raises(DTypeError, match="fp32/tf32 inputs pair only with fp32/tf32"):
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=on_chip(nc, st.astype(F32)), moving=m)


def test_nc_matmul_limits_and_tiling(nc):
    """K, M and N limits are enforced; PE row tiling of 64 rows accepts K = 64."""
    s = on_chip(nc, np.ones((64, 32), F32), "bfloat16")
    m = on_chip(nc, np.ones((64, 16), F32), "bfloat16")
    ps = nc.tensor((32, 16), "float32", "psum")
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=s, moving=m, tile_position=(64, 0), tile_size=(64, 128))
    np.testing.assert_array_equal(read(ps), np.full((32, 16), 64.0))
    with pytest.raises(FreeSizeError, match="stationary free size M=256 exceeds gemm_stationary_fmax 128"):
        nc.issue(Op.NC_MATMUL, dst=nc.tensor((128, 16), "float32", "psum"),
                 stationary=on_chip(nc, np.ones((64, 256), F32), "bfloat16"), moving=m)
    with pytest.raises(ShapeError, match="row tile size 48"):
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=s, moving=m, tile_position=(0, 0), tile_size=(48, 128))


def test_nc_matmul_is_transpose_and_double_row_rules(nc):
    """is_transpose copies bits (NaN kept); double_row refuses bf16 inputs."""
    x = R.standard_normal((128, 64)).astype(BF16)
    x[1, 2] = np.nan
    s = on_chip(nc, x)
    ps = nc.tensor((64, 128), "bfloat16", "psum")
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=s, moving=on_chip(nc, np.eye(128, dtype=F32), "bfloat16"), is_transpose=True)
    np.testing.assert_array_equal(read(ps).view(np.uint16), ref.transpose(x).view(np.uint16))
    with pytest.raises(DTypeError, match="double_row needs FP8 inputs"):
        nc.issue(Op.NC_MATMUL, dst=nc.tensor((64, 64), "float32", "psum"), stationary=on_chip(nc, np.ones((128, 2, 64), BF16)),
                 moving=on_chip(nc, np.ones((128, 2, 64), BF16)), perf_mode="double_row")


def test_nc_transpose_v2_smears_nan_v3_exact():
    """PE transpose is an identity matmul on v2 (a NaN fills its output row) and bit-exact on v3."""
    x = R.standard_normal((32, 16)).astype(F32)
    x[3, 5] = np.nan
    for target, exact in (("trn1", False), ("trn2", True)):
        nc = NeuronCore(target)
        dst = nc.tensor((16, 32), "float32", "psum")
        nc.issue(Op.NC_TRANSPOSE, engine="tensor", dst=dst, data=on_chip(nc, x))
        got, want = read(dst), ref.transpose(x)
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            assert np.isnan(got[5]).all() and np.array_equal(np.delete(got, 5, 0), np.delete(want, 5, 0))
    with pytest.raises(FreeSizeError, match=r"vector engine takes at most \[32, 32\]"):
        nc.issue(Op.NC_TRANSPOSE, engine="vector", dst=nc.tensor((64, 64), "float32"), data=on_chip(nc, np.ones((64, 64), F32)))


def test_nc_matmul_mx_and_quantize_mx_trn3():
    """quantize_mx + nc_matmul_mx equal the numpy MXFP8 reference on trn3 and are refused on trn2."""
    nc = NeuronCore("trn3")
    # Operands of K = 128 (32 partitions x 4) for M = 16 and N = 8.
    A = R.standard_normal((128, 16)).astype(BF16)
    B = R.standard_normal((128, 8)).astype(BF16)
    ops = []
    for X in (A, B):
        n = X.shape[1]
        src = on_chip(nc, X.reshape(32, 4, n).transpose(0, 2, 1).reshape(32, 4 * n))
        q, s = nc.tensor((32, n), "float8_e4m3fn_x4"), nc.tensor((32, n), "uint8")
        nc.issue(Op.QUANTIZE_MX, dst=q, src=src, dst_scale=s)
        ops += [q, s]
    ps = nc.tensor((16, 8), "float32", "psum")
    nc.issue(Op.NC_MATMUL_MX, dst=ps, stationary=ops[0], moving=ops[2], stationary_scale=ops[1], moving_scale=ops[3])
    np.testing.assert_allclose(read(ps), ref.INSTRUCTIONS["nc_matmul_mx"](A, B), rtol=1e-5, atol=1e-4)
    with pytest.raises(GenerationError, match="quantize_mx needs NeuronCore-v4"):
        nc2 = NeuronCore("trn2")
        nc2.issue(Op.QUANTIZE_MX, dst=nc2.tensor((32, 4), "uint32"), src=nc2.tensor((32, 16), "bfloat16"),
                  dst_scale=nc2.tensor((32, 4), "uint8"))


# -- Scalar engine ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ref.ACT))
def test_activation_functions(nc, name):
    """Every activation function, with a [P,1] scale and bias, matches its numpy definition."""
    lo, hi = {"log": (0.1, 5), "sqrt": (0.1, 5), "rsqrt": (0.1, 5), "reciprocal": (0.5, 5), "sin": (-3, 3),
              "arctan": (-1.5, 1.5), "tan": (-1.2, 1.2)}.get(name, (-4, 4))
    x = R.uniform(lo, hi, (64, 48)).astype(F32)
    dst = nc.tensor((64, 48), "float32")
    nc.issue(Op.ACTIVATION, dst=dst, op=name, data=on_chip(nc, x), scale=1.0, bias=on_chip(nc, np.zeros((64, 1), F32)))
    np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["activation"](name, x.astype(np.float64), 1.0, 0.0),
                               rtol=2e-6, atol=2e-6)


def test_activation_scale_bias_reduce_and_bf16_out(nc):
    """exp(x*s + b) rounded to bf16, with the row sum read out of the lane registers; v2 refuses immediate bias."""
    x = R.standard_normal((128, 100)).astype(F32)
    s, b = R.uniform(0.5, 1, (128, 1)).astype(F32), R.standard_normal((128, 1)).astype(F32)
    dst, res = nc.tensor((128, 100), "bfloat16"), nc.tensor((128, 1), "float32")
    nc.issue(Op.ACTIVATION, dst=dst, op="exp", data=on_chip(nc, x), scale=on_chip(nc, s), bias=on_chip(nc, b),
             reduce_op="add", reduce_res=res)
    want = ref.INSTRUCTIONS["activation"]("exp", x, s, b)
    np.testing.assert_array_equal(read(dst), want.astype(F32).astype(BF16))
    np.testing.assert_allclose(read(res)[:, 0], want.sum(1), rtol=1e-5)
    v2 = NeuronCore("trn1")
    with pytest.raises(GenerationError, match="immediate bias needs NeuronCore-v3"):
        v2.issue(Op.ACTIVATION, dst=v2.tensor((4, 4), "float32"), op="exp", data=on_chip(v2, np.ones((4, 4), F32)), bias=1.0)


def test_activate2_trn3():
    """activate2 computes op(data*imm0 + imm1) on v4 and refuses an unsupported op pair."""
    nc = NeuronCore("trn3")
    x = R.standard_normal((32, 16)).astype(F32)
    dst = nc.tensor((32, 16), "float32")
    nc.issue(Op.ACTIVATE2, dst=dst, op="tanh", data=on_chip(nc, x), imm0=0.5, imm1=0.25, op0="multiply", op1="add")
    np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["activate2"]("tanh", x, 0.5, 0.25), rtol=1e-6)
    with pytest.raises(ShapeError, match="is not one of"):
        nc.issue(Op.ACTIVATE2, dst=dst, op="exp", data=dst, op0="add", op1="add")


# -- Vector engine --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ref.ALU))
def test_tensor_tensor_alu_ops(nc, name):
    """Every arithmetic ALU op on fp32 tiles (with NaN/Inf/zero edge cases) matches numpy."""
    a = R.uniform(-3, 3, (16, 32)).astype(F32)
    b = R.uniform(0.5, 3, (16, 32)).astype(F32)
    a[0, :4] = [np.inf, -np.inf, 0.0, -0.0]
    if name in ("abs_max", "abs_min"):  # trn3 operators (NKI 0.4.0 release notes)
        nc = NeuronCore("trn3")
    dst = nc.tensor((16, 32), "float32")
    nc.issue(Op.TENSOR_TENSOR, dst=dst, data1=on_chip(nc, a), data2=on_chip(nc, b), op=name)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["tensor_tensor"](name, a, b).astype(F32), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(ref.BITVEC))
def test_tensor_tensor_bitvec_ops(nc, name):
    """Bitvec ops act on int32 bit patterns (right shift is logical); they refuse float operands."""
    a = R.integers(-2**31, 2**31 - 1, (8, 16)).astype(np.int32)
    b = R.integers(0, 31, (8, 16)).astype(np.int32)
    dst = nc.tensor((8, 16), "int32")
    nc.issue(Op.TENSOR_TENSOR, dst=dst, data1=on_chip(nc, a), data2=on_chip(nc, b), op=name)
    np.testing.assert_array_equal(read(dst), ref.BITVEC[name](a, b).astype(np.int32))
    with pytest.raises(DTypeError, match="needs integer operands"):
        nc.issue(Op.TENSOR_TENSOR, dst=nc.tensor((8, 16), "float32"), data1=on_chip(nc, a.astype(F32)),
                 data2=on_chip(nc, b.astype(F32)), op=name)


def test_tensor_tensor_refuses_two_psum_inputs(nc):
    """Both tensor_tensor inputs in PSUM is a rule violation."""
    p = on_chip(nc, np.ones((8, 8), F32), space="psum")
    with pytest.raises(KernelError, match="cannot both be in PSUM"):
        nc.issue(Op.TENSOR_TENSOR, dst=nc.tensor((8, 8), "float32"), data1=p, data2=p, op="add")


def test_tensor_scalar_two_ops_reverse_and_int_saturation(nc):
    """(x * s0) + s1 with a [P,1] operand; reverse0 computes s0 - x; fp32 -> int8 rounds to even and saturates."""
    x = R.standard_normal((32, 8)).astype(F32)
    s0 = R.standard_normal((32, 1)).astype(F32)
    dst = nc.tensor((32, 8), "float32")
    nc.issue(Op.TENSOR_SCALAR, dst=dst, data=on_chip(nc, x), op0="multiply", operand0=on_chip(nc, s0), op1="add", operand1=2.0)
    np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["tensor_scalar"](x, s0, 2.0), rtol=1e-6)
    nc.issue(Op.TENSOR_SCALAR, dst=dst, data=on_chip(nc, x), op0="subtract", operand0=1.0, reverse0=True)
    np.testing.assert_allclose(read(dst), 1.0 - x, rtol=1e-6)
    i8 = nc.tensor((1, 4), "int8")
    nc.issue(Op.TENSOR_SCALAR, dst=i8, data=on_chip(nc, np.array([[2.5, 3.5, 300.0, -300.0]], F32)), op0="add", operand0=0.0)
    np.testing.assert_array_equal(read(i8), [[2, 4, 127, -128]])
    with pytest.raises(DTypeError, match="must both be arithmetic or both bitvec"):
        nc.issue(Op.TENSOR_SCALAR, dst=dst, data=dst, op0="add", operand0=1.0, op1="bitwise_and", operand1=1)


def test_scalar_tensor_tensor(nc):
    """(x - s) * t elementwise; operand1 must match data's shape."""
    x, t = R.standard_normal((16, 12)).astype(F32), R.standard_normal((16, 12)).astype(F32)
    dst = nc.tensor((16, 12), "float32")
    nc.issue(Op.SCALAR_TENSOR_TENSOR, dst=dst, data=on_chip(nc, x), op0="subtract", operand0=0.5, op1="multiply",
             operand1=on_chip(nc, t))
    np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["scalar_tensor_tensor"](x, 0.5, t), rtol=1e-6)
    with pytest.raises(ShapeError):
        nc.issue(Op.SCALAR_TENSOR_TENSOR, dst=dst, data=dst, op0="add", operand0=0.0, op1="add",
                 operand1=nc.tensor((16, 4), "float32"))


def test_tensor_copy_casts_bit_exact_and_rne(nc):
    """Same-dtype copies keep NaN payloads; fp32 -> bf16 rounds to nearest even; v2 ScalarE copy is refused."""
    bits = np.array([[0x7FC00001, 0x3F808000, 0x3F818000, 0x3F800001]], np.uint32)
    x = bits.view(F32)
    same = nc.tensor((1, 4), "float32")
    nc.issue(Op.TENSOR_COPY, dst=same, src=on_chip(nc, x))
    np.testing.assert_array_equal(read(same).view(np.uint32), bits)
    b = nc.tensor((1, 4), "bfloat16")
    nc.issue(Op.TENSOR_COPY, dst=b, src=on_chip(nc, x))
    np.testing.assert_array_equal(read(b)[:, 1:].view(np.uint16), ref.INSTRUCTIONS["tensor_copy"](x, BF16)[:, 1:].view(np.uint16))
    v2 = NeuronCore("trn1")
    with pytest.raises(GenerationError, match="not supported on NeuronCore-v2"):
        v2.issue(Op.TENSOR_COPY, engine="scalar", dst=v2.tensor((1, 4), "float32"), src=on_chip(v2, x))


def test_memset_and_its_dtype_rule(nc):
    """memset fills with the value; a fractional value into an int32 tile is refused."""
    t = nc.tensor((8, 8), "bfloat16")
    nc.issue(Op.MEMSET, dst=t, value=1.5)
    np.testing.assert_array_equal(read(t), ref.INSTRUCTIONS["memset"]((8, 8), 1.5, BF16))
    with pytest.raises(DTypeError, match="does not match the integer dtype int32"):
        nc.issue(Op.MEMSET, dst=nc.tensor((8, 8), "int32"), value=0.5)


def test_reciprocal_and_exponential(nc):
    """reciprocal is an FP32 divide (1/0 = inf); exponential (v4 only) computes exp(x - max)."""
    x = np.array([[2.0, 0.0, -4.0, 3.0]], F32)
    dst = nc.tensor((1, 4), "float32")
    nc.issue(Op.RECIPROCAL, dst=dst, data=on_chip(nc, x))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(read(dst), ref.INSTRUCTIONS["reciprocal"](x))
    with pytest.raises(GenerationError, match="exponential needs NeuronCore-v4"):
        nc.issue(Op.EXPONENTIAL, dst=dst, src=dst)
    v4 = NeuronCore("trn3")
    e, s = v4.tensor((1, 4), "float32"), v4.tensor((1, 1), "float32")
    v4.issue(Op.EXPONENTIAL, dst=e, src=on_chip(v4, x), max_value=3.0, reduce_res=s)
    np.testing.assert_allclose(read(e), ref.INSTRUCTIONS["exponential"](x, 3.0), rtol=1e-6)
    np.testing.assert_allclose(read(s)[0, 0], ref.INSTRUCTIONS["exponential"](x, 3.0).sum(), rtol=1e-6)


def test_tensor_reduce_axes_negate_keepdims(nc):
    """Sum over the trailing two axes, negated; reducing a non-trailing axis is refused."""
    x = R.standard_normal((16, 4, 8)).astype(F32)
    dst = nc.tensor((16, 1), "float32")
    nc.issue(Op.TENSOR_REDUCE, dst=dst, op="add", data=on_chip(nc, x), axis=(1, 2), negate=True, keepdims=True)
    np.testing.assert_allclose(read(dst)[:, 0], -ref.INSTRUCTIONS["tensor_reduce"](x, (1, 2)), rtol=1e-5)
    with pytest.raises(ShapeError, match="must be the trailing free axes"):
        nc.issue(Op.TENSOR_REDUCE, dst=nc.tensor((16, 8), "float32"), op="add", data=on_chip(nc, x), axis=1)


def test_tensor_scalar_reduce(nc):
    """dst = x * s and the row sums land in reduce_res; a [P,2] operand is refused."""
    x = R.standard_normal((8, 16)).astype(F32)
    dst, res = nc.tensor((8, 16), "float32"), nc.tensor((8, 1), "float32")
    nc.issue(Op.TENSOR_SCALAR_REDUCE, dst=dst, data=on_chip(nc, x), op0="multiply", operand0=3.0, reduce_op="add",
             reduce_res=res)
    np.testing.assert_allclose(read(res)[:, 0], ref.INSTRUCTIONS["tensor_scalar_reduce"](x, 3.0), rtol=1e-5)
    with pytest.raises(ShapeError, match=r"must be a scalar or a \[8, 1\] tensor"):
        nc.issue(Op.TENSOR_SCALAR_REDUCE, dst=dst, data=dst, op0="add", operand0=nc.tensor((8, 2), "float32"), reduce_op="add")


def test_tensor_tensor_scan(nc):
    """r[i] = a[i] * r[i-1] + b[i] from an initial value; mismatched shapes are refused."""
    a, b = R.uniform(0.5, 1, (8, 20)).astype(F32), R.standard_normal((8, 20)).astype(F32)
    dst = nc.tensor((8, 20), "float32")
    nc.issue(Op.TENSOR_TENSOR_SCAN, dst=dst, data0=on_chip(nc, a), data1=on_chip(nc, b), initial=1.0, op0="multiply", op1="add")
    np.testing.assert_allclose(read(dst), ref.INSTRUCTIONS["tensor_tensor_scan"](a, b, 1.0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError):
        nc.issue(Op.TENSOR_TENSOR_SCAN, dst=dst, data0=dst, data1=nc.tensor((8, 4), "float32"), initial=0.0,
                 op0="multiply", op1="add")


def test_select_reduce_and_range_select(nc):
    """select_reduce picks by predicate and max-reduces; range_select keeps indices in [lo, hi) (v3+)."""
    p = (R.random((8, 10)) > 0.5).astype(F32)
    a, b = R.standard_normal((8, 10)).astype(F32), R.standard_normal((8, 10)).astype(F32)
    dst, res = nc.tensor((8, 10), "float32"), nc.tensor((8, 1), "float32")
    nc.issue(Op.SELECT_REDUCE, dst=dst, predicate=on_chip(nc, p), on_true=on_chip(nc, a), on_false=on_chip(nc, b),
             reduce_res=res, reduce_op="maximum")
    want = ref.INSTRUCTIONS["select_reduce"](p, a, b)
    np.testing.assert_array_equal(read(dst), want)
    np.testing.assert_array_equal(read(res)[:, 0], want.max(1))
    lo, hi = np.full((8, 1), 2, F32), np.full((8, 1), 7, F32)
    nc.issue(Op.RANGE_SELECT, dst=dst, on_true_tile=on_chip(nc, a), comp_op0="greater_equal", comp_op1="less",
             bound0=on_chip(nc, lo), bound1=on_chip(nc, hi), reduce_res=res, on_false_value=-1e9)
    np.testing.assert_array_equal(read(dst), ref.range_select(a, 2, 7, np.float32(-1e9)))
    v2 = NeuronCore("trn1")
    with pytest.raises(GenerationError, match="range_select needs NeuronCore-v3"):
        v2.issue(Op.RANGE_SELECT, dst=v2.tensor((8, 10), "float32"), on_true_tile=v2.tensor((8, 10), "float32"),
                 comp_op0="less", comp_op1="less", bound0=1.0, bound1=2.0)


def test_bn_stats_bn_aggr(nc):
    """bn_stats over two chunks then bn_aggr give each row's mean and population variance."""
    x = (R.standard_normal((16, 1000)) * 2 + 3).astype(F32)
    stats = nc.tensor((16, 12), "float32")
    xs = on_chip(nc, x)
    for c in range(2):
        nc.issue(Op.BN_STATS, dst=stats[:, c * 6:(c + 1) * 6], data=xs[:, c * 500:(c + 1) * 500])
    mv = nc.tensor((16, 2), "float32")
    nc.issue(Op.BN_AGGR, dst=mv, data=stats)
    np.testing.assert_allclose(read(mv), ref.INSTRUCTIONS["bn_aggr"](x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="6 values per partition"):
        nc.issue(Op.BN_STATS, dst=nc.tensor((16, 4), "float32"), data=xs[:, :100])


def test_max8_find_index8_match_replace8(nc):
    """Top-8 values, their first indices (duplicates advance, missing = all ones), and replacement of them."""
    x = np.array([[5, 1, 9, 9, 3, 7, 2, 8, 6, 4, 0, 9]], F32)
    top = nc.tensor((1, 8), "float32")
    xs = on_chip(nc, x)
    nc.issue(Op.MAX8, dst=top, src=xs)
    np.testing.assert_array_equal(read(top), ref.INSTRUCTIONS["max8"](x))
    vals = np.array([[9, 9, 100, 1, 9, 5, 3, 2]], F32)
    idx = nc.tensor((1, 8), "uint32")
    nc.issue(Op.NC_FIND_INDEX8, dst=idx, data=xs, vals=on_chip(nc, vals))
    np.testing.assert_array_equal(read(idx), ref.INSTRUCTIONS["nc_find_index8"](x, vals))
    rep = nc.tensor((1, 12), "float32")
    nc.issue(Op.NC_MATCH_REPLACE8, dst=rep, data=xs, vals=on_chip(nc, read(top)), imm=-1.0)
    np.testing.assert_array_equal(read(rep), ref.INSTRUCTIONS["nc_match_replace8"](x, ref.top8(x), -1.0))
    with pytest.raises(FreeSizeError, match="must be 8..16384"):
        nc.issue(Op.MAX8, dst=top, src=xs[:, :4])


def test_nc_stream_shuffle(nc):
    """Partitions move within a quadrant by the mask; 255 leaves dst as it was; a short mask is refused."""
    src, dst0 = R.standard_normal((32, 4)).astype(F32), R.standard_normal((32, 4)).astype(F32)
    mask = list(R.permutation(32))
    mask[5] = 255
    dst = on_chip(nc, dst0)
    nc.issue(Op.NC_STREAM_SHUFFLE, dst=dst, src=on_chip(nc, src), shuffle_mask=mask)
    np.testing.assert_array_equal(read(dst), ref.INSTRUCTIONS["nc_stream_shuffle"](src, dst0, mask))
    with pytest.raises(ShapeError, match="needs 32 entries"):
        nc.issue(Op.NC_STREAM_SHUFFLE, dst=dst, src=dst, shuffle_mask=[0, 1])


def test_rand_seed_and_dropout(nc):
    """Seeding repeats the stream; dropout keeps or zeroes each element; a dtype change is refused."""
    seed = on_chip(nc, np.array([[1234]], np.int32))
    draws = []
    for _ in range(2):
        nc.issue(Op.SET_RNG_SEED, src_seeds=seed)
        t = nc.tensor((8, 16), "float32")
        nc.issue(Op.RAND, dst=t, kind="uniform", min=0.0, max=1.0)
        draws.append(read(t))
    np.testing.assert_array_equal(draws[0], draws[1])
    assert ((draws[0] >= 0) & (draws[0] < 1)).all() and len(np.unique(draws[0])) > 100
    big = nc.tensor((128, 512), "float32")
    nc.issue(Op.RAND, dst=big, kind="uniform", min=-2.0, max=6.0)
    mean, var = ref.INSTRUCTIONS["rand"](-2.0, 6.0)
    got = read(big)
    assert -2 <= got.min() and got.max() < 6
    assert abs(got.mean() - mean) < 0.05 and abs(got.var() - var) / var < 0.02

    def draw(seed_tile):
        nc.issue(Op.SET_RNG_SEED, src_seeds=on_chip(nc, seed_tile))
        t = nc.tensor((4, 32), "float32")
        nc.issue(Op.RAND, dst=t, kind="uniform", min=0.0, max=1.0)
        return read(t)

    seeds = [np.array([[-1]], np.int32), np.array([[0xFFFFFFFF]], np.uint32), np.array([[1235]], np.int32)]
    same = ref.INSTRUCTIONS["set_rng_seed"](seeds[0]) == ref.INSTRUCTIONS["set_rng_seed"](seeds[1])
    assert same and ref.INSTRUCTIONS["set_rng_seed"](seeds[2]) != ref.INSTRUCTIONS["set_rng_seed"](seeds[0])
    a, b, c = (draw(t) for t in seeds)
    np.testing.assert_array_equal(a, b)  # the same 32 bits seed the same stream
    assert not np.array_equal(a, c)
    x = R.uniform(1, 2, (8, 64)).astype(F32)
    d = nc.tensor((8, 64), "float32")
    nc.issue(Op.DROPOUT, dst=d, data=on_chip(nc, x), prob=0.5)
    got = read(d)
    keep = got != 0
    np.testing.assert_array_equal(got, ref.INSTRUCTIONS["dropout"](x, keep))
    assert 0.3 < keep.mean() < 0.7
    with pytest.raises(ShapeError, match="dropout keeps the dtype"):
        nc.issue(Op.DROPOUT, dst=nc.tensor((8, 64), "bfloat16"), data=d, prob=0.5)


def test_tensor_scalar_cumulative(nc):
    """A running op1 of (x op0 imm0) per partition from op1's identity, from imm1 (load_reduce) or from where the
    last instruction left the accumulator (reduce); 32-bit integers are refused."""
    x = R.uniform(0.5, 1.5, (16, 12)).astype(F32)
    imm0 = R.uniform(-1, 1, (16, 1)).astype(F32)
    src, d = on_chip(nc, x), nc.tensor((16, 12), "float32")
    for op, start in (("add", 0.0), ("multiply", 1.0), ("maximum", -np.inf), ("minimum", np.inf)):
        nc.issue(Op.TENSOR_SCALAR_CUMULATIVE, dst=d, src=src, op0="add", op1=op, imm0=on_chip(nc, imm0))
        np.testing.assert_allclose(read(d), ref.INSTRUCTIONS["tensor_scalar_cumulative"](x + imm0, op, np.full(16, start)),
                                   rtol=1e-5)
    nc.issue(Op.TENSOR_SCALAR_CUMULATIVE, dst=d, src=src, op0="multiply", op1="add", imm0=2.0, imm1=3.0,
             reduce_cmd="load_reduce")
    first = ref.INSTRUCTIONS["tensor_scalar_cumulative"](2 * x, "add", np.full(16, 3.0))
    np.testing.assert_allclose(read(d), first, rtol=1e-5)
    nc.issue(Op.TENSOR_SCALAR_CUMULATIVE, dst=d, src=src, op0="multiply", op1="add", imm0=2.0, reduce_cmd="reduce")
    np.testing.assert_allclose(read(d), ref.INSTRUCTIONS["tensor_scalar_cumulative"](2 * x, "add", first[:, -1]),
                               rtol=1e-5)
    with pytest.raises(DTypeError, match="32-bit integers"):
        i32 = on_chip(nc, np.ones((16, 12), np.int32))
        nc.issue(Op.TENSOR_SCALAR_CUMULATIVE, dst=i32, src=i32, op0="add", op1="add", imm0=1.0)


# -- GpSimd -------------------------------------------------------------------------------------------------------------
def test_iota_and_affine_select(nc):
    """iota gives offset + p*cm + sum(step*i); affine_select keeps where the affine value >= 0 (causal mask)."""
    t = nc.tensor((16, 6), "int32")
    nc.issue(Op.IOTA, dst=t, pattern=((3, 2), (1, 3)), offset=5, channel_multiplier=10)
    np.testing.assert_array_equal(read(t), ref.INSTRUCTIONS["iota"](16, [(3, 2), (1, 3)], 5, 10))
    x = R.standard_normal((16, 16)).astype(F32)
    dst = nc.tensor((16, 16), "float32")
    nc.issue(Op.AFFINE_SELECT, dst=dst, pattern=((-1, 16),), channel_multiplier=1, on_true_tile=on_chip(nc, x),
             on_false_value=-1e9, cmp_op="greater_equal")
    np.testing.assert_array_equal(read(dst), ref.INSTRUCTIONS["affine_select"](x, 1, -1, 0, np.float32(-1e9)))
    with pytest.raises(MemorySpaceError, match="iota writes SBUF|cannot write psum"):
        nc.issue(Op.IOTA, dst=nc.tensor((16, 6), "int32", "psum"), pattern=((1, 6),))


def test_tensor_partition_reduce_and_local_gather(nc):
    """Sum across partitions and per-16-partition gathers; an unsupported op and int32 indices are refused."""
    x = R.standard_normal((64, 8)).astype(F32)
    dst = nc.tensor((1, 8), "float32")
    nc.issue(Op.TENSOR_PARTITION_REDUCE, dst=dst, op="add", data=on_chip(nc, x))
    np.testing.assert_allclose(read(dst)[0], ref.INSTRUCTIONS["tensor_partition_reduce"](x), rtol=1e-5)
    with pytest.raises(ShapeError, match="is not one of"):
        nc.issue(Op.TENSOR_PARTITION_REDUCE, dst=dst, op="subtract", data=on_chip(nc, x))
    src = R.standard_normal((32, 40)).astype(F32)
    idx = R.integers(0, 38, (32, 3)).astype(np.uint16)
    g = nc.tensor((32, 40 * 2), "float32")
    nc.issue(Op.LOCAL_GATHER, dst=g, src_buffer=on_chip(nc, src), index=on_chip(nc, idx), num_elem_per_idx=2,
             num_valid_indices=40)
    np.testing.assert_array_equal(read(g), ref.INSTRUCTIONS["local_gather"](src, idx, 2, 40))
    with pytest.raises(ShapeError, match="must be uint16"):
        nc.issue(Op.LOCAL_GATHER, dst=g, src_buffer=g, index=on_chip(nc, idx.astype(np.int32)))
    with pytest.raises(ShapeError, match="num_valid_indices 49 exceeds the 48 indices"):
        nc.issue(Op.LOCAL_GATHER, dst=g, src_buffer=on_chip(nc, src), index=on_chip(nc, idx), num_valid_indices=49)


def test_nc_n_gather(nc):
    """A gather inside each partition over its flattened free dims; a non-uint32 index and a bad one are refused."""
    data = R.standard_normal((16, 4, 6)).astype(F32)
    idx = R.integers(0, 24, (16, 10)).astype(np.uint32)
    d = nc.tensor((16, 10), "float32")
    nc.issue(Op.NC_N_GATHER, dst=d, data=on_chip(nc, data), indices=on_chip(nc, idx))
    np.testing.assert_array_equal(read(d), ref.INSTRUCTIONS["nc_n_gather"](data.reshape(16, -1), idx))
    with pytest.raises(ShapeError, match="indices must be uint32"):
        nc.issue(Op.NC_N_GATHER, dst=d, data=on_chip(nc, data), indices=on_chip(nc, idx.astype(np.int32)))
    from trnsim.core import OutOfBoundsError
    with pytest.raises(OutOfBoundsError, match="index 24 outside the 24 elements"):
        nc.issue(Op.NC_N_GATHER, dst=d, data=on_chip(nc, data), indices=on_chip(nc, np.full((16, 10), 24, np.uint32)))


def test_sequence_bounds(nc):
    """Start and end of each element's segment, padding (id 0) as (n, -1), in float32 and int32."""
    ids = np.array([[0, 4, 4, 1, 7, 7, 7, 0, 0, 2, 2, 5]])
    for dt in (np.float32, np.int32):
        d = nc.tensor((1, 2, 12), np.dtype(dt).name)
        nc.issue(Op.SEQUENCE_BOUNDS, dst=d, segment_ids=on_chip(nc, ids.astype(dt)))
        np.testing.assert_array_equal(read(d)[0], ref.INSTRUCTIONS["sequence_bounds"](ids[0]))
    with pytest.raises(ShapeError, match="must have 1 partition"):
        nc.issue(Op.SEQUENCE_BOUNDS, dst=nc.tensor((2, 2, 12), "float32"),
                 segment_ids=on_chip(nc, np.ones((2, 12), F32)))


def test_nonzero_with_count(nc):
    """Partition 0 of each GpSimd core gets the offset indices of its non-zeros, padding, then the count;
    every other partition of dst is left as it was."""
    x = np.where(R.random((32, 9)) < 0.4, R.standard_normal((32, 9)), 0).astype(F32)
    d = on_chip(nc, np.full((32, 10), 99, np.int32))
    nc.issue(Op.NONZERO_WITH_COUNT, dst=d, src=on_chip(nc, x), index_offset=5, padding_val=-7)
    got = read(d)
    for p in (0, 16):
        np.testing.assert_array_equal(got[p], ref.INSTRUCTIONS["nonzero_with_count"](x[p], 5, -7))
    assert (np.delete(got, [0, 16], axis=0) == 99).all()
    with pytest.raises(ShapeError, match="one element more per partition"):
        nc.issue(Op.NONZERO_WITH_COUNT, dst=nc.tensor((32, 9), "int32"), src=on_chip(nc, x))
    with pytest.raises(GenerationError, match="needs NeuronCore-v3"):
        NeuronCore("trn1").issue(Op.NONZERO_WITH_COUNT, dst=d, src=d)


def test_topk(nc):
    """The K largest of each core's 16-partition snake, ascending, with their snake indices; rules on n and K."""
    src = R.standard_normal((32, 3)).astype(BF16)
    v, i = nc.tensor((32, 5), "bfloat16"), nc.tensor((32, 5), "uint32")
    nc.issue(Op.TOPK, val_dst=v, idx_dst=i, src=on_chip(nc, src), n=42)
    for base in (0, 16):
        want_v, want_i = ref.INSTRUCTIONS["topk"](src[base:base + 16].astype(F32), 42, 5)
        np.testing.assert_array_equal(read(v)[base].astype(F32), want_v)
        np.testing.assert_array_equal(read(i)[base], want_i)
    with pytest.raises(ShapeError, match="n=49"):
        nc.issue(Op.TOPK, val_dst=v, idx_dst=i, src=on_chip(nc, src), n=49)


def test_rand_state_round_trip(nc):
    """rand_get_state then rand_set_state resumes the stream exactly; the state size per engine is enforced."""
    state = nc.tensor((8, 6), "uint32")
    nc.issue(Op.RAND_GET_STATE, dst=state)
    draws = []
    for _ in range(2):
        t = nc.tensor((8, 16), "float32")
        nc.issue(Op.RAND, dst=t, kind="uniform", min=0.0, max=1.0)
        draws.append(read(t))
        nc.issue(Op.RAND_SET_STATE, src_seeds=state)
    np.testing.assert_array_equal(draws[0], draws[1])
    with pytest.raises(ShapeError, match="holds 5 words per lane; the gpsimd engine's generator state is 6"):
        nc.issue(Op.RAND_GET_STATE, dst=nc.tensor((8, 5), "uint32"))
    with pytest.raises(GenerationError, match="vector engine needs NeuronCore-v4"):
        nc.issue(Op.RAND_SET_STATE, engine="vector", src_seeds=nc.tensor((8, 24), "uint32"))


def test_gather_flattened(nc):
    """Each partition picks elements of its flattened free dims; an out-of-range index gives a never-written
    (garbage) element; int16 indices and a 5-d operand are refused."""
    data = R.standard_normal((16, 4, 6)).astype(F32)
    idx = R.integers(0, 24, (16, 3, 5)).astype(np.uint32)
    g = nc.tensor((16, 3, 5), "float32")
    nc.issue(Op.GATHER_FLATTENED, dst=g, indices=on_chip(nc, idx), data=on_chip(nc, data))
    np.testing.assert_array_equal(read(g), ref.INSTRUCTIONS["gather_flattened"](data, idx))
    idx[2, 1, 3] = 24
    g2 = nc.tensor((16, 3, 5), "float32")
    nc.issue(Op.GATHER_FLATTENED, dst=g2, indices=on_chip(nc, idx), data=on_chip(nc, data))
    assert g2.mask().sum() == 1 and g2.mask()[2, 1, 3]
    with pytest.raises(ShapeError, match="indices must be uint32; got int16"):
        nc.issue(Op.GATHER_FLATTENED, dst=g, indices=on_chip(nc, idx.astype(np.int16)), data=on_chip(nc, data))
    with pytest.raises(ShapeError, match="data must be 2-, 3- or 4-d"):
        nc.issue(Op.GATHER_FLATTENED, dst=g, indices=on_chip(nc, idx),
                 data=on_chip(nc, data.reshape(16, 1, 2, 2, 6)))


# -- DMA -----------------------------------------------------------------------------------------------------------------
def test_dma_copy_casts_and_rules(nc):
    """DMA casts through FP32 (e5m2 overflow -> inf), keeps bits for equal dtypes, refuses hwdge casts."""
    x = np.array([[1.0, 70000.0, -3.3, np.nan]], F32)
    t = nc.tensor((1, 4), "float8_e5m2")
    nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor(x))
    np.testing.assert_array_equal(read(t).view(np.uint8), ref.INSTRUCTIONS["dma_copy"](x, ml_dtypes.float8_e5m2).view(np.uint8))
    with pytest.raises(DTypeError, match="hwdge copies raw bytes"):
        nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor(x), dge_mode="hwdge")
    with pytest.raises(ShapeError, match="has 4 elements, dst .* has 2"):
        nc.issue(Op.DMA_COPY, dst=t[:, :2], src=nc.hbm_tensor(x))


def test_dma_indirect_gather_scatter_and_oob(nc):
    """vector_offset gathers and scatters rows; an out-of-range row is an error, or skipped with oob_mode=skip."""
    from trnsim.core import OutOfBoundsError
    table = R.standard_normal((10, 4)).astype(F32)
    src = nc.hbm_tensor(table)
    rows = np.array([3, 12, 0, 7])
    t = on_chip(nc, np.zeros((4, 4), F32))
    with pytest.raises(OutOfBoundsError, match=r"indirect row index 12 outside 'hbm\d+' rows 0..9"):
        nc.issue(Op.DMA_COPY, dst=t, src=src.ap([[4, 4], [1, 4]], vector_offset=rows))
    nc.issue(Op.DMA_COPY, dst=t, src=src.ap([[4, 4], [1, 4]], vector_offset=rows), oob_mode="skip")
    want = np.zeros((4, 4), F32)
    want[[0, 2, 3]] = table[[3, 0, 7]]
    np.testing.assert_array_equal(read(t), want)
    out = nc.hbm_tensor(np.zeros((10, 4), F32))
    nc.issue(Op.DMA_COPY, dst=out.ap([[4, 4], [1, 4]], vector_offset=np.array([9, 1, 2, 5])), src=t)
    scattered = np.zeros((10, 4), F32)
    scattered[[9, 1, 2, 5]] = want
    np.testing.assert_array_equal(read(out), scattered)


def test_dma_read_modify_write_and_dma_compute(nc):
    """dst_rmw_op=add adds into dst, a row named twice by an indirect dst gets both rows; dma_compute sums its
    srcs in FP32; only add is accepted, and a read-modify-write takes oob_mode=error only."""
    base = R.standard_normal((8, 4)).astype(F32)
    out = nc.hbm_tensor(base.copy())
    t = on_chip(nc, R.standard_normal((3, 4)).astype(F32))
    rows = np.array([6, 2, 6])
    nc.issue(Op.DMA_COPY, dst=out.ap([[4, 3], [1, 4]], vector_offset=rows), src=t, dst_rmw_op="add")
    want = base.copy()
    np.add.at(want, rows, read(t))
    np.testing.assert_allclose(read(out), want, rtol=1e-6)
    a, b = R.standard_normal((4, 8)).astype(BF16), R.standard_normal((4, 8)).astype(F32)
    d = nc.tensor((4, 8), "float32")
    nc.issue(Op.DMA_COMPUTE, dst=d, src0=nc.hbm_tensor(a), src1=on_chip(nc, b), reduce_op="add")
    np.testing.assert_allclose(read(d), ref.INSTRUCTIONS["dma_compute"](a.astype(F32), b), rtol=1e-6)
    with pytest.raises(KernelError, match="op must be add"):
        nc.issue(Op.DMA_COMPUTE, dst=d, src0=d, reduce_op="maximum")
    with pytest.raises(KernelError, match="oob_mode=error only"):
        nc.issue(Op.DMA_COPY, dst=out.ap([[4, 3], [1, 4]], vector_offset=rows), src=t, dst_rmw_op="add",
                 oob_mode="skip")


def test_dma_transpose(nc):
    """dma_transpose of a bf16 HBM array into SBUF; a 1-byte dtype is refused."""
    x = R.standard_normal((16, 40)).astype(BF16)
    t = nc.tensor((40, 16), "bfloat16")
    nc.issue(Op.DMA_TRANSPOSE, dst=t, src=nc.hbm_tensor(x))
    np.testing.assert_array_equal(read(t), ref.INSTRUCTIONS["dma_transpose"](x))
    with pytest.raises(DTypeError, match="2- or 4-byte"):
        nc.issue(Op.DMA_TRANSPOSE, dst=nc.tensor((40, 16), "int8"), src=nc.hbm_tensor(np.zeros((16, 40), np.int8)))


# -- Sequencers, LNC 2 -----------------------------------------------------------------------------------------------------
def test_registers(nc):
    """alloc/move/load/store move 32-bit values between registers and 1x1 tensors; a 2-element load is refused."""
    from trnsim.core import Register
    r, q = Register(), Register()
    nc.issue(Op.REGISTER_ALLOC, reg=r, value=7)
    assert r.value == ref.INSTRUCTIONS["register_alloc"](7)
    nc.issue(Op.REGISTER_MOVE, reg=q, value=r)
    assert q.value == ref.INSTRUCTIONS["register_move"](r.value)
    for dt in (np.int32, np.float32, np.uint16):
        t = nc.tensor((1, 1), np.dtype(dt).name)
        nc.issue(Op.REGISTER_STORE, dst=t, value=q)
        np.testing.assert_array_equal(read(t), ref.INSTRUCTIONS["register_store"](7, dt))
    for tile in (np.array([[41]], np.int32), np.array([[-2.75]], np.float32), np.array([[9.5]], BF16)):
        nc.issue(Op.REGISTER_LOAD, reg=r, src=on_chip(nc, tile))
        assert r.value == ref.INSTRUCTIONS["register_load"](tile)
    with pytest.raises(ShapeError, match="must be one element"):
        nc.issue(Op.REGISTER_LOAD, reg=r, src=nc.tensor((1, 2), "int32"))


def test_sendrecv_and_core_barrier_need_lnc2(nc):
    """sendrecv and core_barrier between the two cores of an LNC 2; on one core sendrecv is refused."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def swap(x):
        out = nl.ndarray((2, 8), nl.float32, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        mine = nl.load(x[pid:pid + 1])
        theirs = nl.ndarray((1, 8), nl.float32)
        nisa.sendrecv(mine, theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        nisa.core_barrier(out)
        nl.store(out[pid:pid + 1], theirs)
        return out

    x = R.standard_normal((2, 8)).astype(F32)
    np.testing.assert_array_equal(swap[2](x), x[::-1])

    @nki.jit
    def meet(x):
        """Each core writes its row, then after the barrier copies the whole output to a second one."""
        out = nl.ndarray((2, 8), nl.float32, buffer=nl.shared_hbm)
        seen = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        nl.store(out[pid:pid + 1], nl.load(x[pid:pid + 1]))
        nisa.core_barrier(out)
        nl.store(seen[2 * pid:2 * pid + 2], nl.load(out))
        return seen

    rows = ref.INSTRUCTIONS["core_barrier"]([{0: x[0]}, {1: x[1]}])
    want = np.stack([rows[0], rows[1]])
    np.testing.assert_array_equal(meet[2](x), np.concatenate([want, want]))
    with pytest.raises(GenerationError, match="sendrecv exchanges tiles between the 2 cores"):
        swap(x)


def test_errors_are_trnsim_errors():
    """Every kernel error class derives from TrnsimError (one-line CLI messages, exit codes)."""
    assert issubclass(KernelError, TrnsimError)


def test_tensor_copy_predicated_values_and_rules(nc):
    """Where the predicate is non-zero the source is copied, elsewhere dst keeps its values; a number is
    materialised in dst's dtype (reverse_pred flips the predicate); a never-written predicate marks what
    it decides; a float predicate, both operands in PSUM, and a float number into an int tile are refused."""
    p = (R.random((16, 32)) > 0.5).astype(np.uint8) * R.integers(1, 255, (16, 32)).astype(np.uint8)
    x, old = R.standard_normal((16, 32)).astype(BF16), R.standard_normal((16, 32)).astype(BF16)
    dst = on_chip(nc, old)
    nc.issue(Op.TENSOR_COPY_PREDICATED, dst=dst, src=on_chip(nc, x), predicate=on_chip(nc, p))
    np.testing.assert_array_equal(read(dst), ref.INSTRUCTIONS["tensor_copy_predicated"](p, x, old))
    ints = on_chip(nc, np.arange(16 * 32, dtype=np.int8).reshape(16, 32))
    before = read(ints)
    nc.issue(Op.TENSOR_COPY_PREDICATED, dst=ints, src=-7, predicate=on_chip(nc, p.astype(np.uint32)), reverse_pred=True)
    np.testing.assert_array_equal(read(ints), ref.INSTRUCTIONS["tensor_copy_predicated"](p == 0, np.int8(-7), before))
    unknown = on_chip(nc, old)  # a never-written predicate decides every element: all are marked
    nc.issue(Op.TENSOR_COPY_PREDICATED, dst=unknown, src=on_chip(nc, x), predicate=nc.tensor((16, 32), "uint8"))
    assert unknown.mask().all()
    with pytest.raises(DTypeError, match="predicate .* is float32; it must be uint8, uint16, uint32"):
        nc.issue(Op.TENSOR_COPY_PREDICATED, dst=dst, src=on_chip(nc, x), predicate=on_chip(nc, p.astype(F32)))
    with pytest.raises(MemorySpaceError, match="both in PSUM"):
        nc.issue(Op.TENSOR_COPY_PREDICATED, dst=dst, src=on_chip(nc, x, space="psum"),
                 predicate=on_chip(nc, p, space="psum"))
    with pytest.raises(DTypeError, match="a float src 1.5 needs a float dst; .* is int8"):
        nc.issue(Op.TENSOR_COPY_PREDICATED, dst=ints, src=1.5, predicate=on_chip(nc, p))
