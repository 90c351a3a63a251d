"""Calls the fuzz (benchmarks/bench_fuzz.py) found raising an internal exception: each now runs or raises a
named error that names the kernel line of the call."""
import numpy as np
import pytest

from trnsim.core.errors import DTypeError, KernelError, OperandTypeError, ShapeError, UninitializedError
from trnsim.errors import UnknownNameError


def modules(api):
    """(nki, nisa, nl) of an API generation."""
    if api == "current":
        import trnsim.nki as nki
        import trnsim.nki.isa as nisa
        import trnsim.nki.language as nl
    else:
        import trnsim.nki.beta as nki
        import trnsim.nki.beta.isa as nisa
        import trnsim.nki.beta.language as nl
    return nki, nisa, nl


def run(api, body):
    """Run `body(nisa, nl, tile)` in a one-core launch of the API; what it raises comes back."""
    nki, nisa, nl = modules(api)

    def tile(shape=(128, 64), dtype="float32", buffer="sbuf"):
        return nl.ndarray(shape, getattr(nl, dtype), buffer=getattr(nl, buffer))

    def kernel(x):
        body(nisa, nl, tile)

    nki.jit(kernel)(np.zeros((1, 1), np.float32))


C = "current"
CASES = [  # (api, error, what, the call): each call on its own line, which the error must name
    (C, OperandTypeError, "a list where a number goes (an unhashable attribute)",
     lambda nisa, nl, t: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=[1.0])),
    (C, OperandTypeError, "text where a tile goes",
     lambda nisa, nl, t: nisa.tensor_copy(dst="x", src=t())),
    (C, OperandTypeError, "None for a required tile",
     lambda nisa, nl, t: nisa.tensor_tensor(dst=t(), data1=None, data2=t(), op=nl.add)),
    (C, OperandTypeError, "a number where the second stage's tensor goes",
     lambda nisa, nl, t: nisa.scalar_tensor_tensor(dst=t(), data=t(), op0=nl.add, operand0=1.0, op1=nl.add,
                                                   operand1=2)),
    (C, UnknownNameError, "an ALU op as an activation function",
     lambda nisa, nl, t: nisa.activation(dst=t(), op=nl.add, data=t())),
    (C, OperandTypeError, "an engine number that names no engine",
     lambda nisa, nl, t: nisa.tensor_copy(dst=t(), src=t(), engine=7)),
    (C, OperandTypeError, "an iota pattern of None",
     lambda nisa, nl, t: nisa.iota(dst=t(dtype="int32"), pattern=None)),
    (C, OperandTypeError, "a shuffle mask of None",
     lambda nisa, nl, t: nisa.nc_stream_shuffle(dst=t(), src=t(), shuffle_mask=None)),
    (C, OperandTypeError, "a tile position that is an int",
     lambda nisa, nl, t: nisa.nc_matmul(dst=t((64, 64), buffer="psum"), stationary=t((128, 64)),
                                        moving=t((128, 64)), tile_position=-1)),
    (C, OperandTypeError, "dma_transpose axes that are an int",
     lambda nisa, nl, t: nisa.dma_transpose(dst=t(), src=t(), axes=-1)),
    (C, OperandTypeError, "dma_compute scales that are an int",
     lambda nisa, nl, t: nisa.dma_compute(dst=t(), srcs=[t()], reduce_op=nl.add, scales=-2)),
    (C, OperandTypeError, "core_barrier cores of None",
     lambda nisa, nl, t: nisa.core_barrier(data=t(), cores=None)),
    (C, OperandTypeError, "a register move into a list",
     lambda nisa, nl, t: nisa.register_move([1.0], nisa.register_alloc(3))),
    (C, OperandTypeError, "a register set to a list",
     lambda nisa, nl, t: nisa.register_move(nisa.register_alloc(3), [1.0])),
    (C, OperandTypeError, "scalar_load of None",
     lambda nisa, nl, t: nisa.scalar_load(None)),
    (C, OperandTypeError, "a reduce axis of text",
     lambda nisa, nl, t: nisa.tensor_reduce(dst=t((128, 1)), op=nl.add, data=t(), axis="x")),
    (C, ShapeError, "a reduce_res of the wrong shape (tensor_scalar_reduce)",
     lambda nisa, nl, t: nisa.tensor_scalar_reduce(dst=t(), data=t(), op0=nl.add, operand0=0.0, reduce_op=nl.add,
                                                   reduce_res=t((128, 64)))),
    (C, DTypeError, "a bitwise reduction (range_select)",
     lambda nisa, nl, t: nisa.range_select(dst=t(), on_true_tile=t(), comp_op0=nl.greater_equal,
                                           comp_op1=nl.less, bound0=0.0, bound1=8.0, reduce_op=nl.bitwise_and,
                                           reduce_res=t((128, 1)))),
    (C, OperandTypeError, "a range_start that is a dict",
     lambda nisa, nl, t: nisa.range_select(dst=t(), on_true_tile=t(), comp_op0=nl.greater_equal,
                                           comp_op1=nl.less, bound0=0.0, bound1=8.0, range_start={})),
    (C, OperandTypeError, "rand2 bounds of text",
     lambda nisa, nl, t: nisa.rand2(dst=t(), min="x", max=1.0)),
    (C, OperandTypeError, "tensor_copy dtype= with a dst that is no tile",
     lambda nisa, nl, t: nisa.tensor_copy(dst={}, src=t(), dtype=nl.int32)),
    (C, DTypeError, "a bitwise scan over float tiles",
     lambda nisa, nl, t: nisa.tensor_tensor_scan(dst=t(), data0=t(), data1=t(), initial=0.0, op0=nl.bitwise_and,
                                                 op1=nl.add)),
    (C, DTypeError, "memset of an int tile to infinity",
     lambda nisa, nl, t: nisa.memset(dst=t(dtype="int32"), value=float("inf"))),
    (C, DTypeError, "memset of a uint8 tile to -1",
     lambda nisa, nl, t: nisa.memset(dst=t(dtype="uint8"), value=-1)),
    (C, ShapeError, "bn_aggr of an empty tile",
     lambda nisa, nl, t: nisa.bn_aggr(dst=t((128, 2)), data=t((128, 0)))),
    (C, OperandTypeError, "an iota offset of infinity",
     lambda nisa, nl, t: nisa.iota(dst=t(dtype="int32"), pattern=[[1, 64]], offset=float("inf"))),
    (C, OperandTypeError, "an affine_select channel multiplier of None",
     lambda nisa, nl, t: nisa.affine_select(dst=t(), pattern=[[1, 64]], channel_multiplier=None, on_true_tile=t(),
                                            on_false_value=0.0)),
    (C, DTypeError, "a bitwise tensor_scalar of a bfloat16 tile",
     lambda nisa, nl, t: nisa.tensor_scalar(dst=t(), data=t(dtype="bfloat16"), op0=nl.bitwise_and, operand0=3)),
    (C, DTypeError, "a bitwise op0 of tensor_scalar_cumulative on floats",
     lambda nisa, nl, t: nisa.tensor_scalar_cumulative(dst=t(), src=t(), op0=nl.bitwise_and, op1=nl.add, imm0=1.0)),
    (C, DTypeError, "a bitwise op0 of tensor_scalar_reduce on floats",
     lambda nisa, nl, t: nisa.tensor_scalar_reduce(dst=t(), data=t(), op0=nl.bitwise_or, operand0=1.0,
                                                   reduce_op=nl.add, reduce_res=t((128, 1)))),
    (C, DTypeError, "a bitwise comparison of range_select (its indices are fp32)",
     lambda nisa, nl, t: nisa.range_select(dst=t(), on_true_tile=t(), comp_op0=nl.bitwise_and, comp_op1=nl.less,
                                           bound0=0.0, bound1=8.0)),
    (C, ShapeError, "a reduction of tiles with no element per partition",
     lambda nisa, nl, t: nisa.select_reduce(dst=t((128, 0)), predicate=t((128, 0)), on_true=t((128, 0)),
                                            on_false=0.0, reduce_res=t((128, 1)))),
    (C, OperandTypeError, "a scan's initial value that is a tuple",
     lambda nisa, nl, t: nisa.tensor_tensor_scan(dst=t(), data0=t(), data1=t(), initial=(1, 2), op0=nl.add,
                                                 op1=nl.add)),
    (C, OperandTypeError, "select_reduce with on_true None",
     lambda nisa, nl, t: nisa.select_reduce(dst=t(), predicate=t(), on_true=None, on_false=None)),
    (C, DTypeError, "a register loaded from a float tile holding NaN",
     lambda nisa, nl, t: (nisa.memset(x := t((1, 1)), float("nan")), nisa.register_load(nisa.register_alloc(0), x))),
    (C, OperandTypeError, "local_gather with num_elem_per_idx a dict",
     lambda nisa, nl, t: nisa.local_gather(dst=t((128, 1)), src_buffer=t((128, 1)), index=t((128, 1), "int32"),
                                           num_elem_per_idx={})),
    (C, OperandTypeError, "nc_match_replace8 with imm text",
     lambda nisa, nl, t: nisa.nc_match_replace8(dst=t((128, 8)), data=t((128, 8)), vals=t((128, 8)), imm="x")),
    (C, ShapeError, "nc_match_replace8 with vals on other partitions than data",
     lambda nisa, nl, t: nisa.nc_match_replace8(dst=t((128, 1)), data=t((128, 1)), vals=t((1, 8)), imm=0.0)),
    ("beta", ShapeError, "tensor_scalar_cumulative into a dst of another rank",
     lambda nisa, nl, t: nisa.tensor_scalar_cumulative(src=t((128, 8, 4)), op0=nl.add, op1=nl.add, imm0=1.0,
                                                       dst=t((128, 32)))),
    ("beta", OperandTypeError, "memset of a shape None",
     lambda nisa, nl, t: nisa.memset(shape=None, value=1.0, dtype=nl.float32)),
    ("beta", OperandTypeError, "local_gather with num_elem_per_idx None",
     lambda nisa, nl, t: nisa.local_gather(t((32, 16)), t((32, 16), "int32"), num_elem_per_idx=None)),
    ("beta", OperandTypeError, "tensor_tensor of text",
     lambda nisa, nl, t: nisa.tensor_tensor(data1=t(), data2="x", op=nl.add)),
    ("beta", OperandTypeError, "a reduce axis that is a dict",
     lambda nisa, nl, t: nisa.tensor_reduce(op=nl.add, data=t(), axis={})),
    ("beta", ShapeError, "a predicate of another rank than dst",
     lambda nisa, nl, t: nisa.tensor_copy_predicated(src=t((128, 8, 4)), dst=t((128, 8, 4)),
                                                     predicate=t((128, 1)))),
    ("beta", UnknownNameError, "a dtype that is text",
     lambda nisa, nl, t: nisa.tensor_copy(t(), dtype="x")),
    # the nl.* ops of both generations
    (C, OperandTypeError, "a unary op of a number",
     lambda nisa, nl, t: nl.exp(1.5)),
    ("beta", OperandTypeError, "a unary op of None",
     lambda nisa, nl, t: nl.exp(None)),
    (C, OperandTypeError, "a binary op of two numbers",
     lambda nisa, nl, t: nl.add(2.0, 3.0)),
    ("beta", OperandTypeError, "a binary op of a tile and a tuple",
     lambda nisa, nl, t: nl.add(t(), (1, 2))),
    (C, OperandTypeError, "a matmul by a number",
     lambda nisa, nl, t: nl.matmul(t((128, 64)), 2.0)),
    (C, OperandTypeError, "a reduction of text",
     lambda nisa, nl, t: nl.sum("x", axis=1)),
    (C, OperandTypeError, "nl.ds from NaN",
     lambda nisa, nl, t: nl.ds(float("nan"), 4)),
    ("beta", OperandTypeError, "nl.ds of an infinite size",
     lambda nisa, nl, t: nl.ds(0, float("inf"))),
    (C, OperandTypeError, "a static_range over a float",
     lambda nisa, nl, t: nl.static_range(2.5)),
    ("beta", OperandTypeError, "an affine_range with a tuple stop",
     lambda nisa, nl, t: nl.affine_range(0, (1, 2))),
    (C, OperandTypeError, "a fori_loop from NaN",
     lambda nisa, nl, t: nl.fori_loop(float("nan"), 1, lambda i: None)),
    (C, OperandTypeError, "a fori_loop whose body is no function",
     lambda nisa, nl, t: nl.fori_loop(0, 1, 3)),
    (C, OperandTypeError, "a while_loop on infinity",
     lambda nisa, nl, t: nl.while_loop(float("inf"), lambda: 0)),
    (C, OperandTypeError, "an ndarray address that is a list of one float",
     lambda nisa, nl, t: nl.ndarray((128, 1), nl.int32, address=[1.0])),
    (C, OperandTypeError, "a buffer that is text",
     lambda nisa, nl, t: nl.ones((32, 16), nl.float16, buffer="x")),
    ("beta", OperandTypeError, "a buffer that is a list",
     lambda nisa, nl, t: nl.full((1, 8), 0.0, nl.float32, buffer=[1.0])),
    ("beta", OperandTypeError, "zeros_like of text",
     lambda nisa, nl, t: nl.zeros_like("x")),
    (C, OperandTypeError, "a store of a number (the current API stores tiles)",
     lambda nisa, nl, t: nl.store(t(buffer="shared_hbm"), 2.5)),
    (C, OperandTypeError, "a dropout rate of NaN",
     lambda nisa, nl, t: nl.dropout(t(), float("nan"))),
    ("beta", OperandTypeError, "loop_reduce over a tile of loop indices",
     lambda nisa, nl, t: nl.loop_reduce(t(), nl.add, t())),
    ("beta", KernelError, "num_programs of a NaN axis",
     lambda nisa, nl, t: nl.num_programs(float("nan"))),
    (C, ShapeError, "a shared identity matrix of 0 rows",
     lambda nisa, nl, t: nl.shared_identity_matrix(0)),
    ("beta", ShapeError, "a shared identity matrix bigger than HBM",
     lambda nisa, nl, t: nl.shared_identity_matrix(2**20)),
    (C, ShapeError, "a tile of no partition",
     lambda nisa, nl, t: nl.ndarray((0, 8), nl.float32)),
    (C, UnknownNameError, "an nl op's dtype that is text",
     lambda nisa, nl, t: nl.exp(t(), dtype="x")),
    ("beta", ShapeError, "a 1-d stationary of a matmul",
     lambda nisa, nl, t: nisa.nc_matmul(t((64,)), t((64, 512)))),
    ("beta", ShapeError, "nc_find_index8 with 1-d vals",
     lambda nisa, nl, t: nisa.nc_find_index8(data=t((64, 512)), vals=t((64,)))),
    ("beta", OperandTypeError, "iterating a tile (a shuffle mask given as one)",
     lambda nisa, nl, t: list(t((32, 8)))),
    (C, OperandTypeError, "a loop step of 0",
     lambda nisa, nl, t: nl.affine_range(0, 4, 0)),
    (C, KernelError, "a shared constant from a file that does not exist",
     lambda nisa, nl, t: nl.shared_constant("/nonexistent/constant.npy")),
    ("beta", OperandTypeError, "a shared constant that is a tile",
     lambda nisa, nl, t: nl.shared_constant(t())),
    ("beta", ShapeError, "broadcast_to a shape that is one negative int",
     lambda nisa, nl, t: nl.broadcast_to(t((1, 8)), -1)),
    ("beta", OperandTypeError, "rms_norm with no n (the beta API takes one)",
     lambda nisa, nl, t: nl.rms_norm(t((32, 16)), t((32, 16)), 1, None)),
    (C, ShapeError, "a matmul of a moving tile with no element per partition",
     lambda nisa, nl, t: nisa.nc_matmul(dst=t((64, 0), buffer="psum"), stationary=t((128, 64)),
                                        moving=t((128, 0)))),
    (C, ShapeError, "select_reduce with on_false on other partitions",
     lambda nisa, nl, t: nisa.select_reduce(dst=t((128, 1)), predicate=t((128, 1)), on_true=t((128, 1)),
                                            on_false=t((74, 1)))),
    (C, ShapeError, "tensor_reduce over an axis of no element",
     lambda nisa, nl, t: nisa.tensor_reduce(dst=t((128, 1)), op=nl.maximum, data=t((128, 0)), axis=1)),
    (C, OperandTypeError, "a bitvec immediate past 32 bits",
     lambda nisa, nl, t: nisa.tensor_scalar(dst=t((32, 16), "int32"), data=t((32, 16), "int32"), op0=nl.left_shift,
                                            operand0=10**30)),
    (C, ShapeError, "select_reduce over tiles of no element per partition",
     lambda nisa, nl, t: nisa.select_reduce(dst=t((128, 0)), predicate=t((128, 0)), on_true=t((128, 0)),
                                            on_false=t((128, 0)))),
    (C, DTypeError, "a bitvec first stage chained to a unary arithmetic op",
     lambda nisa, nl, t: nisa.tensor_scalar(dst=t((32, 16), "int32"), data=t((32, 16), "int32"), op0=nl.left_shift,
                                            operand0=3, op1=nl.rsqrt)),
]


