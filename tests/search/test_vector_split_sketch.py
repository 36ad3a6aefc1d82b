"""Sketch rules and annotation for multi-stage reductions (softmax): long untiled rows get a vector
split, and no candidate recomputes a row reduction per column (compute location or parallel
fusion); every candidate matches numpy."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.schedule.state import ComputeLocation
from tecomp.search import analysis as an
from tecomp.search import annotate, sketch
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import HardwareParams, SearchTask
from tecomp.testing.operator_suite import softmax

HW = HardwareParams(num_cores=2)


def test_the_sketch_rules_limit_is_the_annotators():
    assert sketch.MAX_VECTOR == annotate.MAX_VECTOR


def test_long_rows_of_softmax_get_a_vector_split():
    case = softmax(8, 300)  # rows of 300 > the 64 points annotation vectorizes whole
    sks = generate_sketches(SearchTask(case.dag, hardware=HW))
    assert sks and all(s.name.startswith("vsplit") for s in sks)  # the output: always split
    # the intermediate exp stage: split and unsplit (inline / computed at) alternatives
    assert any(s.name.count("vsplit") == 2 for s in sks)
    assert any(s.name.count("vsplit") == 1 for s in sks)
    small = softmax(8, 48)
    assert not any("vsplit" in s.name for s in generate_sketches(SearchTask(small.dag,
                                                                            hardware=HW)))


def _reduction_recomputed(state) -> bool:
    """Whether a reduction stage computed at a loop of its reader runs more often than it has
    outputs (the reader's loops down to the attach point count more iterations), as it would at
    a column loop, or at a row loop fused with a column loop for the parallel loop."""
    for sid, st in enumerate(state.stages):
        if st.is_placeholder or not st.op.reduce_axes or st.location is not ComputeLocation.AT:
            continue
        cid, k = st.attach
        runs = int(np.prod([it.const_extent for it in state.stages[cid].iters[:k + 1]]))
        if runs > an.spatial_size(state, sid):
            return True
    return False


def test_recomputed_at_sees_a_row_reduction_inside_the_column_loop():
    case = softmax(4, 100)
    s = Schedule(case.dag)
    st = s.state
    names = [x.name for x in st.stages]
    rowsum, out = names.index("rowsum"), names.index("softmax")
    assert not an.recomputed_at(st, rowsum, out, 0)   # at the row loop: once per row
    assert an.recomputed_at(st, rowsum, out, 1)       # at the column loop: once per element


def test_softmax_candidates_never_recompute_a_row_reduction_and_match_numpy():
    case = softmax(6, 100)  # rows past the 64 points vectorized whole: the sketches of longer ones
    task, sks, rng, x, ref = case.search_setup(11, hardware=HW)
    built = 0
    for _ in range(3):
        for n, sk in enumerate(sks):
            c = materialize(task, n, sk, {}, rng)
            if c is None:
                continue
            assert not _reduction_recomputed(c.state)
            out = tc.build(case.dag, schedule=Schedule(case.dag, c.steps))(*x)
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)
            built += 1
    assert 2 * built >= 3 * len(sks)


def test_an_elementwise_output_of_a_placeholder_gets_the_split():
    """A long row read straight from an input (a placeholder of the same shape precedes it: the
    rule must not ask a placeholder for its body); every candidate matches numpy."""
    x = tc.placeholder((4, 1280), name="x")
    y = tc.compute((4, 1280), lambda i, j: tc.maximum(x[i, j], 0.0), name="relu")
    task = SearchTask(tc.ComputeDAG([x, y]), hardware=HW)
    sks = generate_sketches(task)
    assert sks and all(s.name.startswith("vsplit") for s in sks)
    a = np.random.default_rng(0).standard_normal((4, 1280)).astype(np.float32)
    rng = np.random.default_rng(1)
    for sid, sk in enumerate(sks):
        cand = materialize(task, sid, sk, {}, rng)
        k = tc.build(task.dag, "llvm", schedule=Schedule(task.dag, cand.steps))
        np.testing.assert_allclose(k(a), np.maximum(a, 0))


@pytest.mark.parametrize("n", [1024, 1000])
def test_a_long_row_computed_at_its_reader_is_split_and_vectorized_or_not_by_decision(n):
    """softmax's exp computed at the output's row loop (the sketch's vector split keeps a stage
    at root, so there it is unsplit): ``vec`` 1 splits its row, whole vectors inner (a row of
    1000 in 16 lanes, its last piece masked), and vectorizes those; 0 leaves the row whole.
    Both replay and match numpy."""
    from tecomp.schedule.state import Annotation
    from tecomp.search.decisions import Decisions, MutationKind
    case = softmax(4, n)
    task, sks, rng, x, ref = case.search_setup(3, hardware=HW)
    seen = set()
    for sid, sk in enumerate(sks):
        for vec in (0, 1):
            for _ in range(12):
                c = materialize(task, sid, sk,
                                Decisions.from_tables({MutationKind.VEC: {"exp": vec}}), rng)
                if c is None:
                    continue
                e = next(s for s in c.state.stages if s.name == "exp")
                if e.location is not ComputeLocation.AT:  # (the sketch splits root stages only)
                    continue
                lanes = [it for it in e.iters if it.annotation is Annotation.VECTORIZE]
                if vec:  # (the row, or a region an rfactored sum's tail widened)
                    row = e.iters[-1].const_extent * e.iters[-2].const_extent
                    assert lanes == [e.iters[-1]] and e.iters[-1].name == "j.1"
                    assert lanes[0].const_extent in (16, 32, 64) and row >= n
                    if n == 1024:
                        assert lanes[0].const_extent == 64 or row != 1024
                else:
                    assert not lanes and e.iters[-1].name == "j"
                out = tc.build(case.dag, schedule=Schedule(case.dag, c.steps))(*x)
                np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)
                seen.add(vec)
                break
    assert seen == {0, 1}


def test_a_transposing_pack_keeps_its_source_rows_whole():
    """A.B^T packs ``B[j, k]`` into ``[j/lanes][k][lanes]`` with ``k`` innermost, reading B's
    rows whole; that row is longer than a vector but crosses the rows of what it writes, so it is
    neither split nor vectorized (split, LLVM stored its lanes with scatters: 12x slower).
    Every such candidate still matches numpy."""
    from tecomp.schedule.state import Annotation
    m, n, k = 32, 64, 256
    A, B = tc.placeholder((m, k), name="A"), tc.placeholder((n, k), name="B")
    r = tc.reduce_axis(k, name="r")
    C = tc.compute((m, n), lambda i, j: tc.sum(A[i, r] * B[j, r], axis=r), name="C")
    dag = tc.ComputeDAG([A, B, C])
    task = SearchTask(dag, hardware=HW)
    sks = generate_sketches(task)
    rng = np.random.default_rng(0)
    x = [rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (n, k)).astype("float32")]
    packs = 0
    for _ in range(60):
        sid = int(rng.integers(len(sks)))
        c = materialize(task, sid, sks[sid], None, rng)
        if c is None:
            continue
        for s_id, st in enumerate(c.state.stages):
            if st.name.startswith("B.") and an.writes_across_rows(c.state, s_id):
                packs += 1
                assert st.iters[-1].const_extent % k == 0  # whole source rows (maybe fused)
                assert all(it.annotation is not Annotation.VECTORIZE for it in st.iters)
                if packs <= 3:
                    out = tc.build(dag, schedule=Schedule(dag, c.steps))(*x)
                    np.testing.assert_allclose(out, x[0] @ x[1].T, rtol=1e-4, atol=1e-5)
    assert packs >= 3


def test_a_row_crosses_the_written_rows_only_where_it_moves_no_last_dimension():
    """``writes_across_rows``: a transposing copy's source row does; the copy in its own order, or
    with its two trailing loops fused into one contiguous run, does not."""
    X = tc.placeholder((64, 96), name="X")
    T = tc.compute((96, 64), lambda a, b: X[b, a], name="T")
    Y = tc.compute((96, 64), lambda a, b: T[a, b] * 2.0, name="Y")
    dag = tc.ComputeDAG([X, T, Y])
    s = Schedule(dag)
    assert not an.writes_across_rows(s.state, s[T].index)
    a, b = s[T].axes
    s[T].reorder(b, a)  # reads X's rows whole, writes a column of T
    assert an.writes_across_rows(s.state, s[T].index)
    s2 = Schedule(dag)
    s2[Y].fuse(*s2[Y].axes)
    assert not an.writes_across_rows(s2.state, s2[Y].index)
