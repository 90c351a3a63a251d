"""Which matmuls accumulate: PSUM bytes inside open accumulation groups, against a byte-flag model written here.

The model is the rule itself: a matmul with accumulate=None accumulates when every byte of its destination is
inside an open group; its bytes then join a group; another engine touching PSUM bytes closes the groups over
them."""
import numpy as np
import pytest

from trnsim.core import NeuronCore, Op


def _bytes(v):
    r = v.region()
    return slice(r.partition, r.partition + r.partitions), slice(r.byte_lo, r.byte_hi)


@pytest.mark.parametrize("seed", range(6))
def test_random_matmuls_and_evictions_accumulate_as_the_byte_flags_say(seed):
    rng = np.random.default_rng(seed)
    nc = NeuronCore("trn2", values=False)
    st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    psum = nc.tensor((128, 2, 512), "float32", "psum")  # two banks
    src = nc.tensor((128, 512), "float32")
    flags = np.zeros((nc.psum.partitions, nc.psum.row_bytes), bool)
    decided = []
    for _ in range(300):
        bank, rows = int(rng.integers(2)), [32, 64, 128][rng.integers(3)]
        p0 = int(rng.integers(0, 128 // rows)) * rows
        n = int(rng.choice([128, 256, 512]))
        c0 = int(rng.integers(0, 512 // n)) * n
        dst = psum[p0:p0 + rows, bank, c0:c0 + n]
        if rng.random() < 0.7:
            nc.issue(Op.NC_MATMUL, dst=dst, stationary=st[:, 0:rows], moving=mv[:, 0:n])
            want = bool(flags[_bytes(dst)].all())
            flags[_bytes(dst)] = True
            decided.append((nc.stream[-1].accumulated, want))
        else:  # VectorE reads or writes the bytes: their groups close
            nc.issue(Op.TENSOR_COPY, dst=dst, src=src[p0:p0 + rows, 0:n])
            flags[_bytes(dst)] = False
    got, want = zip(*decided)
    assert got == want
    assert 0 < sum(want) < len(want)  # both kinds happened
