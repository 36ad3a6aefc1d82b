"""Random legal schedules for property tests.

:func:`random_steps` applies ``n`` random steps to a Schedule; choices come from ``pick(n)`` (an
integer in ``[0, n)``, e.g. drawn by hypothesis) so that failing cases shrink. Steps the state
rejects (ScheduleError) are skipped: the result is always a legal schedule.
:func:`sampled_candidates` draws the search's own candidates of a task, sketch after sketch.
"""
from __future__ import annotations

from ..schedule import Schedule, ScheduleError
from ..schedule.state import Annotation, ComputeLocation

__all__ = ["random_steps", "sampled_candidates", "sampled_records", "check_sampled_candidates"]


def sampled_candidates(task, n: int, rng):
    """``(sketch index, Candidate)`` for up to ``n`` draws of the search's annotator on ``task``'s
    sketches in turn (fresh decisions each), leaving out the draws that are not legal schedules."""
    from ..search.decisions import Decisions
    from ..search.target_search import generate_sketches, materialize
    sketches = generate_sketches(task)
    for i in range(n):
        k = i % len(sketches)
        cand = materialize(task, k, sketches[k], Decisions(), rng)
        if cand is not None:
            yield k, cand


def check_sampled_candidates(wl, n: int = 8, seed: int = 5, unfused=(), rtol: float = 1e-4) -> set:
    """Build ``n`` of the search's candidates of the workload ``wl`` (a
    ``tecomp.testing.workloads.Workload``) and check each natively and on the loop-IR emulator
    against its reference on random data; the stages named in ``unfused`` must stay at root or
    be inlined (never computed inside another stage's tiles). Returns the sketch indices built
    (at least 4 candidates of at least 2 sketches, or AssertionError)."""
    import numpy as np

    from ..build import build
    from ..search.task import SearchTask
    x = wl.make_inputs(np.random.default_rng(1))
    ref = wl.reference(x)[0]
    built, sketches = 0, set()
    for k, cand in sampled_candidates(SearchTask(wl.dag, "llvm"), n, np.random.default_rng(seed)):
        for s in cand.state.stages:
            if s.name in unfused:
                assert s.location in (ComputeLocation.ROOT, ComputeLocation.INLINE), s.name
        kern = build(wl.dag, schedule=cand.state)
        np.testing.assert_allclose(kern(*x), ref, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(kern.emulate(*x), ref, rtol=rtol, atol=rtol)
        built += 1
        sketches.add(k)
    assert built >= 4 and len(sketches) >= 2, (built, sketches)
    return sketches


def sampled_records(task, costs, rng, draws: int = 100) -> list:
    """Records of distinct schedules of ``task`` the annotator draws (random sketches), one per
    cost in ``costs``, each with that made-up search cost: a tuning log for tests that rank
    records without timing any."""
    from ..schedule.records import MeasureResult, Record
    from ..search.decisions import Decisions
    from ..search.target_search import generate_sketches, materialize
    sketches, seen, out = generate_sketches(task), set(), []
    for _ in range(draws):
        if len(out) == len(costs):
            break
        k = int(rng.integers(len(sketches)))
        cand = materialize(task, k, sketches[k], Decisions(), rng)
        if cand is None or cand.state.key in seen:
            continue
        seen.add(cand.state.key)
        out.append(Record(task.workload_key, str(task.target), cand.state.steps_records(), {},
                          MeasureResult(costs=(costs[len(out)],)), flop_count=1.0))
    return out


_ACTIONS = ("split", "split", "split", "fuse", "reorder", "annotate", "annotate", "inline",
            "compute_at", "compute_at", "root", "cache_write")


def random_steps(s: Schedule, pick, n: int) -> Schedule:
    for _ in range(n):
        stages = [k for k, st in enumerate(s.state.stages)
                  if not st.is_placeholder and st.location is not ComputeLocation.INLINE]
        if not stages:
            break
        sid = stages[pick(len(stages))]
        stage = s.state.stages[sid]
        h = s[stage.tensor]
        loops = h.loops
        action = _ACTIONS[pick(len(_ACTIONS))]
        try:
            if action == "split" and loops:
                it = loops[pick(len(loops))]
                if pick(4) == 0:
                    h.split(it, lengths=[1 + pick(4), 1 + pick(4)])
                elif pick(2):
                    h.split(it, factor=1 + pick(7))
                else:
                    h.split(it, nparts=1 + pick(5))
            elif action == "fuse" and len(loops) > 1:
                p = pick(len(loops) - 1)
                h.fuse(loops[p], loops[p + 1])
            elif action == "reorder" and len(loops) > 1:
                order = list(loops)
                for k in range(len(order) - 1, 0, -1):  # Fisher-Yates from picks
                    m = pick(k + 1)
                    order[k], order[m] = order[m], order[k]
                h.reorder(*order)
            elif action == "annotate" and loops:
                it = loops[pick(len(loops))]
                ann = (Annotation.PARALLEL, Annotation.VECTORIZE, Annotation.UNROLL)[pick(3)]
                {Annotation.PARALLEL: h.parallel, Annotation.VECTORIZE: h.vectorize,
                 Annotation.UNROLL: h.unroll}[ann](it)
            elif action == "inline":
                h.compute_inline()
            elif action == "compute_at":
                readers = s.state.readers(sid)
                if readers:
                    r = s[s.state.stages[readers[pick(len(readers))]].tensor]
                    rl = r.loops
                    if rl:
                        h.compute_at(r, rl[pick(len(rl))])
            elif action == "root":
                h.compute_root()
            elif action == "cache_write":
                s.cache_write(stage.tensor, ("local", "global")[pick(2)])
        except ScheduleError:
            pass
    return s
