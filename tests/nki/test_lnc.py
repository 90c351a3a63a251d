"""LNC 2 launches: the two cores share HBM and take turns, so no write is lost and a run is repeatable."""
import numpy as np
import pytest

from trnsim import nki
from trnsim.core.errors import DeadlockError
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def halves_through_sbuf(x, out):
    """Each core streams its half of the rows through SBUF into `out`, 128 columns at a time."""
    half = x.shape[0] // nl.num_programs()
    lo = nl.program_id(0) * half
    for j in range(0, x.shape[1], 128):
        t = nl.ndarray((half, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[lo:lo + half, j:j + 128])
        nisa.dma_copy(dst=out[lo:lo + half, j:j + 128], src=t)
    return out


def test_lnc2_in_place_output_keeps_both_cores_writes(trn):
    """Both cores write one borrowed input in place: 200 of 200 runs return every row (once lost 6 in 20)."""
    x = np.random.default_rng(1).standard_normal((128, 4096)).astype(np.float32)
    wrong = sum(not np.array_equal(halves_through_sbuf[2](x, np.zeros_like(x)), x) for _ in range(200))
    assert wrong == 0


@nki.jit
def barrier_then_read_peer(x):
    """Core 1 writes its rows, both meet at the barrier, then core 0 copies core 1's rows to its own half."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    flag = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    t = nl.ndarray((64, x.shape[1]), x.dtype, buffer=nl.sbuf)
    if pid == 1:
        nisa.dma_copy(dst=t, src=x[64:128])
        nisa.dma_copy(dst=out[64:128], src=t)
    nisa.core_barrier(flag)
    if pid == 0:
        nisa.dma_copy(dst=t, src=out[64:128])
        nisa.dma_copy(dst=out[0:64], src=t)
    return out


def test_core_barrier_orders_the_cores(trn):
    """Core 0 runs first, yet what it reads after the barrier is what core 1 wrote before it."""
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    got = barrier_then_read_peer[2](x)
    np.testing.assert_array_equal(got, np.concatenate([x[64:], x[64:]]))


@nki.jit
def barrier_on_one_core(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    flag = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.core_barrier(flag)
    return out


def test_barrier_the_peer_never_reaches_is_an_error(trn):
    """A core waiting at a barrier its peer never reaches stops with DeadlockError instead of hanging."""
    with pytest.raises(DeadlockError, match="core 0 waits for the other core to reach the core barrier"):
        barrier_on_one_core[2](np.ones((128, 8), np.float32))


def test_lnc2_needs_a_chip_the_catalog_gives_two_core_logical_cores(trn):
    """Trn1's chip lists LNC 1 only (catalog lnc_configs): kernel[2] there is a ConfigError."""
    from trnsim.errors import ConfigError
    trn("trn1")
    with pytest.raises(ConfigError, match="trn1 has LNC 1"):
        barrier_then_read_peer[2](np.ones((128, 8), np.float32))


def test_targets_and_aliases_resolve_through_the_catalog():
    """NKI targets come from the catalog's NeuronCore records; genN, vN and inf2 name the same cores."""
    from trnsim import specs
    from trnsim.core import resolve_target
    assert specs.targets() == ("trn1", "trn2", "trn3")
    assert [resolve_target(n) for n in ("gen2", "inf2", "v3", "gen4", "trn3")] == ["trn1", "trn1", "trn2", "trn3", "trn3"]
