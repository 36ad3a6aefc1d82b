"""Bad kernel arguments raise a clear exception before native code runs."""
import numpy as np
import pytest

import tecomp as tc


@pytest.fixture(scope="module")
def add_kernel():
    A = tc.placeholder((4, 5), name="lhs")
    B = tc.placeholder((4, 5), name="rhs")
    C = tc.compute((4, 5), lambda i, j: A[i, j] + B[i, j], name="sum_out")
    return tc.build(tc.ComputeDAG([A, B, C]))


@pytest.fixture(scope="module")
def spmm():
    M, K, N, nnz = 3, 6, 4, 5
    ptr = tc.placeholder((M + 1,), "int32", name="indptr")
    ind = tc.placeholder((nnz,), "int32", name="indices")
    val = tc.placeholder((nnz,), name="data")
    X = tc.placeholder((K, N), name="dense")

    def f(i, j):
        r = tc.reduce_axis((ptr[i], ptr[i + 1]), name="r")
        return tc.sum(val[r] * X[ind[r], j], axis=r)
    Y = tc.compute((M, N), f, name="Y")
    kernel = tc.build(tc.ComputeDAG([ptr, ind, val, X, Y]))
    rng = np.random.default_rng(0)
    good = [np.array([0, 2, 2, 5], np.int32), np.array([0, 5, 1, 2, 3], np.int32),
            rng.uniform(0.5, 1.5, nnz).astype(np.float32),
            rng.standard_normal((K, N)).astype(np.float32)]
    return kernel, good


def _args():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2)]


def test_good_call_and_out(add_kernel):
    a, b = _args()
    np.testing.assert_allclose(add_kernel(a, b), a + b, rtol=1e-6)
    out = np.empty((4, 5), np.float32)
    assert add_kernel(a, b, out=out) is out
    np.testing.assert_allclose(out, a + b, rtol=1e-6)


def test_wrong_argument_count(add_kernel):
    a, _ = _args()
    with pytest.raises(TypeError, match=r"takes 2 input\(s\) \(lhs, rhs\) but 1 were given"):
        add_kernel(a)


def test_wrong_dtype_names_argument(add_kernel):
    a, b = _args()
    with pytest.raises(TypeError, match="input 'rhs' has dtype float64, expected float32"):
        add_kernel(a, b.astype(np.float64))


def test_wrong_shape_names_argument(add_kernel):
    a, b = _args()
    with pytest.raises(ValueError, match=r"input 'lhs' has shape \(5, 4\), expected \(4, 5\)"):
        add_kernel(a.reshape(5, 4), b)


def test_non_contiguous_names_argument(add_kernel):
    a, b = _args()
    big = np.zeros((4, 10), np.float32)
    with pytest.raises(ValueError, match="input 'rhs' is not C-contiguous"):
        add_kernel(a, big[:, ::2])


def test_not_an_array(add_kernel):
    a, b = _args()
    with pytest.raises(TypeError, match="input 'lhs' must be a numpy array"):
        add_kernel(a.tolist(), b)


def test_bad_out(add_kernel):
    a, b = _args()
    with pytest.raises(TypeError, match="output 'sum_out' has dtype"):
        add_kernel(a, b, out=np.empty((4, 5), np.float64))
    with pytest.raises(ValueError, match="overlaps input 'lhs'"):
        add_kernel(a, b, out=a)
    ro = np.empty((4, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        add_kernel(a, b, out=ro)


def test_sparse_good_call(spmm):
    kernel, good = spmm
    ptr, ind, val, X = good
    ref = np.zeros((3, 4), np.float32)
    for i in range(3):
        for r in range(ptr[i], ptr[i + 1]):
            ref[i] += val[r] * X[ind[r]]
    np.testing.assert_allclose(kernel(*good), ref, rtol=1e-5)


@pytest.mark.parametrize("which, bad, match", [
    (1, [0, 6, 1, 2, 3], r"indices.*\[0, 6\].*size 6"),
    (1, [0, -1, 1, 2, 3], r"indices"),
    (0, [0, 2, 2, 6], r"indptr"),
    (0, [-1, 2, 2, 5], r"indptr"),
])
def test_sparse_out_of_range_indices_raise(spmm, which, bad, match):
    kernel, good = spmm
    args = list(good)
    args[which] = np.array(bad, np.int32)
    with pytest.raises(ValueError, match=match):
        kernel(*args)


def test_unsupported_target():
    A = tc.placeholder((4,), name="A")
    B = tc.compute((4,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(ValueError, match="unknown target 'opencl'"):
        tc.build(tc.ComputeDAG([A, B]), target="opencl")


def test_a_repeated_call_on_changed_arrays_is_checked_again(add_kernel):
    # the second call on the same arrays skips the checks (tecomp.call_memo); whatever changed
    # in place since must still be caught
    a, b = _args()
    out = np.empty((4, 5), np.float32)
    for _ in range(2):
        assert add_kernel(a, b, out=out) is out
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    a[...] = 2.0  # new contents: computed anew
    add_kernel(a, b, out=out)
    np.testing.assert_allclose(out, 2.0 + b, rtol=1e-6)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        add_kernel(a, b, out=out)
    out.flags.writeable = True
    add_kernel(a, b, out=out)
    a.shape = (5, 4)  # the same array object, another shape
    with pytest.raises(ValueError, match="has shape"):
        add_kernel(a, b, out=out)
    a.shape = (4, 5)
    with pytest.raises(ValueError, match="overlaps input 'lhs'"):
        add_kernel(a, b, out=a)
    c = np.empty((4, 5, 2), np.float32)[..., 0]  # not contiguous
    with pytest.raises(ValueError, match="not C-contiguous"):
        add_kernel(a, c, out=out)


def test_a_repeated_sparse_call_validates_its_indices_every_time(spmm):
    kernel, good = spmm
    args = [a.copy() for a in good]
    out = np.empty((3, 4), np.float32)
    kernel(*args, out=out)
    kernel(*args, out=out)
    args[1][1] = 6  # rewritten in place between calls: the memo must not skip the index check
    with pytest.raises(ValueError, match="indices"):
        kernel(*args, out=out)


def test_the_call_memo_keeps_no_array_alive(add_kernel):
    # the memo's runner holds addresses, not arrays: dropping the caller's arrays frees them,
    # and arrays made afterwards (maybe at the same addresses) are checked and computed anew
    import gc
    import weakref
    a, b = _args()
    out = np.empty((4, 5), np.float32)
    add_kernel(a, b, out=out)
    add_kernel(a, b, out=out)
    refs = [weakref.ref(x) for x in (a, b, out)]
    del a, b, out
    gc.collect()
    assert all(r() is None for r in refs)
    a, b = _args()
    out = np.full((4, 5), np.nan, np.float32)
    assert add_kernel(a, b, out=out) is out
    np.testing.assert_allclose(out, a + b, rtol=1e-6)


def test_one_array_for_two_inputs_natively_and_emulated(add_kernel):
    a, _ = _args()
    np.testing.assert_array_equal(add_kernel(a, a), a + a)
    np.testing.assert_array_equal(add_kernel.emulate(a, a), a + a)
    np.testing.assert_array_equal(add_kernel.emulate(a, a[:]), a + a)  # a view of it too
