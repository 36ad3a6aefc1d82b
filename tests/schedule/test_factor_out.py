"""factor_out: a sum over several axes split by distributivity into two sums, each checked
against numpy on random data through the compiler and the loop-IR interpreter."""
import json

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule, ScheduleError
from tecomp.testing import workloads as W
from tecomp.testing.operator_suite import bilinear_form, matrix_chain
from tecomp.testing.step_schedules import factor_out_chain


def _close(out, ref):
    ref = np.asarray(ref)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("axis", [0, 1])
def test_a_bilinear_form_factored_along_either_axis_is_a_matmul_and_a_dot(axis):
    case = bilinear_form(3, 5, 7)
    s = Schedule(case.dag)
    out = case.dag.outputs[0]
    P = s.factor_out(out, s[out].reduce_axes[axis])
    # the partial sums read two of the three inputs: x @ W (over i) or W @ y^T (over j)
    assert P.shape == ((3, 7) if axis == 1 else (3, 5))
    assert len(s[P].reduce_axes) == 1 and len(s[out].reduce_axes) == 1
    text = str(s.lower())
    assert str(Schedule.from_records(case.dag, json.loads(json.dumps(s.records()))).lower()) \
        == text
    ns = {"tc": tc, "dag": case.dag}
    exec(str(s), ns)   # the printed schedule replays
    assert str(ns["s"].lower()) == text
    x = case.make_inputs(np.random.default_rng(axis))
    k = tc.build(case.dag, schedule=s)
    _close(k(*x), case.reference(x)[0])
    _close(k.emulate(*x), case.reference(x)[0])


def test_a_matrix_chain_drops_the_axis_its_partial_sum_no_longer_reads():
    wl, s = factor_out_chain()
    AB = s.state.stages[3].tensor
    assert AB.shape == (6, 7)   # A @ B: no j axis (6 x 5 x 7 work instead of 6 x 4 x 5 x 7)
    x = wl.make_inputs(np.random.default_rng(0))
    _close(tc.build(wl.dag, schedule=s)(*x), wl.reference(x)[0])
    # along k instead: B @ C first
    wl = matrix_chain(6, 5, 7, 4)
    s = Schedule(wl.dag)
    D = wl.dag.outputs[0]
    BC = s.factor_out(D, s[D].reduce_axes[0])
    assert BC.shape == (5, 4)   # [k, j]: j, read contiguously, stays innermost
    _close(tc.build(wl.dag, schedule=s)(*x), wl.reference(x)[0])


def test_factor_out_twice_splits_a_chain_of_four():
    m = [np.random.default_rng(n).standard_normal(sh).astype(np.float32)
         for n, sh in enumerate([(4, 5), (5, 6), (6, 3), (3, 2)])]
    A, B, C, E = (tc.placeholder(a.shape, "float32", name=n) for a, n in zip(m, "ABCE"))
    k, l, q = (tc.reduce_axis(n, name=nm) for n, nm in ((5, "k"), (6, "l"), (3, "q")))
    D = tc.compute((4, 2), lambda i, j: tc.sum(A[i, k] * B[k, l] * C[l, q] * E[q, j],
                                               axis=[k, l, q]), name="D")
    dag = tc.ComputeDAG([A, B, C, E, D])
    s = Schedule(dag)
    P = s.factor_out(D, s[D].reduce_axes[2])   # sum_q P[i, q] E[q, j], P over (k, l)
    assert P.shape == (4, 3) and len(s[P].reduce_axes) == 2
    P2 = s.factor_out(P, s[P].reduce_axes[1])  # P[i, q] = sum_l P2[i, l] C[l, q]
    assert P2.shape == (4, 6)
    _close(tc.build(dag, schedule=s)(*m), np.linalg.multi_dot([a.astype(np.float64) for a in m]))


def test_factor_out_refuses_what_distributivity_does_not_cover():
    X = tc.placeholder((4, 5), "float32", name="X")
    a, b = tc.reduce_axis(4, name="a"), tc.reduce_axis(5, name="b")
    t = tc.compute((1,), lambda z: tc.sum(X[a, b] * X[a, b], axis=[a, b]), name="sq")
    s = Schedule(tc.ComputeDAG([X, t]))   # every factor reads both axes
    with pytest.raises(ScheduleError, match="nothing to factor out"):
        s.factor_out(t, s[t].reduce_axes[0])
    case = bilinear_form(3, 5, 7)
    out = case.dag.outputs[0]
    s = Schedule(case.dag)
    with pytest.raises(ScheduleError, match="not a root reduction axis"):
        s.factor_out(out, s[out].axes[0])
    i, j = s[out].reduce_axes
    s[out].split(j, factor=2)
    with pytest.raises(ScheduleError, match="untransformed"):
        s.factor_out(out, i)
    wl = W.matmul(4, 5, 6)   # one reduction axis
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    with pytest.raises(ScheduleError, match="sum over several axes"):
        s.factor_out(C, s[C].reduce_axes[0])
    M = tc.compute((1,), lambda z: tc.max(X[a, 0] * X[0, b], axis=[a, b]), name="M")
    s = Schedule(tc.ComputeDAG([X, M]))
    with pytest.raises(ScheduleError, match="not a sum"):
        s.factor_out(M, s[M].reduce_axes[0])
