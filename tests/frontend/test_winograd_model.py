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
