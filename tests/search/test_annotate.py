"""Random annotation and mutation keep programs valid; tile factors cover the loop extent."""
import math

import numpy as np
import pytest

import tecomp as tc
from tecomp.search.annotate import factorizations
from tecomp.search.evolution import _mutate_tile, mutate
from tecomp.search.sketch_rule import TileHole
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W


def test_factorizations_are_exact_and_bounded():
    for ext, parts in [(1024, 4), (56, 4), (97, 2), (1, 3)]:
        fs = factorizations(ext, parts)
        assert fs and len(set(fs)) == len(fs)
        for f in fs:
            assert ext % math.prod(f) == 0 and f[-1] <= 64 and len(f) == parts - 1


def test_tile_mutation_keeps_the_product_equal_to_the_extent():
    rng = np.random.default_rng(0)
    hole = TileHole(0, 1024, 4)
    v = [4, 8, 16]
    for _ in range(500):
        w = _mutate_tile(rng, v, hole)
        assert len(w) == 3 and w[-1] <= 64
        if 1024 % math.prod(w) == 0:
            v = w
        else:  # a re-sampled non-divisible tiling: the loops still cover the extent
            assert math.prod(w) <= 1024


def _loops_cover_extents(cand, task):
    for s in cand.state.stages:
        if s.is_placeholder or s.region is not None:
            continue
        nest = s.nest()
        total = math.prod(it.const_extent for it in nest.iters if it.const_extent is not None)
        full = math.prod(a.const_extent for a in s.root_axes if a.const_extent is not None)
        assert total >= full


@pytest.mark.parametrize("wl", [W.matmul(48, 40, 36), W.conv2d(1, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1,
                                                                 "NHWC", "direct"),
                                W.softmax(5, 37)], ids=["matmul", "conv", "softmax"])
def test_every_mutation_is_a_valid_program(wl):
    task = SearchTask(wl.dag)
    sks = generate_sketches(task)
    rng = np.random.default_rng(1)
    x = wl.make_inputs(rng)
    ref = wl.reference(x)[0]
    cands = [c for c in (materialize(task, i % len(sks), sks[i % len(sks)], {}, rng)
                         for i in range(4)) if c is not None]
    assert cands
    checked = 0
    for c in cands:
        for _ in range(3):
            m = mutate(task, sks, c, rng)
            if m is None:
                continue
            _loops_cover_extents(m, task)
            for idx, h in sks[m.sketch].holes.items():
                if isinstance(h, TileHole):
                    # the levels above the innermost span at most the innermost tiles rounded
                    # up (a register tile of 11 rows over 48: 5 tiles of 11)
                    v = m.decisions.tile[idx]
                    assert math.prod(v) // v[-1] <= -(-h.extent // v[-1])
            k = tc.build(wl.dag, schedule=tc.Schedule(wl.dag, m.steps))
            np.testing.assert_allclose(k(*x), ref, rtol=1e-3, atol=1e-3)
            checked += 1
    assert checked >= 5


def test_materialize_is_deterministic_given_decisions():
    wl = W.matmul(64, 64, 64)
    task = SearchTask(wl.dag)
    sks = generate_sketches(task)
    c = materialize(task, 1, sks[1], {}, np.random.default_rng(3))
    again = materialize(task, 1, sks[1], c.decisions, np.random.default_rng(99))
    assert again.key == c.key and again.decisions == c.decisions


def test_softmax_stages_are_computed_per_output_row_and_stay_correct():
    # exp is read by the row sum and the output: once the row sum is computed at the output's
    # row loop, exp (and the row maximum it reads) can be too, in a row's buffer
    wl = W.softmax(6, 40)
    task = SearchTask(wl.dag)
    sks = generate_sketches(task)
    rng = np.random.default_rng(3)
    x = wl.make_inputs(rng)
    ref = wl.reference(x)[0]
    fused = 0
    for i in range(48):
        c = materialize(task, i % len(sks), sks[i % len(sks)], {}, rng)
        if c is None:
            continue
        st = c.state
        out = next(n for n, s in enumerate(st.stages) if s.tensor is wl.dag.outputs[0])
        at_out = {s.name for s in st.stages if s.location.name == "AT" and s.attach[0] == out}
        if {"softmax_max", "softmax_exp"} <= at_out:
            fused += 1
            k = tc.build(wl.dag, "llvm", schedule=tc.Schedule.from_records(
                wl.dag, st.steps_records()))
            np.testing.assert_allclose(k(*x), ref, rtol=1e-5, atol=1e-6)
    assert fused >= 4