@pytest.mark.parametrize("api, error, what, call", CASES, ids=[c[2] for c in CASES])
def test_a_call_the_fuzz_found_raises_a_named_error_at_its_line(api, error, what, call):
    with pytest.raises(error) as e:
        run(api, call)
    assert f"{__file__}:{call.__code__.co_firstlineno}" in str(e.value), str(e.value)


def test_nc_find_index8_marks_the_rows_whose_data_was_never_written():
    """A row with a never-written element finds nothing it can trust: its 8 indices are never-written too."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def find(x, v):
        data = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=data[0:2, :], src=x[0:2, :])  # rows 2 and 3 never written
        vals = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=vals, src=v)
        idx = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=data, vals=vals)
        out = nl.ndarray((4, 8), nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=idx)
        return out

    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    with pytest.raises(UninitializedError) as e:  # the store of idx reaches HBM (strict mode)
        find(x, x[:, :8].copy())
    assert "16 of 32 elements, partitions 2..3" in str(e.value)


def test_a_unary_op_with_reverse_writes_every_element():
    """rsqrt takes one input; with reverse0 the operand is that input, and the result still fills dst."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def kernel(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, t, nl.rsqrt, 4.0, reverse0=True)
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=d)
        return out

    got = kernel(np.ones((4, 8), np.float32))
    assert got.shape == (4, 8) and np.isfinite(got).all()


