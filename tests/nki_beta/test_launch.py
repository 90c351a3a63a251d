"""Launch: nki.jit (mode=, platform_target=), simulate_kernel, baremetal, benchmark, profile, SPMD
grids, both output conventions, direct allocation (mod_alloc, alloc) and get_nc_version."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.compiler as ncc
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim.core.errors import DeadlockError, GenerationError, KernelError
from trnsim.errors import TrnsimError
from trnsim.specs.timing import timing


def scale_rows(in_tensor, out_tensor):
    """SDK 2.20 style: the output is an argument; each program of a [B, H] grid writes its own block."""
    b, h = nl.program_id(0), nl.program_id(1)
    nb, nh = nl.num_programs(0), nl.num_programs(1)
    rows = in_tensor.shape[0] // (nb * nh)
    i_p, i_f = nl.arange(rows)[:, None], nl.arange(in_tensor.shape[1])[None, :]
    r0 = (b * nh + h) * rows
    t = nl.load(in_tensor[r0 + i_p, i_f])
    nl.store(out_tensor[r0 + i_p, i_f], nl.multiply(t, float(10 * b + h + nl.program_ndim())))


def test_spmd_grid_with_output_argument(rng):
    """kernel[2, 3](x, out) runs 6 programs; program (b, h) scales its rows by 10b + h + ndim(=2)."""
    x = rng.standard_normal((96, 8), np.float32)
    out = np.zeros_like(x)
    nki.jit(scale_rows)[2, 3](x, out)
    factors = np.repeat([10 * b + h + 2 for b in range(2) for h in range(3)], 16).astype(np.float32)
    np.testing.assert_array_equal(out, x * factors[:, None])


@nki.jit
def grid_sum(x):
    """Allocate-and-return under a grid: every program's shared_hbm output is the same tensor."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    rows = x.shape[0] // nl.num_programs()
    nl.store(out[i * rows:(i + 1) * rows, :], nl.exp(nl.load(x[i * rows:(i + 1) * rows, :])))
    return out


def test_spmd_grid_allocate_and_return(rng):
    """kernel[nl.spmd_dim(nl.nc(2), 2)] runs 4 programs writing one shared output."""
    x = rng.standard_normal((64, 16), np.float32)
    k = grid_sum[nl.spmd_dim(nl.nc(2), 2)]
    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)
    assert [r.op.value for r in k.last_cores[0].stream].count("activation") == 4  # the programs ran in turn


def test_simulate_kernel_baremetal_and_modes(rng):
    """simulate_kernel(kernel, x), @nki.baremetal and jit(mode=, platform_target=) all run on the emulator."""
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.relu(nl.load(x)))
        return out

    x = rng.standard_normal((16, 16), np.float32)
    for fn in (nki.jit(k, mode="simulation"), nki.baremetal(k), nki.jit(mode="baremetal", platform_target="trn1")(k)):
        np.testing.assert_array_equal(nki.simulate_kernel(fn, x), np.maximum(x, 0))
    np.testing.assert_array_equal(nki.simulate_kernel(k, x), np.maximum(x, 0))


def test_platform_target_selects_the_generation():
    """nc_version is gen2 under platform_target='trn1' and gen3 by default; v3-only instructions fail on trn1."""
    def version(x):
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.full((1, 1), float(nisa.get_nc_version()), nl.float32))
        return out

    x = np.zeros((1, 1), np.float32)
    assert nki.jit(version, platform_target="trn1")(x)[0, 0] == nisa.nc_version.gen2
    assert nki.jit(version)(x)[0, 0] == nisa.nc_version.gen3

    def tcopy_on_act(x):
        nisa.tensor_copy(nl.load(x), engine=nisa.scalar_engine)

    with pytest.raises(GenerationError):
        nki.jit(tcopy_on_act, platform_target="trn1")(x)


