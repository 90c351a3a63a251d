"""Beta outputs: tensors allocated in nl.hbm come back (from a call and from simulate_kernel); a returned tensor
written only in part comes back with a warning naming the unwritten elements, or an error on request."""
import numpy as np
import pytest

import trnsim.nki as nki_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki
import trnsim.nki.beta.language as nl
from trnsim.core.errors import MemorySpaceError, UninitializedError, UninitializedWarning


def double_into_hbm(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def first_rows_only(x):
    """Writes rows 0..7 of a 16-row output; rows 8..15 are never written."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:8, :], nl.load(x[0:8, :]))
    return out


def test_hbm_output_returned(rng):
    x = rng.standard_normal((16, 32), np.float32)
    np.testing.assert_array_equal(nki.jit(double_into_hbm)(x), x * 2)
    np.testing.assert_array_equal(nki.simulate_kernel(nki.jit(double_into_hbm), x), x * 2)
    np.testing.assert_array_equal(nki.simulate_kernel(double_into_hbm, x), x * 2)


def test_partly_written_output_warns_naming_rows(rng):
    x = rng.standard_normal((16, 4), np.float32)
    with pytest.warns(UninitializedWarning, match=r"'.*' holds never-written elements \(32 of 64; rows \[8, 9, 10, 11, "
                                                   r"12, 13, 14, 15\], e.g. \[8, 0\]"):
        out = nki.jit(first_rows_only)(x)
    np.testing.assert_array_equal(out[:8], x[:8])


def test_partly_written_output_error_on_request(rng, monkeypatch):
    x = rng.standard_normal((16, 4), np.float32)
    with pytest.raises(UninitializedError, match=r"never-written elements \(32 of 64"):
        nki.jit(first_rows_only, unwritten_output="error")(x)
    monkeypatch.setenv("TRNSIM_UNWRITTEN_OUTPUT", "error")
    with pytest.raises(UninitializedError, match=r"never-written elements"):
        nki.jit(first_rows_only)(x)


def test_current_api_keeps_the_shared_hbm_rule(rng):
    """Only the beta API returns private HBM tensors."""
    def k(x):
        out = nl_cur.ndarray(x.shape, x.dtype, buffer=nl_cur.hbm)
        nl_cur.store(out, nl_cur.load(x))
        return out
    with pytest.raises(MemorySpaceError, match="kernel outputs must be allocated with buffer=nl.shared_hbm"):
        nki_cur.jit(k)(rng.standard_normal((8, 8), np.float32))


def test_never_written_sbuf_stored_is_an_error(rng):
    """Storing never-written on-chip values to HBM stays an error in strict mode."""
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype)
        nl.store(out, t)
        return out
    with pytest.raises(UninitializedError, match="never-written values"):
        nki.jit(k)(rng.standard_normal((8, 8), np.float32))
