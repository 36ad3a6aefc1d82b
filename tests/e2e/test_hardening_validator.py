"""Issue 16, items 1 and 3: no index data makes a compiled kernel read outside its buffers.

The validator models the kernel's integer arithmetic (each node wraps in its own type), bounds
index data computed by intermediate stages, and accepts a gather its ``if_then_else`` guards.
"""
import numpy as np
import pytest

import tecomp as tc
from tecomp.testing.gather_fuzz import fuzz_gathers

X16 = (np.arange(16, dtype=np.float32) + 1) * 0.5


@pytest.fixture(scope="module")
def times3():
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((2,), "int32", "idx")
    Y = tc.compute((2,), lambda i: X[tc.minimum(idx[i] * 3, 15)], name="Y")
    return tc.build(tc.ComputeDAG([X, idx, Y]))


@pytest.mark.parametrize("value, low", [(1431655765, -1), (2**30, -2**30)])
def test_int32_overflow_is_an_error_not_a_wild_read(times3, value, low):
    # 1431655765 * 3 wraps to -1 in int32 (read X[-1]); 2**30 * 3 to -2**30 (segfault)
    data = np.array([1, value], np.int32)
    for run in (times3, times3.emulate):
        with pytest.raises(ValueError, match=rf"indices in \[{low}, 3\].*wraps.*'idx'"):
            run(X16, data)


def test_overflowing_data_in_range_after_wrapping_is_accepted(times3):
    # min(idx * 3, 15) in int32 wraps 1431655766 * 3 to 2: a valid read, as in the native code
    data = np.array([5, 1431655766], np.int32)
    want = X16[[15, 2]]
    np.testing.assert_array_equal(times3(X16, data), want)
    np.testing.assert_array_equal(times3.emulate(X16, data), want)


def test_index_data_computed_by_an_intermediate_stage():
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((4,), "int32", "idx")
    r = tc.reduce_axis(4, "r")
    twice = tc.compute((4,), lambda i: idx[i] * 2, name="twice")
    total = tc.compute((1,), lambda i: tc.sum(idx[r], axis=r), name="total")
    Y = tc.compute((4,), lambda i: X[twice[i]] + X[total[0]], name="Y")
    k = tc.build(tc.ComputeDAG([X, idx, Y]))
    good = np.array([1, 2, 3, 4], np.int32)
    want = X16[good * 2] + X16[good.sum()]
    np.testing.assert_allclose(k(X16, good), want)
    np.testing.assert_allclose(k.emulate(X16, good), want)
    for bad in ([1, 2, 3, 8], [7, 7, 1, 1]):  # twice[3] = 16; total = 16
        with pytest.raises(ValueError, match="index data out of range.*'idx'"):
            k(X16, np.array(bad, np.int32))


def test_a_guarded_gather_accepts_every_index_it_does_not_read():
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((4,), "int32", "idx")
    G = tc.compute((4,), lambda i: tc.if_then_else((idx[i] >= 0) & (idx[i] < 16), X[idx[i]], -1.0),
                   name="G")
    U = tc.compute((4,), lambda i: tc.if_then_else(idx[i] >= 0, X[idx[i]], -1.0), name="U")
    k = tc.build(tc.ComputeDAG([X, idx, G]))
    d = np.array([-5, 3, 2**31 - 1, 15], np.int32)
    want = np.array([-1, X16[3], -1, X16[15]], np.float32)
    np.testing.assert_array_equal(k(X16, d), want)
    np.testing.assert_array_equal(k.emulate(X16, d), want)
    ku = tc.build(tc.ComputeDAG([X, idx, U]))  # guards only the low side: 2**31-1 is read
    with pytest.raises(ValueError, match="read X"):
        ku(X16, d)


def test_fuzz_validator_against_reference_fast():
    stats = fuzz_gathers(seconds=60, seed=3, datasets=16, max_expressions=40)
    assert stats.expressions >= 20 and stats.in_range and stats.rejected
    assert not stats.failures, stats.failures[:3]


@pytest.mark.slow
def test_fuzz_validator_against_reference_ten_minutes():
    stats = fuzz_gathers(seconds=600, seed=11)
    print(f"fuzz: {stats.expressions} expressions, {stats.cases} cases, {stats.in_range} in range, "
          f"{stats.rejected} rejected, {stats.guarded} guarded")
    assert not stats.failures, stats.failures[:3]


