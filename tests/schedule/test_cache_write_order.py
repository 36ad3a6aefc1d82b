"""cache_write after the stage's loops were split (TVM's order, as the API contract's example
writes it): the cache step goes before the stage's steps, which carry over to its copy stage by
loop name; a step on a reduction loop cannot carry over and raises a clear ScheduleError."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule, ScheduleError


def _matmul_relu(M=64, N=48, K=32):
    A = tc.placeholder((M, K), name="A")
    B = tc.placeholder((K, N), name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = tc.compute((M, N), lambda i, j: tc.maximum(C[i, j], 0.0), name="D")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype("f4"), rng.standard_normal((K, N)).astype("f4")
    return C, D, tc.ComputeDAG([A, B, D]), (a, b), np.maximum(a @ b, 0)


def _check(dag, s, args, want):
    k = tc.build(dag, "llvm", schedule=s)
    np.testing.assert_allclose(k(*args), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k.emulate(*args), want, rtol=1e-4, atol=1e-4)
    again = Schedule.from_records(dag, s.records())  # the moved steps are a plain step list
    assert str(again) == str(s)


def test_the_contract_example_order():
    C, D, dag, args, want = _matmul_relu()
    s = tc.Schedule(dag)
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=32)
    CC = s.cache_write(C, "local")
    s[CC].compute_at(s[C], io)
    s[C].vectorize(ii)
    s[C].parallel(io)
    assert str(s).splitlines()[1] == "s.cache_write('C', 'local')"
    _check(dag, s, args, want)


def test_splits_reorder_annotations_and_other_stages_carry_over():
    C, D, dag, args, want = _matmul_relu()
    s = tc.Schedule(dag)
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=16)
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(io, jo, ii, ji)
    s[C].unroll(ii)
    do, di = s[D].split(s[D].axes[0], factor=16)
    s[C].compute_at(s[D], do)
    CC = s.cache_write(C, "local")
    s[CC].compute_at(s[C], jo)
    s[D].parallel(do)
    _check(dag, s, args, want)


def test_a_transformed_reduction_loop_cannot_carry_over():
    C, D, dag, args, want = _matmul_relu()
    s = tc.Schedule(dag)
    (k,) = s[C].reduce_axes
    s[C].split(k, factor=8)
    before = str(s)
    with pytest.raises(ScheduleError, match="reduction loop 'k'.*|'k' is a reduction loop"):
        s.cache_write(C, "local")
    assert str(s) == before  # the schedule is as it was


def test_a_stage_moved_by_a_later_cache_stage_is_found_by_its_steps():
    """A step on ``u2``, then a cache_write of the earlier ``u0`` (which moves ``u2`` on by one
    stage), then a cache_write of ``u2``: its cache step goes before the step that named ``u2``
    at its index then (a property test's case: this raised StopIteration)."""
    x0 = tc.placeholder((6,), name="x0")
    u0 = tc.compute((6,), lambda i: tc.tanh(x0[i]), name="u0")
    u1 = tc.compute((6,), lambda i: tc.tanh(u0[i]) * 2.0, name="u1")
    u2 = tc.compute((6,), lambda i: tc.tanh(u1[i]), name="u2")
    dag = tc.ComputeDAG([x0, u2])
    s = Schedule(dag)
    s[u2].split(s[u2].axes[0], factor=4)
    s.cache_write(u0, "local")
    s.cache_write(u2, "local")
    assert [st.name for st in s.state.stages] == ["x0", "u0.local", "u0", "u1", "u2.local", "u2"]
    assert len(s[u2].axes) == 2  # the split carried over to the copy stage
    x = np.random.default_rng(1).standard_normal(6).astype("f4")
    _check(dag, s, (x,), np.tanh(np.tanh(np.tanh(x)) * 2.0))
