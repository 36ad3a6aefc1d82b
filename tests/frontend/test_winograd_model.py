"""Winograd as an alternative per layer: a model's eligible 3x3 convolutions get a second task
(the same layer by F(m x m, 3 x 3)); the scheduler counts such a pair once; compile_model runs the
variant whose best record is fastest, which equals ONNX Runtime and survives export and load."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import make_model, ort_run

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402
from tecomp.frontend.tasks import sub_alternatives, task_alternatives, task_names  # noqa: E402
from tecomp.schedule import load_records  # noqa: E402
from tecomp.search.scheduler import TuneTasksResult  # noqa: E402
from tecomp.search.tune import TuneResult  # noqa: E402

rng = np.random.default_rng(11)
C, H = 16, 8


def two_convs():
    """A 3x3 stride-1 conv with bias and ReLU (Winograd-eligible), then a 3x3 stride-2 one (not)."""
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    inits = {"W1": w(C, C, 3, 3), "B1": w(C), "W2": w(8, C, 3, 3)}
    return make_model(nodes, {"x": [1, C, H, H]}, {"y": [1, 8, H // 2, H // 2]}, inits)


def test_an_eligible_conv_has_a_winograd_alternative():
    model = tc.from_onnx(two_convs())
    tasks = model.tasks()
    names = task_names(model)
    assert len(tasks) == 3 and [n for _, n in tasks] == [1, 1, 1]
    assert names[1] == names[0] + " [winograd]" and "winograd" not in names[2]
    assert task_alternatives(model) == [[0, 1]]
    assert sub_alternatives([[0, 1], [3, 4]], [1, 2, 4]) == [[0], [2]]
    small = tc.from_onnx(make_model(
        [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], {"x": [1, 4, 6, 6]},
        {"y": [1, 4, 6, 6]}, {"W": np.ones((4, 4, 3, 3), np.float32)}))
    assert task_alternatives(small) == []  # 4 channels: too few for the transforms to pay


def test_alternatives_count_once_in_the_weighted_latency():
    def res(cost):
        r = TuneResult(None)
        r.best_cost = cost
        return r

    out = TuneTasksResult([res(2.0), res(1.0), res(5.0)], [3.0, 3.0, 1.0], alternatives=[[0, 1]])
    assert out.weighted_latency == pytest.approx(3 * 1.0 + 5.0)
    assert TuneTasksResult([res(2.0), res(1.0)], [1.0, 1.0]).weighted_latency == 3.0
    with pytest.raises(ValueError, match="disjoint"):
        tc.tune_tasks([tc.SearchTask(t.dag) for t, _ in tc.from_onnx(two_convs()).tasks()], 0,
                      alternatives=[[0, 1], [1, 2]])


def _opt():
    return tc.TuningOptions(population=16, generations=1, measures_per_round=2, repeat=1,
                            min_repeat_ms=1, n_workers=1, verbose=False)


@pytest.mark.slow  # ~30 s: worker processes measure real candidates
def test_compile_runs_the_faster_variant_and_matches_onnxruntime(tmp_path):
    proto = two_convs()
    model = tc.from_onnx(proto)
    tasks = [t for t, _ in model.tasks()]
    log = tmp_path / "m.jsonl"
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    want = ort_run(proto, {"x": x})[0]
    # only the Winograd variant has records: it runs
    tc.tune(tasks[1], trials=2, log=str(log), options=_opt())
    with pytest.warns(UserWarning, match="no record"):
        cm = tc.compile_model(model, log=str(log))
    assert [s.name.endswith("[winograd]") for s in cm.steps if "Conv" in s.name][:2] == \
        [True, False]
    np.testing.assert_allclose(cm(x), want, rtol=1e-4, atol=1e-4)
    cm.export(tmp_path / "exp")
    np.testing.assert_array_equal(tc.load(tmp_path / "exp")(x), cm(x))
    # both have records: the one with the faster best record runs
    tc.tune(tasks[0], trials=2, log=str(log), options=_opt())
    best = {}
    for r in load_records(str(log)):
        if np.isfinite(r.cost):
            best[r.workload_key] = min(best.get(r.workload_key, np.inf), r.cost)
    faster = "[winograd]" if best[tasks[1].workload_key] < best[tasks[0].workload_key] else ""
    with pytest.warns(UserWarning, match="no record"):
        cm = tc.compile_model(model, log=str(log), in_place=False)
    first = next(s for s in cm.steps if "Conv" in s.name)
    assert first.name.endswith("[winograd]") == bool(faster)
    np.testing.assert_allclose(cm(x), want, rtol=1e-4, atol=1e-4)


def _sampled_records(task, costs, seed):
    """Records of distinct sampled schedules of ``task`` with the given (made-up) search costs."""
    from tecomp.testing.random_schedules import sampled_records
    out = sampled_records(task, costs, np.random.default_rng(seed))
    assert len(out) == len(costs), "too few distinct schedules"
    return out


def test_in_place_ranking_times_both_variants_and_compile_runs_the_faster_there(tmp_path):
    """The Winograd variant is faster alone (by the search's costs) and runs; the in-place
    ranking times the direct variant's best records in its place too, in the same model runs,
    so both variants get timings of one ranking; compile_model then runs the one faster in
    place. In-place timings of different runs do not compare: the search's costs decide."""
    from tecomp.frontend.in_place import rank_in_place
    from tecomp.schedule.records import MeasureResult, Record, append_records
    proto = two_convs()
    model = tc.from_onnx(proto)
    tasks = [t for t, _ in model.tasks()]
    log = tmp_path / "m.jsonl"
    append_records(log, _sampled_records(tasks[0], [2e-3, 3e-3], 1)       # direct
                   + _sampled_records(tasks[1], [1e-3, 1.5e-3], 2)        # Winograd: faster
                   + _sampled_records(tasks[2], [1e-3, 2e-3], 3))
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    want = ort_run(proto, {"x": x})[0]
    first_conv = lambda cm: next(s for s in cm.steps if "Conv" in s.name)  # noqa: E731
    assert first_conv(tc.compile_model(model, log=str(log))).name.endswith("[winograd]")
    rank_in_place(model, log, candidates=2, rounds=1)
    ctx = [r for r in load_records(str(log), contexts=True) if r.context]
    keys = {r.workload_key: r.result.timestamp for r in ctx}
    assert tasks[0].workload_key in keys and tasks[1].workload_key in keys
    assert keys[tasks[0].workload_key] == keys[tasks[1].workload_key]  # one ranking run
    cm = tc.compile_model(model, log=str(log))
    np.testing.assert_allclose(cm(x), want, rtol=1e-4, atol=1e-4)
    # made-up in-place timings of a newer ranking: the direct variant 10x faster in place
    stamp = max(keys.values()) + 1
    fake = [Record(r.workload_key, r.target, r.steps, {}, MeasureResult(
                costs=(1e-4 if r.workload_key == tasks[0].workload_key else 1e-3,) * 3,
                timestamp=stamp), flop_count=1.0, context=cm.context)
            for r in ctx if r.workload_key in (tasks[0].workload_key, tasks[1].workload_key)]
    append_records(log, fake)
    cm = tc.compile_model(model, log=str(log))
    assert not first_conv(cm).name.endswith("[winograd]")
    np.testing.assert_allclose(cm(x), want, rtol=1e-4, atol=1e-4)
    # a still newer ranking that timed only the Winograd variant: no comparison, search decides
    append_records(log, [Record(r.workload_key, r.target, r.steps, {}, MeasureResult(
        costs=(5e-3,) * 3, timestamp=stamp + 1), flop_count=1.0, context=cm.context)
        for r in fake if r.workload_key == tasks[1].workload_key])
    assert first_conv(tc.compile_model(model, log=str(log))).name.endswith("[winograd]")
