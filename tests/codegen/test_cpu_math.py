"""The CPU exp (tecomp/codegen/cpu_math.py): within 2 ulp of the correctly rounded float32 exp over
the whole float range, IEEE special values, the same bits vectorized and scalar, and no libm call
left in a vectorized loop."""
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


def test_vectorized_exp_and_sigmoid_call_no_libm():
    for fn in (tc.exp, tc.sigmoid):
        src = _kernel(fn, 64, True).source()
        assert "llvm.exp" not in src and "expf" not in src


def test_sigmoid_matches_numpy():
    x = np.random.default_rng(3).uniform(-30, 30, 4099).astype("float32")
    got = _kernel(tc.sigmoid, x.size, True)(x)
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)