I32 = np.iinfo(np.int32)


def _to_int32(f: np.ndarray) -> np.ndarray:
    """numpy: the engines' output conversion into int32: round to nearest even, saturate, NaN gives 0."""
    f = np.nan_to_num(np.asarray(f, np.float64), nan=0.0, posinf=I32.max, neginf=I32.min)
    return np.clip(np.rint(f), I32.min, I32.max).astype(np.int32)


def test_an_integer_power_with_negative_exponents_is_a_fraction_converted_into_the_integer_dst():
    """Arithmetic ops take integers as numbers (the ISA reference's operator table): 2 ** -2 is 0.25, which
    the output conversion stores as 0; 0 ** -1 is infinity, stored saturated."""
    import trnsim.nki as nki
    import trnsim.nki.language as nl

    @nki.jit
    def power(a, b):
        out = nl.ndarray(a.shape, nl.int32, buffer=nl.shared_hbm)
        nl.store(out, nl.power(nl.load(a), nl.load(b)))
        return out

    a = np.array([[2, -1, 1, 0, 3, 2, -2, 7]], np.int32)
    b = np.array([[-2, -3, -5, -1, 2, -1, 3, 0]], np.int32)
    got = power(a, b)
    with np.errstate(divide="ignore"):
        assert np.array_equal(got, _to_int32(np.power(a.astype(np.float64), b.astype(np.float64))))
    assert got.tolist() == [[0, -1, 1, I32.max, 9, 0, -8, 1]]


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_nan_added_to_an_int_tile_takes_the_output_conversion(engine):
    """Arithmetic runs on float values; writing into an int32 tile rounds and saturates, NaN becoming 0 (the
    ISA reference's casting rule, docs/numerics.md): 3 + NaN stores 0, 3 + inf the int32 maximum."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def add(a):
        t = nl.load(a)
        out = nl.ndarray((3,) + a.shape, nl.int32, buffer=nl.shared_hbm)
        for i, v in enumerate((float("nan"), float("inf"), -float("inf"))):
            d = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
            nisa.tensor_scalar(d, t, nl.add, v, engine=getattr(nisa.engine, engine))
            nl.store(out[i], d)
        return out

    a = np.array([[3, -7, 0, I32.max]], np.int32)
    got = add(a)
    with np.errstate(invalid="ignore"):
        want = np.stack([_to_int32(a.astype(np.float32) + np.float32(v)) for v in (np.nan, np.inf, -np.inf)])
    assert np.array_equal(got, want)
    assert got[0].tolist() == [[0, 0, 0, 0]] and got[1].tolist() == [[I32.max] * 4]


def test_a_bitwise_first_stage_of_a_cumulative_or_reducing_scalar_op_works_on_the_integer_bits():
    """tensor_scalar_cumulative and tensor_scalar_reduce with a bitwise op0 on integer data apply it to the bit
    patterns, then scan or reduce the values."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def kernel(x):
        a = nl.load(x)
        scan = nl.ndarray(x.shape, nl.int16, buffer=nl.sbuf)  # the scan takes no 32-bit integers
        nisa.tensor_scalar_cumulative(dst=scan, src=a, op0=nl.bitwise_and, op1=nl.add, imm0=6)
        xored = nl.ndarray(x.shape, nl.uint8, buffer=nl.sbuf)
        total = nl.ndarray((x.shape[0], 1), nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=xored, data=a, op0=nl.bitwise_xor, operand0=1, reduce_op=nl.add,
                                  reduce_res=total)
        out = nl.ndarray((x.shape[0], 2 * x.shape[1] + 1), nl.int32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:x.shape[1]], nl.copy(scan, dtype=nl.int32))
        nl.store(out[:, x.shape[1]:2 * x.shape[1]], nl.copy(xored, dtype=nl.int32))
        nl.store(out[:, 2 * x.shape[1]:], total)
        return out

    x = np.array([[1, 2, 3, 7], [4, 5, 6, 255]], np.uint8)
    got = kernel(x)
    assert np.array_equal(got[:, :4], np.cumsum(x & 6, axis=1))
    assert np.array_equal(got[:, 4:8], x ^ 1)
    assert np.array_equal(got[:, 8], (x ^ 1).astype(np.int64).sum(axis=1))
