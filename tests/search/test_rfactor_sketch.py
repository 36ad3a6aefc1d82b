"""rfactor over several reduction axes: the step (fused axes, the outermost axis as a parallel
piece) and the sketches of reductions to a scalar (a Frobenius norm), every candidate checked
against numpy on random data."""
import json
import re

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.schedule.state import State
from tecomp.search.reduction_lanes import lane_run, lanes_belong_to_reduction
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import HardwareParams, SearchTask
from tecomp.testing import workloads as W
from tecomp.testing.operator_suite import frobenius_norm, operator_case
from tecomp.testing.random_dags import random_contraction

HW = HardwareParams(num_cores=2)


def _sum_to_scalar(m, n):
    """``sum_{a,b} X[a, b] * 2`` into one value; a short innermost axis (n < 16) is fused."""
    X = tc.placeholder((m, n), "float32", name="X")
    a, b = tc.reduce_axis(m, name="a"), tc.reduce_axis(n, name="b")
    Y = tc.compute((1,), lambda z: tc.sum(X[a, b] * 2.0, axis=[a, b]), name="total")
    return tc.ComputeDAG([X, Y]), lambda x: [np.array([2 * x[0].astype(np.float64).sum()])]


def _close(out, ref):
    ref = np.asarray(ref)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(ref).max())))


def test_rfactor_of_fused_reduction_axes():
    case = operator_case("frobenius", "small")
    s = Schedule(case.dag)
    t = case.dag.compute_stages[0].tensor
    i, j = s[t].reduce_axes
    f = s[t].fuse(i, j)
    fo, fi = s[t].split(f, factor=8)   # 7 * 13 = 91: a guarded tail
    rf = s.rfactor(t, fi)
    assert rf.shape == (1, 8)
    s[rf].vectorize(s[rf].axes[1])
    text = str(s.lower())
    assert str(Schedule.from_records(case.dag, json.loads(json.dumps(s.records()))).lower()) \
        == text
    ns = {"tc": tc, "dag": case.dag}
    exec(str(s), ns)
    assert str(ns["s"].lower()) == text
    x = case.make_inputs(np.random.default_rng(3))
    k = tc.build(case.dag, schedule=s)
    _close(k(*x), case.reference(x)[0])
    _close(k.emulate(*x), case.reference(x)[0])


def test_rfactor_of_an_axis_owned_with_another_fuses_both():
    # the piece of a fused (a, b) loop brings both axes into the partials stage
    dag, ref = _sum_to_scalar(6, 5)
    s = Schedule(dag)
    t = dag.outputs[0]
    a, b = s[t].reduce_axes
    f = s[t].fuse(a, b)
    fo, fi = s[t].split(f, factor=4)
    rf = s.rfactor(t, fo, factor_axis=0)
    assert rf.shape == (8, 1) and len(s[rf].reduce_axes) == 1
    x = [np.random.default_rng(4).uniform(-1, 1, (6, 5)).astype("float32")]
    _close(tc.build(dag, schedule=s)(*x), ref(x)[0])


def test_frobenius_gets_vector_and_parallel_rfactor_sketches_and_many_candidates():
    task = SearchTask(operator_case("frobenius").dag, hardware=HW)
    sks = generate_sketches(task)
    assert [s.name for s in sks] == ["default", "rfactor", "rfactor+par"]
    # the lanes innermost (vectorizable), the rows outside the columns (contiguous reads)
    plain = Schedule(task.dag, sks[1].steps)
    parts = [st for st in plain.state.stages if st.name == "sumsq.rf"]
    assert [it.name for it in parts[0].iters] == ["z", "i", "j.0", "j.1.f"]
    par = Schedule(task.dag, sks[2].steps)
    parts = [st for st in par.state.stages if st.name == "sumsq.rf.rf"]
    assert parts and [it.name for it in parts[0].iters] == ["z", "i.0.f", "i.1", "j.0", "j.1.f"]
    rng = np.random.default_rng(0)
    keys = set()
    for _ in range(60):
        for n, sk in enumerate(sks):
            c = materialize(task, n, sk, {}, rng)
            if c is not None:
                keys.add(c.key)
        if len(keys) >= 32:
            break
    assert len(keys) >= 32  # the search ran out after 4 before (one sketch, no rfactor)


def _every_candidate_correct(dag, ref, make, per_sketch=6, want=("rfactor", "rfactor+par")):
    task = SearchTask(dag, hardware=HW)
    sks = generate_sketches(task)
    names = [s.name for s in sks]
    assert all(any(nm.startswith(w) for nm in names) for w in want), names
    rng = np.random.default_rng(1)
    x = make(rng)
    expect = ref(x)[0]
    built = 0
    for n, sk in enumerate(sks):
        for _ in range(per_sketch):
            c = materialize(task, n, sk, {}, rng)
            if c is None:
                continue
            _close(tc.build(dag, schedule=Schedule(dag, c.steps))(*x), expect)
            built += 1
    assert built >= per_sketch * len(sks) // 2


