"""nc_stream_shuffle between different partition counts (nki/api/nki/isa/__init__.py: nc_stream_shuffle):
the active partitions, rounded up to whole quadrants, fix where src and dst may start."""
import numpy as np
import pytest

from tests.core.conftest import on_chip, read
from trnsim.core import DTypeError, Op, ShapeError

R = np.random.default_rng(3)


def test_one_partition_broadcasts_to_a_quadrant(nc):
    """src [1, F] with a mask of zeros copies that partition to each of dst's 32 partitions."""
    x = R.standard_normal((1, 8)).astype(np.float32)
    dst = nc.tensor((32, 8), "float32")
    nc.issue(Op.NC_STREAM_SHUFFLE, dst=dst, src=on_chip(nc, x), shuffle_mask=[0] * 32)
    np.testing.assert_array_equal(read(dst), np.repeat(x, 32, axis=0))


def test_wider_dst_applies_the_mask_per_quadrant(nc):
    """src [64, F] into dst [64, F]: each quadrant reverses its 32 partitions; dst keeps where the mask says 255."""
    x = R.standard_normal((64, 4)).astype(np.float32)
    mask = list(range(31, -1, -1))
    mask[0] = 255
    dst0 = np.zeros((64, 4), np.float32)
    dst = on_chip(nc, dst0)
    nc.issue(Op.NC_STREAM_SHUFFLE, dst=dst, src=on_chip(nc, x), shuffle_mask=mask)
    want = np.concatenate([x[31::-1], x[:31:-1]])
    want[0], want[32] = 0, 0
    np.testing.assert_array_equal(read(dst), want)


def test_start_partition_rules(nc):
    """32 active partitions may start at 32; 64 active must start at 0 or 64; dtype and free size must match."""
    big = on_chip(nc, np.zeros((128, 4), np.float32))
    one = on_chip(nc, np.ones((1, 4), np.float32))
    nc.issue(Op.NC_STREAM_SHUFFLE, dst=big[32:64], src=one, shuffle_mask=[0] * 32)
    np.testing.assert_array_equal(read(big)[32:64], np.ones((32, 4), np.float32))
    with pytest.raises(ShapeError, match="multiple of 64; it starts at partition 32"):
        nc.issue(Op.NC_STREAM_SHUFFLE, dst=big[32:96], src=one, shuffle_mask=[0] * 32)
    with pytest.raises(DTypeError, match="keeps the dtype"):
        nc.issue(Op.NC_STREAM_SHUFFLE, dst=nc.tensor((32, 4), "bfloat16"), src=one, shuffle_mask=[0] * 32)
    with pytest.raises(ShapeError, match="elements per partition differ"):
        nc.issue(Op.NC_STREAM_SHUFFLE, dst=nc.tensor((32, 2), "float32"), src=one, shuffle_mask=[0] * 32)
