"""Current-API names: rounding ops, logical_not, gather_flattened, dynamic_range, NKIObject config classes,
nki.dtype as an annotation, dtypes as their name strings."""
import dataclasses

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


def test_rounding_logical_not_and_gather(rng):
    x = (rng.standard_normal((16, 48)) * 4).astype(np.float32)
    x[0, :4] = [-0.5, 0.5, -3.0, 3.0]
    idx = rng.integers(0, 48, (16, 9)).astype(np.uint32)

    @nki.jit
    def k(a, i):
        t = nl.load(a)
        outs = [nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm) for _ in range(4)]
        for o, f in zip(outs, (nl.floor, nl.ceil, nl.trunc)):
            nl.store(o, f(t))
        nl.store(outs[3], nl.logical_not(nl.greater(t, 0.0)))
        g = nl.ndarray(i.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(g, nl.gather_flattened(t, nl.load(i)))
        return outs + [g]
    fl, ce, tr, ln, g = k(x, idx)
    np.testing.assert_array_equal(fl, np.floor(x))
    np.testing.assert_array_equal(ce, np.ceil(x))
    np.testing.assert_array_equal(tr, np.trunc(x))
    np.testing.assert_array_equal(ln, (x <= 0).astype(np.float32))
    np.testing.assert_array_equal(g, np.take_along_axis(x, idx.astype(np.int64), axis=1))


def test_dynamic_range_takes_register_bounds(rng):
    """A loop over [1, n) where n is read into a register from HBM at run time."""
    x = rng.standard_normal((8, 32)).astype(np.float32)

    @nki.jit
    def k(a, n):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        acc = nl.load(a)
        r = nisa.register_alloc(0)
        nisa.register_load(r, n)
        for _ in nl.dynamic_range(1, r):
            acc = nl.add(acc, nl.load(a))
        nl.store(out, acc)
        return out
    np.testing.assert_allclose(k(x, np.array([[4]], np.int32)), 4 * x, rtol=1e-6)
    with pytest.raises(Exception, match="step must be a compile-time positive int"):
        list(nl.dynamic_range(0, 4, 0))


class Tiling(nl.NKIObject):
    tile: int = 128
    bufs: int = 2


@dataclasses.dataclass
class Shape(nl.NKIObject):
    rows: int
    cols: int = 64


@dataclasses.dataclass
class Section(nl.NKIObject):
    index = None  # fields without a type, as the NKI library's kernel dataclasses declare them
    offset = 0
    size: int = 128

    def end(self):
        return self.offset + self.size


def test_nkiobject_dataclass_fields_without_types():
    """A dataclass NKIObject takes its untyped class attributes as keywords (methods stay methods)."""
    sec = Section(index=2, offset=256)
    assert (sec.index, sec.offset, sec.size, sec.end()) == (2, 256, 128, 384)
    assert Section().index is None
    with pytest.raises(TypeError):
        Section(end=3)


def test_nkiobject_config_classes(rng):
    """Class-attribute and dataclass configs are built with keywords and passed to a kernel."""
    cfg = Tiling(bufs=3)
    assert (cfg.tile, cfg.bufs) == (128, 3) and "bufs=3" in repr(cfg)
    with pytest.raises(TypeError, match="no field 'tiles'"):
        Tiling(tiles=3)
    shp = Shape(rows=8)
    assert (shp.rows, shp.cols) == (8, 64) and isinstance(shp, nl.NKIObject)
    x = rng.standard_normal((8, 64)).astype(np.float32)

    @nki.jit
    def k(a, c: Tiling, s: Shape, dt: nki.dtype = nl.float32):
        out = nl.ndarray((s.rows, s.cols), dt, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), float(c.bufs)))
        return out
    np.testing.assert_allclose(k(x, cfg, shp), 3 * x, rtol=1e-6)


def test_dtypes_print_and_compare_as_names():
    assert str(nl.float32) == "float32" and nl.float32 == "float32" and nl.bfloat16 != "float32"
    assert isinstance(nl.bfloat16, nki.dtype) and isinstance(nl.bfloat16, str)
    assert nl.ndarray((2, 2), "bfloat16").dtype == nl.bfloat16