def test_benchmark_latency_from_the_timing_model(rng):
    """nki.benchmark runs the kernel and reports the timing model's latency in us; a bigger copy takes longer."""
    import trnsim

    def copy_kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            nl.store(out[i * 128:(i + 1) * 128, :], nl.load(x[i * 128:(i + 1) * 128, :]))
        return out

    k = nki.benchmark(warmup=2, iters=5)(copy_kernel)
    small, big = rng.standard_normal((128, 512), np.float32), rng.standard_normal((1024, 512), np.float32)
    np.testing.assert_array_equal(k(small), small)
    t_small = k.benchmark_result.nc_latency.get_latency_percentile(50)
    k(big)
    t_big = k.benchmark_result.nc_latency.get_latency_percentile(99)
    assert 0 < t_small < t_big
    same = trnsim.benchmark(nki.jit(copy_kernel), big, timing_only=True)  # the same model, shapes only
    assert abs(same.latency / 1000 - t_big) < 1e-9
    r = k.benchmark_result.timing  # a measured latency: the timeline plus the execution's start-up and tear-down
    assert t_big * 1000 == pytest.approx(r.period + timing(r.target).execution_overhead) and r.period > 0


def test_profile_runs_and_keeps_the_stream(rng, tmp_path):
    """nki.profile runs the kernel and keeps its instruction stream (load, exp, store)."""
    @nki.profile(working_directory=str(tmp_path))
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    x = rng.standard_normal((8, 8), np.float32)
    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)
    assert [r.op.value for r in k.last_cores[0].stream] == ["dma_copy", "activation", "dma_copy"]


