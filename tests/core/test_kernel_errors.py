"""One test per error class: the message carries the rule, the numbers and the user's file:line."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import (CapacityError, DTypeError, FreeSizeError, GenerationError, MemorySpaceError,
                         OutOfBoundsError, PartitionLimitError, PartitionStartError, PSUMBankError, ShapeError)
from tests.core.conftest import source_at

X = np.ones((128, 512), np.float32)


def run(body, *args):
    return nki.jit(body)(*args)


def test_partition_dim_over_128():
    """A 256-partition SBUF tile is refused with pmax and the allocation line."""
    def k(x):
        nl.ndarray((256, 64), nl.float32)
    with pytest.raises(PartitionLimitError, match=r"partition dim 256 exceeds pmax 128") as e:
        run(k, X)
    assert "nl.ndarray((256, 64)" in source_at(e.value) and "test_kernel_errors.py:" in str(e.value)


def test_free_size_over_limit():
    """bn_stats over 1024 elements is refused with bn_stats_fmax 512."""
    def k(x):
        t = nl.load(x.reshape((64, 1024)))
        nisa.bn_stats(nl.ndarray((64, 6), nl.float32), t)
    with pytest.raises(FreeSizeError, match=r"free size 1024 exceeds bn_stats_fmax 512") as e:
        run(k, X)
    assert "nisa.bn_stats" in source_at(e.value)


def test_sbuf_overflow_lists_live_tensors():
    """Allocating past SBUF capacity names the request, the usable bytes and the live tensors (used later).
    The kernel placed them (address=), so the compiler cannot spill them to make room."""
    def k(x):
        keep = [nl.ndarray((128, 40 * 1024), nl.uint8, name=f"big{i}", address=(0, i * 40 * 1024)) for i in range(5)]
        nl.ndarray((128, 40 * 1024), nl.uint8, name="one_too_many")
        return keep
    with pytest.raises(CapacityError, match=r"SBUF overflow: tensor 'one_too_many' needs 40960 B .* 212984 usable B") as e:
        run(k, X)
    assert "'big0'" in str(e.value) and "'big4'" in str(e.value)
    assert 'name="one_too_many"' in source_at(e.value)


def test_psum_overflow():
    """A ninth 2 KiB-per-partition PSUM accumulator written while eight others still hold unread sums does not
    fit the 8 banks; the message names the tile, the bytes and the line."""
    def k(x):
        s, m = nl.load(x[:, :128]), nl.load(x)
        keep = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]
        for t in keep:
            nisa.nc_matmul(t, s, m)
        return keep
    with pytest.raises(CapacityError, match=r"PSUM overflow: .*'psum9': 2048 B .*placed at its first write.* "
                                            r"16384 usable B") as e:
        run(k, X)
    assert "nisa.nc_matmul(t, s, m)" in source_at(e.value)


def test_psum_bank_crossing_and_alignment():
    """A matmul output straddling two PSUM banks, and a PSUM address off a bank boundary, are refused."""
    def crossing(x):
        big = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
        s = nl.load(x[:, :128])
        m = nl.load(x)
        nisa.nc_matmul(big[:, 256:768], s, m)
    with pytest.raises(PSUMBankError, match=r"spans PSUM bytes 1024..3071, crossing a 2048 B bank") as e:
        run(crossing, X)
    assert "nisa.nc_matmul(big[:, 256:768]" in source_at(e.value)

    def misaligned(x):
        nl.ndarray((128, 64), nl.float32, buffer=nl.psum, address=(0, 1024))
    with pytest.raises(PSUMBankError, match=r"PSUM address 1024 .* not on a bank boundary \(multiple of 2048 B\)"):
        run(misaligned, X)


def test_partition_start_rule():
    """A 64-partition tensor placed at partition 32 breaks the start rule (0 or 64)."""
    def k(x):
        nl.ndarray((64, 16), nl.float32, address=(32, 0))
    with pytest.raises(PartitionStartError, match=r"64 partitions cannot start at partition 32: allowed starts \[0, 64\]"):
        run(k, X)


def test_operand_in_wrong_buffer():
    """The tensor engine cannot read PSUM, GpSimd cannot touch PSUM, and DMA never reads PSUM."""
    def mm_from_psum(x):
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(nl.ndarray((128, 128), nl.float32, buffer=nl.psum), p, nl.load(x[:, :128]))
    with pytest.raises(MemorySpaceError, match=r"nc_matmul operand 'stationary': the tensor engine cannot read psum"):
        run(mm_from_psum, X)

    def gpsimd_psum(x):
        p = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
        nisa.memset(p, 0.0, engine=nisa.engine.gpsimd)
    with pytest.raises(MemorySpaceError, match=r"the gpsimd engine cannot write psum"):
        run(gpsimd_psum, X)

    def dma_from_psum(x):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        p = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
        nisa.dma_copy(out, p)
    with pytest.raises(MemorySpaceError, match=r"DMA cannot read PSUM") as e:
        run(dma_from_psum, X)
    assert "nisa.dma_copy(out, p)" in source_at(e.value)


def test_dtype_engine_lacks():
    """int32 inputs to the tensor engine are refused with the supported list."""
    def k(x):
        a = nl.zeros((128, 128), nl.int32)
        nisa.nc_matmul(nl.ndarray((128, 128), nl.float32, buffer=nl.psum), a, a)
    with pytest.raises(DTypeError, match=r"dtype int32 is not supported by the tensor engine on v3"):
        run(k, X)


def test_generation_lacks_instruction(monkeypatch):
    """activate2 exists only from NeuronCore-v4; on trn2 it is refused naming both generations."""
    def k(x):
        t = nl.load(x)
        nisa.activate2(t, nl.exp, t, op0=nl.multiply, imm0=1.0)
    with pytest.raises(GenerationError, match=r"activate2 needs NeuronCore-v4 or newer; this core is v3"):
        run(k, X)


def test_out_of_bounds_view():
    """Slicing past a tensor's end is refused with the slice and the dim size."""
    def k(x):
        x[0:200, :]
    with pytest.raises(OutOfBoundsError, match=r"slice 0:200 out of bounds for dim 0 of size 128 of 'x'") as e:
        run(k, X)
    assert "x[0:200, :]" in source_at(e.value)


def test_shape_mismatch():
    """tensor_tensor on tiles of different free sizes is refused with both sizes."""
    def k(x):
        a, b = nl.load(x[:, :64]), nl.load(x[:, :32])
        nisa.tensor_tensor(a, a, b, nl.add)
    with pytest.raises(ShapeError, match=r"elements per partition differ: dst=64, data1=64, data2=32"):
        run(k, X)


def test_output_not_in_shared_hbm():
    """Returning a tensor allocated in private hbm is refused: outputs go in shared_hbm."""
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(x))
        return out
    with pytest.raises(MemorySpaceError, match=r"is in hbm; kernel outputs must be allocated with buffer=nl.shared_hbm") as e:
        run(k, X)
    assert "buffer=nl.hbm" in source_at(e.value)


def test_python_branch_on_a_tensor():
    """`if tile:` in a kernel is refused: tensor values cannot decide Python control flow."""
    from trnsim.core import KernelError

    def k(x):
        t = nl.load(x)
        if t:
            pass
    with pytest.raises(KernelError, match=r"truth value of tensor .* use nl.while_loop/fori_loop") as e:
        run(k, X)
    assert "if t:" in source_at(e.value)
