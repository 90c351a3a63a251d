"""Stochastic rounding: its statistics, its neighbours, its seeds, and the environment that selects it."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.numerics as tn
from trnsim.numerics import modes as rmod

SR_TARGETS = [tn.bfloat16, tn.float16, tn.tfloat32, tn.float8_e4m3, tn.float8_e4m3fn, tn.float8_e5m2,
              tn.float8_e3m4, tn.float4_e2m1fn]


def _grid(t):
    """Every finite non-negative value of t, ascending, float64; tf32 is built from FP32 patterns."""
    if t is tn.tfloat32:
        v = (np.arange(0, 0x7F800000 >> 13, dtype=np.uint32) << 13).view(np.float32)
    else:
        n = 256 if t.itemsize == 1 else 65536
        with np.errstate(invalid="ignore"):
            v = np.arange(n, dtype={1: np.uint8, 2: np.uint16}[t.itemsize]).view(t.np).astype(np.float64)
    v = v.astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v >= 0)])


def _neighbours(x, t):
    """Lower and upper neighbours of |x| on t's grid (the upper one past max is max + one gap)."""
    g = _grid(t)
    g = np.append(g, g[-1] + (g[-1] - g[-2]))
    a = np.abs(x.astype(np.float64))
    i = np.searchsorted(g, a, side="right") - 1
    return g[i], g[i + 1]


def _value(y, t):
    return np.asarray(y).astype(np.float64)


@pytest.mark.parametrize("t, lo", [(tn.bfloat16, 1.0), (tn.bfloat16, 3e-39), (tn.float8_e4m3fn, 2.0),
                                   (tn.float8_e4m3fn, 2.0**-8), (tn.float16, 1e-6), (tn.float4_e2m1fn, 2.0)])
def test_quarter_way_value_rounds_up_a_quarter_of_the_time(t, lo):
    """10^6 copies of a value 1/4 of the way between neighbours round up 25% +- 0.5% (normal and subnormal)."""
    lo_v, hi_v = _neighbours(np.array([lo], np.float32), t)
    v = np.float32(lo_v[0] + 0.25 * (hi_v[0] - lo_v[0]))
    assert float(v) == lo_v[0] + 0.25 * (hi_v[0] - lo_v[0])  # exactly a quarter of the gap
    y = _value(tn.cast(np.full(1_000_000, v), t, "stochastic", rng=3), t)
    assert set(np.unique(y)) <= {lo_v[0], hi_v[0]}
    assert abs((y == hi_v[0]).mean() - 0.25) < 0.005


@pytest.mark.parametrize("t", SR_TARGETS, ids=lambda t: t.name)
def test_sr_picks_a_neighbour_and_is_unbiased(t):
    """On random data SR returns one of the two neighbours, and its mean error is under 1e-3 ulp, while
    RNE's, on data sitting in the lower half of each gap, is about -1/4 ulp."""
    rng = np.random.default_rng(4)
    fi_max = tn.dtype(t).max
    x = (rng.standard_normal(1 << 22) * min(fi_max / 8, 1e4)).astype(np.float32)
    lo, hi = _neighbours(x, t)
    sr = np.abs(_value(tn.cast(x, t, "stochastic", rng=5), t))
    assert np.all((sr == lo) | (sr == hi))
    err = (sr - np.abs(x)) / (hi - lo)
    assert abs(err.mean()) < 1e-3
    low_half = (lo + (hi - lo) * rng.uniform(0, 0.5, x.size)).astype(np.float32)
    lo2, hi2 = _neighbours(low_half, t)
    rne_err = (np.abs(_value(tn.cast(low_half, t, "rne"), t)) - low_half) / (hi2 - lo2)
    sr_err = (np.abs(_value(tn.cast(low_half, t, "stochastic", rng=6), t)) - low_half) / (hi2 - lo2)
    assert rne_err.mean() < -0.2 and abs(sr_err.mean()) < 1e-3


@pytest.mark.parametrize("t", SR_TARGETS, ids=lambda t: t.name)
def test_sr_keeps_exact_values_and_specials(t):
    """Representable values, zeros, infinities and NaNs come through SR as RNE gives them."""
    g = _grid(t)
    exact = np.concatenate([g, -g]).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    x = np.concatenate([exact, special])
    sr, rne = tn.cast(x, t, "stochastic", rng=1), tn.cast(x, t, "rne")
    u = np.uint32 if t is tn.tfloat32 else {1: np.uint8, 2: np.uint16}[t.itemsize]
    assert np.array_equal(sr.view(u), rne.view(u))


def test_sr_past_the_largest_value_overflows_like_rne():
    """Between the largest finite value and the next step SR gives max or the type's overflow value."""
    x = np.full(10_000, np.float32(448 + 16), np.float32)  # halfway from e4m3fn max 448 to 480
    y = tn.cast(x, tn.float8_e4m3fn, "stochastic", rng=2).astype(np.float32)
    assert set(np.unique(y[~np.isnan(y)])) == {448.0} and 0.4 < np.isnan(y).mean() < 0.6
    y = tn.cast(np.full(1000, 6.5, np.float32), tn.float4_e2m1fn, "stochastic", rng=2).astype(np.float32)
    assert set(np.unique(y)) == {6.0}  # fp4 saturates


