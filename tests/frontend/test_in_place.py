"""In-place ranking: each task's best records timed inside the compiled model, logged with the
model's context, ranked by compile_model and by nothing else."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx_util import ort_run
from test_tasks import three_convs

import tecomp as tc
from tecomp.frontend.in_place import in_place_table, rank_in_place
from tecomp.schedule.log_schedule import select_from_log
from tecomp.schedule.records import MeasureResult, Record, append_records, load_records
from tecomp.testing.random_schedules import sampled_records

pytest.importorskip("onnx")


def _log_of_candidates(model, path, per_task=3, seed=0):
    """A log holding ``per_task`` distinct sampled schedules of each task of ``model``, with the
    search's costs in the order they were drawn (1, 2, 3 ms: a fixture, never timed)."""
    rng = np.random.default_rng(seed)
    recs = []
    for task, _ in model.tasks():
        recs += sampled_records(task, [1e-3 * (k + 1) for k in range(per_task)], rng, draws=50)
    append_records(path, recs)
    return recs


def test_in_place_timings_are_logged_apart_and_rank_the_model_build(tmp_path):
    proto = three_convs()
    model = tc.from_onnx(proto)
    log = tmp_path / "m.jsonl"
    plain = _log_of_candidates(model, log)
    rows = rank_in_place(model, log, candidates=3, rounds=2)
    assert len(rows) == 2 and {r.count for r in rows} == {1, 2}
    assert all(r.candidates == 3 and 0 <= r.chosen_rank < 3 for r in rows)
    assert all(r.chosen_s <= r.searched_s for r in rows)
    assert "saved per call" in in_place_table(rows)
    # the search and every other reader see only the plain records
    assert len(load_records(log)) == len(plain)
    every = load_records(log, contexts=True)
    ctx = [r for r in every if r.context]
    # per task, the head-to-head: the search's best and the selection's winner, 4 rounds each
    # (8 timings where the search's best won the selection and ran on both sides; 4 where it
    # won in every task, so that the head-to-head had one side)
    counts = []
    for key in {r.workload_key for r in plain}:
        mine = [r for r in ctx if r.workload_key == key]
        first = min((r for r in plain if r.workload_key == key), key=lambda r: r.cost)
        assert first.key in {r.key for r in mine} and len(mine) in (1, 2)
        counts.append([len(r.result.costs) for r in mine])
        assert counts[-1] in ([4], [8], [4, 4])
    assert all(c == [4] for c in counts) or [4] not in counts
    cm = tc.compile_model(model, log=str(log))
    assert {r.context for r in ctx} == {cm.context} and cm.context.startswith("model:")
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert {d["v"] for d in lines if "ctx" in d} == {2} and {d["v"] for d in lines
                                                           if "ctx" not in d} == {1}
    # compile_model builds each layer from the record of lowest median in-place cost
    for st in cm.steps:
        if st.schedule is None or not st.name.startswith("conv2d"):
            continue
        mine = [r for r in ctx if r.workload_key == st.schedule.dag.workload_key]
        best = min(mine, key=lambda r: float(np.median(r.result.costs)))
        assert json.dumps(st.schedule.state.steps_records(), separators=(",", ":")) == best.key
        # without the context the search's best comes back
        _, rec = select_from_log(st.schedule.dag, log, cm.target)
        assert rec.cost == pytest.approx(1e-3)
    plain_build = tc.compile_model(model, log=str(log), in_place=False)
    for st in plain_build.steps:
        if st.schedule is not None and st.name.startswith("conv2d"):
            first = min((r for r in plain if r.workload_key == st.schedule.dag.workload_key),
                        key=lambda r: r.cost)
            assert st.schedule.key == first.key
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(cm(x), ort_run(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    # only the latest ranking counts: an older one, however fast, does not compare
    older = [Record(r.workload_key, r.target, r.steps, {}, MeasureResult(costs=(1e-9,),
                    timestamp=r.result.timestamp - 86400), flop_count=1.0, context=cm.context)
             for r in plain]
    append_records(log, older)
    again = tc.compile_model(model, log=str(log))
    assert [st.schedule.key for st in again.steps] == [st.schedule.key for st in cm.steps]


def test_another_model_does_not_see_the_context(tmp_path):
    proto = three_convs()
    model = tc.from_onnx(proto)
    log = tmp_path / "m.jsonl"
    _log_of_candidates(model, log, per_task=2)
    cm = tc.compile_model(model, log=str(log))
    # a record of the same layer timed in place in another network: it must not rank here
    other = [Record(r.workload_key, r.target, r.steps, r.decisions, MeasureResult(costs=(1e-9,)),
                    flop_count=1.0, context="model:0123456789abcdef")
             for r in load_records(log)]
    append_records(log, other)
    dag = next(st.schedule.dag for st in cm.steps if st.name.startswith("conv2d"))
    _, rec = select_from_log(dag, log, cm.target, context=cm.context)
    assert rec.context == "" and rec.cost == pytest.approx(1e-3)
    _, rec = select_from_log(dag, log, cm.target, context="model:0123456789abcdef")
    assert rec.context == "model:0123456789abcdef"


def test_bad_arguments(tmp_path):
    model = tc.from_onnx(three_convs())
    with pytest.raises(ValueError, match="candidates"):
        rank_in_place(model, tmp_path / "x.jsonl", candidates=0)
    with pytest.raises(ValueError, match="rounds"):
        rank_in_place(model, tmp_path / "x.jsonl", rounds=0)


def test_the_best_of_every_sketch_is_a_candidate_beside_the_searchs_top():
    from tecomp.frontend.in_place import with_each_sketch

    def rec(cost, sketch):
        return Record("k", "llvm", [], {"sketch": sketch}, MeasureResult(costs=(cost,)))
    # the search's order: the unfused sketch holds the top four, a fused one and a third sketch
    # come later (a layer timed alone does not pay for writing its raw output)
    ranked = [rec(1, "tile"), rec(2, "tile"), rec(3, "tile"), rec(4, "tile"), rec(5, "fuse1"),
              rec(6, "fuse1"), rec(7, "fuse2"), rec(8, "tile")]
    picked = with_each_sketch(ranked, 2)
    assert [r.result.costs[0] for r in picked] == [1, 2, 5, 7]
    # at most `candidates` more, in the search's order
    assert [r.result.costs[0] for r in with_each_sketch(ranked, 1)] == [1, 5]
    assert with_each_sketch(ranked[:3], 6) == ranked[:3]
