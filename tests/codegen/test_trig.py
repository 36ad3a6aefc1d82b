"""tc.sin / tc.cos: the float32 arithmetic versions (tecomp/codegen/trig_math.py) within 2 ulp of
numpy over |x| <= 8192, the same bits vectorized and scalar, NaN for NaN and +-inf, sin(-0) = -0;
float64 through libm; float16 through float32; the GPU builds them from the same arithmetic
(float64 there is a clear error), and the interpreter agrees."""
import numpy as np
import pytest

import tecomp as tc

FUNCS = [(tc.sin, np.sin), (tc.cos, np.cos)]


def _kernel(fn, n, dtype="float32", vector=False, target="llvm"):
    X = tc.placeholder((n,), dtype, name="X")
    Y = tc.compute((n,), lambda i: fn(X[i]), name="Y")
    dag = tc.ComputeDAG([X, Y])
    s = tc.Schedule(dag)
    if vector:
        _, ii = s[Y].split(s[Y].axes[0], factor=16)
        s[Y].vectorize(ii)
    return tc.build(dag, target, schedule=s if target == "llvm" else None)


def _inputs():
    rng = np.random.default_rng(5)
    return np.concatenate([rng.uniform(-7, 7, 3000), rng.uniform(-8192, 8192, 3000),
                           rng.uniform(-1e-4, 1e-4, 200), np.arange(-16, 17) * np.pi / 4,
                           [0.0, -0.0, 8192.0]]).astype("float32")


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["sin", "cos"])
def test_float32_is_within_two_ulp_and_vectorizes_to_the_same_bits(fn, ref):
    x = _inputs()
    vec, scalar = _kernel(fn, x.size, vector=True)(x), _kernel(fn, x.size)(x)
    np.testing.assert_array_equal(vec, scalar)
    want = ref(x.astype(np.float64))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(vec - want)
    ulps = err / np.maximum(spacing, 2.0 ** -149)
    # next to a zero of the function (x a float32 near k pi / 2) the result is ~1e-8: there the
    # error is absolute, ~1e-14, a few ulp of that tiny result
    big = np.abs(want) >= 1e-6
    assert ulps[big].max() <= 2.0, ulps[big].max()
    assert (err[~big] <= 1e-12 * np.maximum(1.0, np.abs(x[~big]))).all()


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["sin", "cos"])
def test_special_values(fn, ref):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30], np.float32)
    got = _kernel(fn, 3 * x.size, vector=True)(np.concatenate([x] * 3))[:6]
    assert np.isnan(got[:3]).all() and np.isfinite(got[3:]).all()
    assert np.abs(got[5]) <= 1.0
    if fn is tc.sin:
        assert got[3] == 0 and np.signbit(got[3]) and not np.signbit(got[4])
    else:
        assert got[3] == 1.0 and got[4] == 1.0


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-12), ("float16", 2e-3)])
@pytest.mark.parametrize("fn, ref", FUNCS, ids=["sin", "cos"])
def test_other_float_types(fn, ref, dtype, rtol):
    x = np.random.default_rng(1).uniform(-6, 6, 257).astype(dtype)
    k = _kernel(fn, x.size, dtype)
    np.testing.assert_allclose(k(x), ref(x), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(k.emulate(x), ref(x), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["sin", "cos"])
def test_gpu_builds_the_same_arithmetic_and_rejects_float64(fn, ref):
    x = _inputs()[:512]
    k = _kernel(fn, x.size, target="cuda")
    np.testing.assert_allclose(k.emulate(x), ref(x), rtol=1e-6, atol=1e-6)
    assert "call" not in k.source().split("{", 1)[1]  # no libm call in the kernel body
    with pytest.raises(ValueError, match="float64 value is not supported on the cuda target"):
        _kernel(fn, 64, "float64", target="cuda")