def test_same_seed_same_bits():
    """A seed (argument, context or environment) gives the same bits every run; another seed differs."""
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    a, b = tn.cast(x, "bfloat16", "stochastic", rng=9), tn.cast(x, "bfloat16", "stochastic", rng=9)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    with tn.rounding("stochastic", seed=9):
        c = tn.cast(x, "bfloat16")
    with tn.rounding("stochastic", seed=10):
        d = tn.cast(x, "bfloat16")
    assert np.array_equal(a.view(np.uint16), c.view(np.uint16))
    assert not np.array_equal(c.view(np.uint16), d.view(np.uint16))


def test_environment_selects_the_mode_and_seed(monkeypatch):
    """NEURON_RT_STOCHASTIC_ROUNDING_EN=1 selects SR, 0 or unset RNE; the SEED variable seeds it (default 0)."""
    x = np.full(10_000, np.float32(1 + 2**-9))
    assert tn.rounding_mode() == "rne"
    assert np.all(tn.cast(x, "bfloat16").astype(np.float32) == 1.0)
    monkeypatch.setenv(rmod.ENV_ENABLE, "0")
    assert tn.rounding_mode() == "rne"
    monkeypatch.setenv(rmod.ENV_ENABLE, "1")
    assert tn.rounding_mode() == "stochastic"
    a = tn.cast(x, "bfloat16")
    assert 0.2 < (a.astype(np.float32) > 1).mean() < 0.3
    rmod.reset_streams()
    assert np.array_equal(tn.cast(x, "bfloat16").view(np.uint16), a.view(np.uint16))  # default seed 0
    assert np.array_equal(tn.cast(x, "bfloat16", rng=0).view(np.uint16), a.view(np.uint16))
    monkeypatch.setenv(rmod.ENV_SEED, "42")
    assert np.array_equal(tn.cast(x, "bfloat16").view(np.uint16), tn.cast(x, "bfloat16", rng=42).view(np.uint16))


def test_context_and_argument_override_the_environment(monkeypatch):
    """A `with rounding(...)` block overrides the environment, and a per-call argument overrides both."""
    monkeypatch.setenv(rmod.ENV_ENABLE, "1")
    x = np.full(1000, np.float32(1 + 2**-9))
    with tn.rounding("rne"):
        assert tn.rounding_mode() == "rne"
        assert np.all(tn.cast(x, "bfloat16").astype(np.float32) == 1.0)
        assert (tn.cast(x, "bfloat16", "stochastic", rng=1).astype(np.float32) > 1).any()
    assert tn.rounding_mode() == "stochastic"
    assert np.all(tn.cast(x, "bfloat16", "rne").astype(np.float32) == 1.0)


def test_bad_environment_values_are_config_errors(monkeypatch):
    """Values the runtime would not accept are errors naming the variable and the value."""
    monkeypatch.setenv(rmod.ENV_ENABLE, "yes")
    with pytest.raises(tn.RoundingEnvError, match="NEURON_RT_STOCHASTIC_ROUNDING_EN must be 0 or 1.*'yes'"):
        tn.rounding_mode()
    monkeypatch.setenv(rmod.ENV_ENABLE, "1")
    monkeypatch.setenv(rmod.ENV_SEED, "-3")
    with pytest.raises(tn.RoundingEnvError, match="NEURON_RT_STOCHASTIC_ROUNDING_SEED .* got -3"):
        tn.cast(np.ones(2, np.float32), "bfloat16")
    with pytest.raises(tn.RoundingModeError, match="got 'nearest'"):
        with tn.rounding("nearest"):
            pass


def bf16_accumulate(increment, steps, lanes, rounding, seed=0):
    """The docs' example: acc <- bf16(fp32(acc) + increment), `steps` times, on `lanes` accumulators."""
    acc = np.zeros(lanes, ml_dtypes.bfloat16)
    rng = np.random.Generator(np.random.SFC64(seed))
    for _ in range(steps):
        acc = tn.cast(acc.astype(np.float32) + np.float32(increment), "bfloat16", rounding, rng=rng)
    return acc.astype(np.float32)


def test_sr_lets_a_bf16_accumulator_track_the_fp32_sum():
    """10,000 increments of 1e-4: RNE stalls once an increment is under half a bf16 step; SR tracks 1.0."""
    fp32_sum = np.float32(0)
    for _ in range(10_000):
        fp32_sum += np.float32(1e-4)
    rne = bf16_accumulate(1e-4, 10_000, 1, "rne")
    sr = bf16_accumulate(1e-4, 10_000, 64, "stochastic")
    assert rne[0] < 0.05 * fp32_sum  # stalled near 0.03
    assert abs(sr.mean() - fp32_sum) < 0.03 * fp32_sum and np.all(np.abs(sr - fp32_sum) < 0.3)


def test_sr_bits_do_not_depend_on_thread_count(monkeypatch):
    """Blocks of random bits are keyed by position, so one thread or several give the same bits."""
    from trnsim.numerics import casts as cast_module
    x = np.random.default_rng(0).standard_normal(3 * cast_module._BLOCK + 5).astype(np.float32)
    runs = []
    for threads in (1, 2):
        monkeypatch.setattr(cast_module, "_THREADS", threads)
        runs.append(tn.cast(x, "float8_e5m2", "stochastic", rng=4).view(np.uint8))
    assert np.array_equal(*runs)
