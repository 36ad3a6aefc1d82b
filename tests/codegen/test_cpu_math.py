"""The CPU exp, log and tanh (tecomp/codegen/cpu_math.py): within 2 ulp of the correctly rounded
float32 result over the whole float range, IEEE special values, the same bits vectorized and
scalar, and no libm call left in a vectorized loop."""
import numpy as np
import pytest

import tecomp as tc


def _kernel(fn, n, vector):
    X = tc.placeholder((n,), "float32", name="X")
    Y = tc.compute((n,), lambda i: fn(X[i]), name="Y")
    dag = tc.ComputeDAG([X, Y])
    s = tc.Schedule(dag)
    if vector:
        _, ii = s[Y].split(s[Y].axes[0], factor=16)
        s[Y].vectorize(ii)
    return tc.build(dag, schedule=s)


def _inputs():
    rng = np.random.default_rng(7)
    wide = rng.uniform(-110, 95, 20000)
    near = rng.uniform(-1, 1, 5000) * rng.choice([1e-8, 1e-3, 1.0], 5000)
    edges = [0.0, -0.0, 1.0, -1.0, 88.72, 88.73, -87.33, -103.9, -104.5, 89.5, -200.0, 300.0,
             np.inf, -np.inf, np.nan]
    return np.concatenate([wide, near, edges]).astype("float32")


def _ulps(got, want):
    """Distance in float32 units in the last place (normal results) or in the smallest subnormal
    (tiny results)."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / np.maximum(spacing, np.float64(2.0 ** -149))


@pytest.mark.parametrize("vector", [True, False])
def test_exp_is_within_two_ulp_and_keeps_special_values(vector):
    x = _inputs()
    got = _kernel(tc.exp, x.size, vector)(x)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    fin = np.isfinite(want) & (want < np.finfo(np.float32).max)
    assert float(np.max(_ulps(got[fin], want[fin]))) <= 2.0
    assert np.all(np.isposinf(got[~fin & ~np.isnan(x)]))
    assert np.isnan(got[np.isnan(x)]).all()
    assert got[x == -np.inf][0] == 0.0 and got[x == 0][0] == 1.0


def test_vector_and_scalar_exp_give_the_same_bits():
    x = _inputs()
    a = _kernel(tc.exp, x.size, True)(x)
    b = _kernel(tc.exp, x.size, False)(x)
    np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))


def test_vectorized_math_calls_no_libm():
    for fn, names in ((tc.exp, ("llvm.exp", "expf")), (tc.sigmoid, ("llvm.exp", "expf")),
                      (tc.log, ("llvm.log", "logf")), (tc.tanh, ("llvm.tanh", "tanhf"))):
        src = _kernel(fn, 64, True).source()
        assert not any(n in src for n in names), fn


def _log_inputs():
    rng = np.random.default_rng(11)
    edges = [2.0 ** -149, 1e-40, 1.1754942e-38, 1.1754944e-38, 0.70710677, 0.7071067, 1.0, 2.0,
             1.4142135, 3.4e38, np.inf, 0.0, -0.0, -1.0, -np.inf, np.nan, -1e-40]
    return np.concatenate([np.exp(rng.uniform(-103, 88.7, 20000)), rng.uniform(0, 2, 5000),
                           edges]).astype("float32")


@pytest.mark.parametrize("vector", [True, False])
def test_log_is_within_two_ulp_and_keeps_special_values(vector):
    x = _log_inputs()
    got = _kernel(tc.log, x.size, vector)(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log(x.astype(np.float64))
    fin = np.isfinite(want)
    assert float(np.max(_ulps(got[fin], want[fin]))) <= 2.0
    assert np.isposinf(got[x == np.inf]).all() and np.isneginf(got[x == 0]).all()
    assert np.isnan(got[np.isnan(x) | (x < 0)]).all()


@pytest.mark.parametrize("vector", [True, False])
def test_tanh_is_within_two_ulp_and_keeps_special_values(vector):
    rng = np.random.default_rng(5)
    edges = [0.0, -0.0, 0.625, -0.625, 0.62499, 9.0, 44.0, 50.0, -100.0, 1e-40, -1e-40,
             np.inf, -np.inf, np.nan]
    x = np.concatenate([rng.uniform(-12, 12, 20000),
                        rng.uniform(-1, 1, 5000) * rng.choice([1e-8, 1e-3, 1.0], 5000),
                        edges]).astype("float32")
    got = _kernel(tc.tanh, x.size, vector)(x)
    want = np.tanh(x.astype(np.float64))
    ok = ~np.isnan(x)
    assert float(np.max(_ulps(got[ok], want[ok]))) <= 2.0
    assert np.isnan(got[~ok]).all()
    assert np.signbit(got[(x == 0) & np.signbit(x)]).all()
    assert got[x == np.inf][0] == 1.0 and got[x == -np.inf][0] == -1.0


@pytest.mark.parametrize("fn", [tc.log, tc.tanh])
def test_vector_and_scalar_log_tanh_give_the_same_bits(fn):
    x = np.abs(_inputs()) if fn is tc.log else _inputs()
    a = _kernel(fn, x.size, True)(x)
    b = _kernel(fn, x.size, False)(x)
    np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))


def test_sigmoid_matches_numpy():
    x = np.random.default_rng(3).uniform(-30, 30, 4099).astype("float32")
    got = _kernel(tc.sigmoid, x.size, True)(x)
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)
