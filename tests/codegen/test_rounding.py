"""tc.floor / tc.ceil / tc.round: exact against numpy on halves, negatives, huge values,
infinities and NaN, vectorized and scalar, in float32, float64 and float16, on the interpreter,
and as one PTX rounding instruction each; on integers they are the identity."""
import numpy as np
import pytest

import tecomp as tc

FUNCS = [(tc.floor, np.floor, "rmi"), (tc.ceil, np.ceil, "rpi"), (tc.round, np.round, "rni")]


def _dag(fn, n, dtype):
    X = tc.placeholder((n,), dtype, name="X")
    Y = tc.compute((n,), lambda i: fn(X[i]), name="Y")
    return tc.ComputeDAG([X, Y]), Y


def _inputs(dtype):
    rng = np.random.default_rng(3)
    edges = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, 0.0, 2.0 ** 23 + 1, -2.0 ** 24,
             1e30, -1e30, np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        return np.concatenate([rng.standard_normal(301) * 7, edges]).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("vector", [True, False])
@pytest.mark.parametrize("fn, ref, _ptx", FUNCS, ids=["floor", "ceil", "round"])
def test_rounding_matches_numpy(fn, ref, _ptx, vector, dtype):
    x = _inputs(dtype)
    dag, Y = _dag(fn, x.size, dtype)
    s = tc.Schedule(dag)
    if vector:
        _, ii = s[Y].split(s[Y].axes[0], factor=16)
        s[Y].vectorize(ii)
    k = tc.build(dag, schedule=s)
    want = ref(x)
    np.testing.assert_array_equal(k(x), want)
    np.testing.assert_array_equal(k.emulate(x), want)


@pytest.mark.parametrize("fn, ref, ptx", FUNCS, ids=["floor", "ceil", "round"])
def test_rounding_is_one_ptx_instruction(fn, ref, ptx):
    dag, _ = _dag(fn, 64, "float32")
    assert f"cvt.{ptx}.f32.f32" in tc.build(dag, "cuda").source()


@pytest.mark.parametrize("fn", [tc.floor, tc.ceil, tc.round])
def test_rounding_an_integer_is_the_identity(fn):
    X = tc.placeholder((9,), "int32", name="X")
    assert fn(X[0]) is not None and fn(X[0]).dtype == X.dtype
    Y = tc.compute((9,), lambda i: fn(X[i]) * 3, name="Y")
    x = np.arange(-4, 5, dtype=np.int32)
    np.testing.assert_array_equal(tc.build(tc.ComputeDAG([X, Y]))(x), x * 3)


def test_rounding_a_bool_is_an_error():
    X = tc.placeholder((3,), "bool", name="X")
    with pytest.raises(TypeError, match="bool"):
        tc.floor(X[0])