def test_validation_without_the_float_inputs_of_a_device_call():
    # a cuda call on device arrays copies only the integer inputs to the host to check them;
    # a guard that reads float data then falls back to the (conservative) interval verdict
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((4,), "int32", "idx")
    G = tc.compute((4,), lambda i: tc.if_then_else(X[i] > 0, X[tc.minimum(idx[i] * 3, 15)], 0.0),
                   name="G")
    v = tc.build(tc.ComputeDAG([X, idx, G]))._validator
    v.check([None, np.array([1, 2, 3, 4], np.int32)])
    with pytest.raises(ValueError, match="read X"):
        v.check([None, np.array([1, 2, 3, 1431655765], np.int32)])


@pytest.mark.cuda
def test_device_arrays_index_data_is_validated_before_the_launch():
    from tecomp.codegen.cuda_runtime import DeviceArray
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((2,), "int32", "idx")
    Y = tc.compute((2,), lambda i: X[tc.minimum(idx[i] * 3, 15)], name="Y")
    k = tc.build(tc.ComputeDAG([X, idx, Y]), target="cuda")
    x = DeviceArray.from_numpy(X16)
    good = DeviceArray.from_numpy(np.array([1, 5], np.int32))
    np.testing.assert_array_equal(k(x, good).to_numpy(), X16[[3, 15]])
    with pytest.raises(ValueError, match=r"indices in \[-1073741824, 3\]"):
        k(x, DeviceArray.from_numpy(np.array([1, 2**30], np.int32)))


def test_a_prepared_call_validates_index_data_on_every_call():
    """Kernel.prepared_call checks shapes once, but index data may change between its calls."""
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((2,), "int32", "idx")
    Y = tc.compute((2,), lambda i: X[idx[i]], name="Y")
    k = tc.build(tc.ComputeDAG([X, idx, Y]))
    data, out = np.array([3, 4], np.int32), np.zeros(2, np.float32)
    call = k.prepared_call([X16, data], out)
    call()
    np.testing.assert_array_equal(out, X16[[3, 4]])
    data[1] = 9
    call()
    np.testing.assert_array_equal(out, X16[[3, 9]])
    data[0] = 16
    with pytest.raises(ValueError, match="idx"):
        call()
    with pytest.raises(ValueError, match="shape"):
        k.prepared_call([X16, np.zeros(3, np.int32)], out)


def test_a_prepared_call_that_keeps_no_array_still_validates_and_refuses_freed_ones():
    """``keep=False``: the callable holds index data weakly; it validates it on every call and
    refuses to run once an array of the call was freed (never a dangling address)."""
    import gc
    X = tc.placeholder((16,), "float32", "X")
    idx = tc.placeholder((2,), "int32", "idx")
    Y = tc.compute((2,), lambda i: X[idx[i]], name="Y")
    k = tc.build(tc.ComputeDAG([X, idx, Y]))
    x, data, out = X16.copy(), np.array([3, 4], np.int32), np.zeros(2, np.float32)
    call = k.prepared_call([x, data], out, keep=False)
    call()
    np.testing.assert_array_equal(out, X16[[3, 4]])
    data[0] = 16
    with pytest.raises(ValueError, match="idx"):
        call()
    del data
    gc.collect()
    with pytest.raises(RuntimeError, match="freed"):
        call()


def test_a_prepared_call_outlives_its_kernel():
    """The callable keeps the machine code alive: a kernel built uncached (or evicted) and
    dropped by its caller, with weights bound at build time, still runs through it (it used to
    call freed code: a segfault)."""
    import gc
    X = tc.placeholder((64, 32), "float32", "X")
    W = tc.placeholder((32, 16), "float32", "W")
    dag = tc.ComputeDAG([X, W, tc.ops.matmul(X, W)])
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    out = np.zeros((64, 16), np.float32)
    calls = [tc.build(dag, cache=False).prepared_call([x, w], out),
             tc.build(dag, cache=False, constants={"W": w}).prepared_call([x], out)]
    for _ in range(3):
        gc.collect()
    for call in calls:
        out[:] = 0
        for _ in range(3):
            call()
        np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)
