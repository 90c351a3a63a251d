"""View reshapes: the elements numpy's reshape gives, or a ShapeError where the layout needs a copy."""
import numpy as np
import pytest

from trnsim.core import NeuronCore, ShapeError

CASES = [  # (view of x[8, 12, 6] in numpy, the same view in trnsim, new shape, needs a copy)
    (lambda x: x[:4], lambda v: v[:4], (48, 6), False),
    (lambda x: x[::2], lambda v: v[::2], (48, 6), True),
    (lambda x: x[:, 3:9], lambda v: v[:, 3:9], (48, 6), True),
    (lambda x: x[:, :, ::3], lambda v: v[:, :, ::3], (8, 1, 24), False),
    (lambda x: x.transpose(1, 0, 2), lambda v: v.permute((1, 0, 2)), (12, 48), True),
    (lambda x: x.transpose(1, 0, 2), lambda v: v.permute((1, 0, 2)), (3, 4, 8, 6), False),
    (lambda x: x[:, ::2, :], lambda v: v[:, ::2, :], (8, 36), True),
    (lambda x: x[:, :, :1], lambda v: v[:, :, :1], (2, 4, 12, 1), False),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_reshape_matches_numpy_or_refuses_a_copy(i):
    """Each reshape of a strided HBM view reads numpy's elements, or raises ShapeError when it needs a copy."""
    x = np.arange(8 * 12 * 6, dtype=np.float32).reshape(8, 12, 6)
    np_view, view, shape, copy = CASES[i]
    v = view(NeuronCore("trn2").hbm_tensor(x))
    if copy:
        with pytest.raises(ShapeError, match="without a copy"):
            v.reshape(shape)
    else:
        np.testing.assert_array_equal(v.reshape(shape).array(), np_view(x).reshape(shape))