@nki.jit
def double_buffered(x):
    """mod_alloc(num_free_tiles=(2,)): logical tiles 0,2,.. share one physical tile, 1,3,.. the other."""
    n = x.shape[0] // 128
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((n, nl.par_dim(128), x.shape[1]), x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    res = nl.ndarray((n, nl.par_dim(128), x.shape[1]), x.dtype,
                     buffer=ncc.sbuf.alloc(lambda idx, p, f: (0, 4 * f + (idx[0] % 2) * f)))
    for i in nl.affine_range(n):
        buf[i] = nl.load(x[i * 128:(i + 1) * 128, :])
        res[i] = nl.multiply(buf[i], 2.0)
        nl.store(out[i * 128:(i + 1) * 128, :], res[i])
    return out


def test_direct_allocation_double_buffering(rng):
    """A double-buffered kernel with mod_alloc and alloc(func) computes 2x; its tiles sit where placed."""
    x = rng.standard_normal((512, 64), np.float32)
    np.testing.assert_array_equal(double_buffered(x), 2 * x)


def _bank_of(table, idx, pdim_size, fdim_size):
    return (table[idx], 0, 0)


@nki.jit
def psum_by_table(x):
    """PSUM tiles placed by a functools.partial that binds its leading `table` argument by keyword."""
    import functools
    out = nl.ndarray((2,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((2, nl.par_dim(x.shape[0]), x.shape[1]), nl.float32,
                    buffer=ncc.psum.alloc(functools.partial(_bank_of, table={(0,): 3, (1,): 6})))
    t = nl.load(x)
    for i in nl.affine_range(2):
        ps[i] = nl.multiply(t, float(i + 1))
        nl.store(out[i], ps[i])
    return out


def test_allocation_function_is_called_with_its_documented_argument_names(rng):
    """alloc(func) calls func(idx=, pdim_size=, fdim_size=), so a partial with a keyword-bound first argument
    places its tiles."""
    x = rng.standard_normal((32, 16), np.float32)
    np.testing.assert_array_equal(psum_by_table(x), np.stack([x, 2 * x]))


@ncc.skip_middle_end_transformations
@ncc.enable_stack_allocator
@nki.jit
def clobbered(x, y):
    """Two live tiles wrongly placed at the same SBUF address: b's load overwrites a."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray(x.shape, x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0), name="a")
    b = nl.ndarray(x.shape, x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0), name="b")
    a[...] = nl.load(x)
    b[...] = nl.load(y)
    nl.store(out, nl.add(a, b))
    return out


def test_aliasing_gives_hardware_values_when_not_strict(rng, monkeypatch):
    """Non-strict: a + b reads y twice (2y), the hardware's wrong answer, with a warning."""
    monkeypatch.setenv("TRNSIM_STRICT", "0")
    x, y = rng.standard_normal((128, 32), np.float32), rng.standard_normal((128, 32), np.float32)
    with pytest.warns(UserWarning, match="overwrote"):
        got = clobbered(x, y)
    np.testing.assert_array_equal(got, y + y)


def test_aliasing_is_reported_in_strict_mode(rng):
    """Strict (default): reading a after b overwrote it is an AliasingError naming both tensors."""
    from trnsim.nki.beta._tile import AliasingError
    x, y = rng.standard_normal((128, 32), np.float32), rng.standard_normal((128, 32), np.float32)
    with pytest.raises(AliasingError, match=r"'a'.*'b'"):
        clobbered(x, y)


@nki.jit
def psum_banks(a_t, b):
    """Two output blocks accumulate in two PSUM banks placed by psum.mod_alloc."""
    K, M = a_t.shape
    N = b.shape[1] // 2
    out = nl.ndarray((M, 2 * N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(M), N), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)))
    for j in nl.affine_range(2):
        acc[j] = nl.zeros((M, N), nl.float32)
        for k in nl.affine_range(K // 128):
            acc[j] += nisa.nc_matmul(nl.load(a_t[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, j * N:(j + 1) * N]))
    for j in nl.affine_range(2):
        nl.store(out[:, j * N:(j + 1) * N], nl.copy(acc[j]))
    return out


def test_psum_mod_alloc_places_blocks_in_banks(rng):
    """psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)) puts blocks in banks 2 and 3; the matmuls match numpy."""
    a_t, b = rng.standard_normal((256, 64), np.float32), rng.standard_normal((256, 256), np.float32)
    np.testing.assert_allclose(psum_banks(a_t, b), a_t.T @ b, rtol=1e-5, atol=1e-4)
    banks = {r.operands["dst"].byte_lo // 2048 for r in psum_banks.last_cores[0].stream if r.op.value == "nc_matmul"}
    assert banks == {2, 3}


@nki.jit
def head_all_reduce(x, op_name):
    """x [B, H, P, F]: program (b, h) loads its block, all_reduces it over the h axis inside an affine loop
    (the waits happen with the loop open), scales it and stores it."""
    B, H, P, F = x.shape
    out = nl.ndarray((B, H, P, F), nl.float32, buffer=nl.shared_hbm)
    b, h = nl.program_id(0), nl.program_id(1)
    for j in nl.affine_range(2):
        t = nl.load(x[b, h, :, j * (F // 2):(j + 1) * (F // 2)])
        r = nl.all_reduce(t, op=getattr(np, op_name), program_axes=[1], dtype=nl.float32)
        nl.store(out[b, h, :, j * (F // 2):(j + 1) * (F // 2)], nl.multiply(r, 2.0))
    return out


@pytest.mark.parametrize("op_name", ["add", "maximum"])
def test_all_reduce_over_one_axis_of_the_grid(rng, op_name):
    """nl.all_reduce(program_axes=[1]) on a [2, 3] grid: each program gets op over the 3 programs of its b."""
    x = rng.standard_normal((2, 3, 16, 8), np.float32)
    red = getattr(np, op_name).reduce(x, axis=1, keepdims=True)
    got = head_all_reduce[2, 3](x, op_name)
    np.testing.assert_allclose(got, np.broadcast_to(2 * red, x.shape), rtol=1e-6, atol=1e-6)


@nki.jit
def bf16_all_reduce(x):
    """Every program of a 1-d grid all_reduces its bf16 row block over the whole grid (program_axes=0)."""
    n = nl.num_programs(0)
    out = nl.ndarray((n,) + x.shape[1:], nl.bfloat16, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    nl.store(out[i], nl.all_reduce(nl.load(x[i]), op=np.add, program_axes=0))
    return out


def test_all_reduce_gives_every_program_the_same_bits(rng):
    """A bf16 sum over 4 programs, combined in program order: equal bits in every program, and the
    program-order bf16 rounding of each partial sum."""
    x = rng.standard_normal((4, 8, 16), np.float32).astype(ml_dtypes.bfloat16)
    got = bf16_all_reduce[4](x)
    want = x[0]
    for k in range(1, 4):
        want = (want.astype(np.float32) + x[k].astype(np.float32)).astype(ml_dtypes.bfloat16)
    for p in range(4):
        np.testing.assert_array_equal(got[p].view(np.uint16), want.view(np.uint16))
    # a launch without a grid is one program: the reduction is its own tile
    np.testing.assert_array_equal(bf16_all_reduce(x[:1]).view(np.uint16), x[:1].view(np.uint16))


@nki.jit
def partial_all_reduce(x):
    """Program 1 of the grid never reaches the all_reduce that program 0 waits in."""
    out = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nl.store(out, nl.all_reduce(nl.load(x[0]), op=np.add, program_axes=0))
    return out


def test_all_reduce_that_a_program_never_reaches_is_a_deadlock(rng):
    """A program of the group ends without the all_reduce: the others would wait forever (a named error)."""
    x = rng.standard_normal((2, 8, 16), np.float32)
    with pytest.raises(DeadlockError, match="nl.all_reduce"):
        partial_all_reduce[2](x)


@nki.jit
def all_reduce_axis_one(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.all_reduce(nl.load(x), op=np.add, program_axes=1))
    return out


def test_all_reduce_program_axes_must_name_grid_axes(rng):
    """A 1-d grid has no axis 1 to reduce over."""
    with pytest.raises(KernelError, match=r"program_axes=1.*grid \[2\]"):
        all_reduce_axis_one[2](rng.standard_normal((8, 4)).astype(np.float32))


def test_memory_budget_leaves_out_inputs_and_outputs(monkeypatch, rng):
    """A beta kernel on a 64 MiB input with a 64 MiB output runs under a 32 MiB budget read at every
    instruction: the input is read in place (not copied) until written and the tensors' bytes are not charged."""
    import trnsim.core.limits as limits
    monkeypatch.setattr(limits, "_CHECK_EVERY", 1)

    @nki.jit(max_memory_mb=32)
    def copy_wide(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        for j in nl.affine_range(x.shape[1] // 2048):
            i_p, i_f = nl.mgrid[0:128, 0:2048]
            nl.store(out[i_p, j * 2048 + i_f], nl.load(x[i_p, j * 2048 + i_f]))
        return out

    x = rng.standard_normal((128, 1 << 17), np.float32)
    before = x.copy()
    np.testing.assert_array_equal(copy_wide(x), before)
    np.testing.assert_array_equal(x, before)  # the caller's array is untouched


def test_written_input_goes_back_but_a_read_one_is_left_alone(rng):
    """Inputs are borrowed in place: an argument the kernel writes (SDK 2.20 output) gets the result, the
    other is not written, and the kernel's write never lands in an input it only reads."""
    def add_into(a, b, out):
        i_p, i_f = nl.mgrid[0:128, 0:64]
        nl.store(out[i_p, i_f], nl.add(nl.load(a[i_p, i_f]), nl.load(b[i_p, i_f])))

    a, b = rng.standard_normal((2, 128, 64), np.float32)
    a0, b0, out = a.copy(), b.copy(), np.zeros((128, 64), np.float32)
    nki.jit(add_into)(a, b, out)
    np.testing.assert_array_equal(out, a0 + b0)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_a_grid_dim_of_0_runs_one_program(rng):
    """kernel[0](...) runs the kernel once as program 0 of a one-program grid, with a GridWarning; a negative
    dim is refused."""
    from trnsim.core import GridWarning

    @nki.jit
    def scaled(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:16]
        factor = float(nl.program_id(0) + 10 * nl.num_programs(0) + 100 * nl.program_ndim())
        nl.store(out[i_p, i_f], nl.multiply(nl.load(x[i_p, i_f]), factor))
        return out

    x = rng.standard_normal((128, 16), np.float32)
    with pytest.warns(GridWarning, match=r"kernel\[0\]: a launch grid dim of 0 runs as one program"):
        k = scaled[0]
    np.testing.assert_allclose(k(x), x * 110.0, rtol=1e-6)
    with pytest.raises(TrnsimError, match="cannot be negative"):
        scaled[2, -1]
