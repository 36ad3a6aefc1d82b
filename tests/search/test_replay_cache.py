"""The replay cache and the shared loop nests of state copies: the search's candidates must be
exactly the ones a plain replay gives (same steps, same keys, same lowered programs)."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.lowering.lower import lower_state
from tecomp.schedule import State
from tecomp.schedule.replay_cache import REPLAY_CACHE, ReplayCache
from tecomp.schedule.state import ComputeLocation, ScheduleError
from tecomp.schedule.steps import AnnotationStep, SplitStep
from tecomp.search.evolution import mutate
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.testing import workloads as W


def _task(name):
    if name == "conv":
        return tc.SearchTask(W.conv2d(1, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, "NCHW", "direct").dag)
    return tc.SearchTask(W.matmul_bias_relu(64, 48, 32).dag)


def _reduction(task) -> int:
    return next(k for k, s in enumerate(State(task.dag).stages)
                if not s.is_placeholder and s.op.reduce_axes)


def _candidates(task, n, seed):
    sks = generate_sketches(task)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        i = int(rng.integers(len(sks)))
        c = materialize(task, i, sks[i], {}, rng)
        out.append(c)
        if c is not None and out:
            m = mutate(task, sks, c, rng)
            out.append(m)
    return out


def _fingerprint(cands):
    return [None if c is None else (c.sketch, c.key, str(c.decisions), str(lower_state(c.state)))
            for c in cands]


@pytest.mark.parametrize("name", ["conv", "mbr"])
def test_cached_materialize_is_plain_replay(name):
    task = _task(name)
    REPLAY_CACHE.clear()
    cold = _candidates(task, 12, seed=3)
    warm = _candidates(task, 12, seed=3)  # every step now comes from the cache
    assert REPLAY_CACHE.hits > 0
    assert _fingerprint(cold) == _fingerprint(warm)
    for c in cold:
        if c is not None:
            plain = State.replay(task.dag, c.steps)
            assert plain.key == c.key
            assert str(lower_state(plain)) == str(lower_state(c.state))


def test_cache_keeps_stage_objects_and_replays_failures():
    task = _task("mbr")
    cache = ReplayCache(size=64)
    a = cache.start(task.dag)
    stages, first = a.stages, list(a.stages)
    sid = _reduction(task)
    cache.apply(a, SplitStep(sid, 0, (8,), True))
    b = cache.start(task.dag)
    b_first = list(b.stages)
    cache.apply(b, SplitStep(sid, 0, (8,), True))  # a hit
    assert cache.hits == 1
    assert a.stages is stages and all(x is y for x, y in zip(a.stages, first))
    assert all(x is y for x, y in zip(b.stages, b_first))
    assert [it.name for it in b.stages[sid].iters] == [it.name for it in a.stages[sid].iters]
    assert b.stages[sid] is not a.stages[sid]  # copies: one state's change is not the other's
    cache.apply(b, AnnotationStep(sid, 1, tc.schedule.Annotation.VECTORIZE))
    assert a.stages[sid].iters[1].annotation is tc.schedule.Annotation.NONE
    bad = SplitStep(sid, 99, (2,), True)
    for _ in range(2):  # the second failure comes from the cache
        st = cache.replay(task.dag, [SplitStep(sid, 0, (8,), True)])
        with pytest.raises(ScheduleError):
            cache.apply(st, bad)


def test_state_changed_behind_the_cache_is_not_confused():
    task = _task("mbr")
    cache = ReplayCache(size=64)
    sid = _reduction(task)
    s1, s2 = SplitStep(sid, 0, (8,), True), SplitStep(sid, 1, (4,), True)
    cache.replay(task.dag, [s1, s2])
    st = cache.start(task.dag)
    st.apply(SplitStep(sid, 1, (16,), True), atomic=False)  # not through the cache
    cache.apply(st, s1)
    plain = State.replay(task.dag, [SplitStep(sid, 1, (16,), True), s1])
    assert st.key == plain.key and str(lower_state(st)) == str(lower_state(plain))


def test_copy_shares_nests_but_not_changes():
    task = _task("conv")
    sks = generate_sketches(task)
    c = materialize(task, 0, sks[0], {}, np.random.default_rng(0))
    before = str(lower_state(c.state))
    cp = c.state.copy()
    assert all(x._nest is y._nest for x, y in zip(cp.stages, c.state.stages))
    sid = next(k for k, s in enumerate(cp.stages) if not s.is_placeholder and s.iters
               and s.location is not ComputeLocation.INLINE
               and s.iters[-1].const_extent and s.iters[-1].const_extent > 1)
    cp.apply(SplitStep(sid, len(cp.stages[sid].iters) - 1, (1,), True))
    assert str(lower_state(c.state)) == before
    assert str(lower_state(State.replay(task.dag, c.steps))) == before