def test_a_stage_cannot_be_computed_at_a_loop_one_of_its_readers_runs_outside():
    from tecomp.schedule.compute_steps import ComputeAtStep
    from tecomp.schedule.state import ScheduleError, State
    wl = W.softmax(6, 40)
    st = State(wl.dag)
    names = [s.name for s in st.stages]
    exp, out = names.index("softmax_exp"), len(names) - 1
    # the row sum still runs at root: exp computed per output row would miss its other rows
    with pytest.raises(ScheduleError, match="outside loop"):
        st.apply(ComputeAtStep(exp, out, 0))
    st.apply(ComputeAtStep(names.index("softmax_sum"), out, 0))
    st.apply(ComputeAtStep(exp, out, 0))
    # moving the row sum back out afterwards leaves exp's region unsound: refused as well
    from tecomp.schedule.compute_steps import ComputeRootStep
    with pytest.raises(ScheduleError, match="outside loop"):
        st.apply(ComputeRootStep(names.index("softmax_sum")))


def test_a_layout_changing_stage_stays_at_root_in_every_candidate():
    """An NCHW -> NHWC copy (the padding of an NCHW Winograd conv) strides across its input; at
    root it runs once, inside the transform's tiles it would run again for every overlapping tile.
    Padding that keeps the layout, and a plain conv's, are not such stages."""
    from tecomp.schedule.state import ComputeLocation, State
    from tecomp.search.analysis import transposing_stages
    from tecomp.testing.random_schedules import sampled_candidates
    X, Wt = tc.placeholder((1, 8, 9, 9), name="X"), tc.placeholder((16, 8, 3, 3), name="W")
    dag = tc.ComputeDAG([X, Wt, tc.ops.conv2d(X, Wt, padding=1, method="winograd")])
    st = State(dag)
    assert sorted(st.stages[i].name for i in transposing_stages(st)) == ["conv2d", "conv2d_pad"]
    plain = tc.ComputeDAG([X, Wt, tc.ops.conv2d(X, Wt, padding=1)])
    assert transposing_stages(State(plain)) == set()
    Xh = tc.placeholder((1, 9, 9, 8), name="X")
    T = tc.compute((1, 8, 9, 9), lambda n, c, h, w: Xh[n, h, w, c] * 2.0, name="T")
    Y = tc.compute((1, 8, 9, 9), lambda n, c, h, w: T[n, c, h, w] + 1.0, name="Y")
    assert [State(tc.ComputeDAG([Xh, Y])).stages[i].name
            for i in transposing_stages(State(tc.ComputeDAG([Xh, Y])))] == ["T"]
    x = np.random.default_rng(0).uniform(-1, 1, (1, 8, 9, 9)).astype("float32")
    w = np.random.default_rng(1).uniform(-1, 1, (16, 8, 3, 3)).astype("float32")
    ref = tc.build(plain)(x, w)
    seen = 0
    for _, cand in sampled_candidates(SearchTask(dag, "llvm"), 12, np.random.default_rng(2)):
        pad = next(s for s in cand.state.stages if s.name == "conv2d_pad")
        assert pad.location is ComputeLocation.ROOT
        seen += 1
    assert seen >= 6
    np.testing.assert_allclose(tc.build(dag, schedule=cand.state)(x, w), ref, rtol=1e-4,
                               atol=1e-4 * np.abs(ref).max())


def test_the_parallel_loop_keeps_a_cached_register_tile_whole():
    """The parallel fusion stops at the loop a cache is computed at: fused past it, the cache's
    region shrank to a slice of the drawn register tile (a transposed conv's 32-channel vector
    built as 1 channel) and the search judged the tile by a program it had not drawn. Every
    cache+fuse candidate builds the vector hole's innermost length that its decision names."""
    from tecomp.testing.operator_suite import conv2d_transpose, matmul
    checked = 0
    # a small image (8x8 out) keeps the builds quick; its 64 channels still draw vectors of 32
    for case in (conv2d_transpose(1, 8, 4, 64, 4, 2, 1), matmul(64, 96, 32)):
        task, sks, rng, x, ref = case.search_setup(3, target="llvm")
        for k, sk in enumerate(sks):
            if "cache" not in sk.name:
                continue
            vec = [i for i, h in sk.holes.items() if isinstance(h, TileHole) and h.vector]
            built = False  # one build per sketch
            for i in range(12):
                c = materialize(task, k, sk, {}, rng)
                if c is None or len(vec) != 1:
                    continue
                local = next(s for s in c.state.stages if s.name.endswith(".local"))
                inner = c.decisions.to_json()["tile"][str(vec[0])][-1]
                assert local.iters[-1].const_extent == min(inner, sk.holes[vec[0]].extent)
                checked += 1
                if not built:
                    built = True
                    kern = tc.build(case.dag, schedule=tc.Schedule(case.dag, c.steps))
                    np.testing.assert_allclose(kern(*x), ref, rtol=1e-4, atol=1e-4)
    assert checked >= 40
