"""Reductions over an outer axis of their input (sketch.LanesAcrossReduction): the last spatial
loop is split, its inner part the vector lanes below every reduction loop; with enough columns
for the cores it is the only sketch, with few the others stay beside it."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.state import State
from tecomp.search.decisions import Decisions
from tecomp.search.sketch import lanes_across_reduction
from tecomp.search.target_search import materialize
from tecomp.testing.operator_suite import OpCase, column_sum, softmax


def _mean_over_channels(B, C, L):
    X = tc.placeholder((B, C, L), "float32", name="X")
    r = tc.reduce_axis(C, name="r")
    S = tc.compute((B, L), lambda b, l: tc.max(X[b, r, l] * 2.0, axis=r), name="S")
    return OpCase("cmax", tc.ComputeDAG([X, S]),
                  lambda rng: [rng.standard_normal((B, C, L)).astype("float32")],
                  lambda x: [2.0 * x[0].astype(np.float64).max(axis=1)])


def test_which_reductions_take_lanes_across():
    st = State(column_sum(64, 32).dag)
    assert lanes_across_reduction(st, len(st.stages) - 1) == "j"
    st = State(softmax(8, 32).dag)   # row reductions: the lanes belong along the reduction
    assert all(lanes_across_reduction(st, k) is None for k in range(len(st.stages)))
    st = State(column_sum(64, 8).dag)   # fewer columns than a vector
    assert lanes_across_reduction(st, len(st.stages) - 1) is None


@pytest.mark.parametrize("case, names", [
    (column_sum(300, 1024), ["rlanes"]),
    (column_sum(4096, 16), ["default", "rfactor", "rfactor", "rlanes"]),  # rfactor(+par)
    (_mean_over_channels(2, 40, 96), ["rlanes"]),
])
def test_sketches(case, names):
    task, sketches, *_ = case.search_setup(0, target="llvm")
    assert sorted(sk.name.split("+")[0] for sk in sketches) == names


@pytest.mark.parametrize("case", [column_sum(37, 100), column_sum(300, 1024),
                                  _mean_over_channels(3, 21, 50)])
def test_sampled_programs_match_numpy(case):
    task, sketches, rng, x, ref = case.search_setup(3, target="llvm")
    k = next(i for i, sk in enumerate(sketches) if sk.name.startswith("rlanes"))
    for _ in range(4):
        cand = materialize(task, k, sketches[k], Decisions(), rng)
        assert cand is not None
        kern = tc.build(case.dag, schedule=cand.state)
        np.testing.assert_allclose(kern(*x), ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(kern.emulate(*x), ref, rtol=1e-4, atol=1e-4)
