"""Every row of the conformance table (api_forms.py) runs and matches its numpy reference."""
import numpy as np
import pytest

from tests.nki.api_forms import FORMS


@pytest.mark.parametrize("form", FORMS, ids=[f"{f.api}:{f.function}:{f.form}" for f in FORMS])
def test_form(form, trn):
    trn(form.target)
    rng = np.random.default_rng(0)
    args = form.inputs(rng)
    got = np.asarray(form.build()(*args))
    ref = form.reference(*args)
    if got.dtype.kind in "iu" and form.tol == 0:
        np.testing.assert_array_equal(got, np.asarray(ref).astype(got.dtype))
    else:
        np.testing.assert_allclose(got.astype(np.float64), np.broadcast_to(ref, got.shape), rtol=form.tol,
                                   atol=form.tol)