def test_frobenius_every_candidate_matches_numpy():
    case = frobenius_norm(48, 40)  # 1920 points: the parallel sketch too (>= 512 on 2 cores)
    _every_candidate_correct(case.dag, case.reference, case.make_inputs)


@pytest.mark.parametrize("m,n", [(300, 5), (40, 53)])
def test_sum_to_scalar_every_candidate_matches_numpy(m, n):
    dag, ref = _sum_to_scalar(m, n)
    _every_candidate_correct(dag, ref, lambda rng: [rng.uniform(-1, 1, (m, n)).astype("float32")])


def test_single_long_reduction_every_candidate_matches_numpy():
    # matvec-like: 2x2 outputs, k = 3000 (one axis split in three: parallel, reduce, lanes)
    wl = W.matmul(2, 2, 3000)
    _every_candidate_correct(wl.dag, wl.reference, wl.make_inputs, per_sketch=3,
                             want=("rfactor+tile", "rfactor+par"))


def _vector_extents(sched) -> list:
    """Extents of the vectorized loops of the lowered program of ``sched``."""
    return [int(m) for m in re.findall(r"vectorized for \([^;]*; [^<]*< (\d+);", str(sched.lower()))]


def test_a_tiled_partials_stage_vectorizes_its_lanes():
    """A reduction with a few outputs and a long axis (2 x 2 outputs of k = 4096) is tiled after
    its rfactor: the factored lanes are a fixed run of 64 there, so every candidate's tiling
    splits 64 lanes (behind a hole they were 1 long at sketch time, and never vectorized)."""
    assert [lane_run(e) for e in (4096, 96, 48, 100, 8)] == [64, 32, 16, 16, 8]
    wl = W.matmul(2, 2, 4096)
    task = SearchTask(wl.dag, hardware=HW)
    sks = generate_sketches(task)
    tiled = [n for n, s in enumerate(sks) if s.name.startswith("rfactor+tile")]
    assert tiled
    rng = np.random.default_rng(2)
    x = wl.make_inputs(rng)
    lanes = []
    for _ in range(6):
        c = materialize(task, tiled[0], sks[tiled[0]], {}, rng)
        if c is None:
            continue
        rf = [st for st in c.state.stages if st.name.endswith(".rf")][0]
        assert tuple(rf.tensor.shape) == (2, 2, 64)
        lanes += _vector_extents(Schedule(wl.dag, c.steps))
        _close(tc.build(wl.dag, schedule=Schedule(wl.dag, c.steps))(*x), wl.reference(x)[0])
    assert lanes and max(lanes) >= 16


def test_reductions_whose_lanes_gather_get_rfactor_sketches():
    """``sum_{i,j} x[b, i] W[i, j] y[b, j]`` over 256 outputs: lanes along ``b`` gather from
    ``x`` and ``y`` (Ansor's rule alone: 256 outputs are more than 16 per core). The search
    factors it (tests/search/test_factor_sketch.py) before any rfactor would apply."""
    case = operator_case("bilinear")
    st = State.replay(case.dag, [])
    assert lanes_belong_to_reduction(st, len(st.stages) - 1)
    mv = operator_case("gemv")  # y = A x with A out x in (a linear layer): lanes along i gather
    assert any(s.name.startswith("rfactor") for s in generate_sketches(SearchTask(mv.dag, hardware=HW)))
    mm = operator_case("matmul")  # a matmul's lanes run along B's rows: no rfactor
    st = State.replay(mm.dag, [])
    assert not lanes_belong_to_reduction(st, len(st.stages) - 1)
    assert not any("rfactor" in s.name for s in generate_sketches(SearchTask(mm.dag, hardware=HW)))


def test_rfactor_candidates_of_random_contractions_match_numpy():
    """Random einsum-like reductions, some of which meet the gather rule: every rfactor
    candidate drawn matches numpy."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):   # (the sums the search factors first have fewer rfactor sketches)
        if checked >= 6:
            break
        dag, spec = random_contraction(rng)
        task = SearchTask(dag, hardware=HW)
        sks = generate_sketches(task)
        xs = [rng.uniform(-1, 1, t.shape).astype("float32") for t in dag.inputs]
        ref = np.einsum(spec, *[x.astype(np.float64) for x in xs])
        for k in [k for k, s in enumerate(sks) if "rfactor" in s.name][:2]:
            c = materialize(task, k, sks[k], {}, rng)
            if c is not None:
                _close(tc.build(dag, schedule=Schedule(dag, c.steps), cache=False)(*xs), ref)
                checked += 1
    assert checked >= 6
