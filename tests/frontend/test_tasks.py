"""A model's tuning tasks (distinct fused groups with their counts), tc.tune_model into a log,
and compile_model from that log (tuned groups from their records, the rest with a warning)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx_util import make_model, ort_run

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402

rng = np.random.default_rng(3)


def three_convs():
    """Two convolutions of one shape (different weights) and a third of another shape (2x2
    stride 2: strided, but not a 1x1 with a FLAT variant)."""
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "W3"], ["y"], strides=[2, 2])]
    inits = {"W1": w(4, 4, 3, 3), "B1": w(4), "W2": w(4, 4, 3, 3), "B2": w(4),
             "W3": w(8, 4, 2, 2)}
    return make_model(nodes, {"x": [1, 4, 6, 6]}, {"y": [1, 8, 3, 3]}, inits)


def test_tasks_are_distinct_groups_with_counts():
    model = tc.from_onnx(three_convs())
    tasks = model.tasks(target="llvm")
    assert [n for _, n in tasks] == [2, 1]
    assert len({t.workload_key for t, _ in tasks}) == 2
    assert all(isinstance(t, tc.SearchTask) for t, _ in tasks)
    # the layout transforms of the input and output (NHWC inside) are simple tasks
    assert len(model.tasks(include_simple=True)) == 4
    nchw = tc.from_onnx(three_convs(), layout=tc.Layout.NCHW)
    # nothing simple here; each convolution also in blocks of channels (NCHW[x]c), a variant,
    # and the strided one on its input's stride phases, another
    assert len(nchw.tasks(include_simple=True)) == 5
    assert [n for _, n in nchw.tasks()] == [2, 2, 1, 1, 1]
    stages = [{s.op.name for s in t.dag.stages if not s.is_placeholder} for t, _ in nchw.tasks()]
    assert ["conv2d0_blocked" in s for s in stages] == [False, True, False, True, False]
    assert ["conv2d0_phase" in s for s in stages] == [False, False, False, False, True]
    # the same convolutions in the two layouts are different workloads: a log tuned in one
    # layout has no record for the other
    assert not {t.workload_key for t, _ in tasks} & {t.workload_key for t, _ in nchw.tasks()}


@pytest.mark.slow  # ~20 s: worker processes measure real candidates
def test_tune_model_then_compile_from_the_log(tmp_path):
    proto = three_convs()
    model = tc.from_onnx(proto)
    log = tmp_path / "m.jsonl"
    opt = tc.TuningOptions(population=16, generations=1, measures_per_round=4, repeat=1,
                           min_repeat_ms=1, n_workers=1, verbose=False)
    out = tc.tune_model(model, trials=4, log=str(log), options=opt)
    assert sum(out.allocation) == 4 and log.exists()
    # the first task (the warm-up round) has records; the second has none yet
    with pytest.warns(UserWarning, match="1 of 3 layers have no record.*conv2d"):
        cm = tc.compile_model(model, log=str(log))
    assert len(cm.untuned) == 1 and "#4 of 5" in cm.untuned[0]
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(cm(x), ort_run(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tc.compile_model(model)  # no log: the default schedule, nothing to warn about


def test_layers_of_one_shape_share_their_code_not_their_weights():
    proto = three_convs()
    cm = tc.compile_model(tc.from_onnx(proto))
    k1, k2, k3 = (s.kernel for s in cm.steps if s.name.startswith("conv2d"))
    assert k1.source() is k2.source() and k1.source() is not k3.source()  # compiled once
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(cm(x), ort_run(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)


def _log_with(tmp_path, model, counts):
    """A log holding ``counts[i]`` valid records of task ``i`` (its default schedule, costs
    1, 2, 3... ms), as a finished tuning would have left them."""
    from test_layout import _default_records

    from tecomp.schedule.records import append_records
    tasks = model.tasks()
    log = tmp_path / "held.jsonl"
    append_records(str(log), _default_records(tasks, [[(k + 1) * 1e-3 for k in range(c)]
                                                      for c in counts]))
    return tasks, log


def test_the_record_threshold():
    from tecomp.frontend.tasks import record_threshold
    assert record_threshold(8, 2) == 4 and record_threshold(9, 2) == 5  # the even share
    assert record_threshold(0, 3) == 1  # a trial-less run holds any task with a record
    assert record_threshold(8, 2, min_records=0) == 0 and record_threshold(8, 2, 7) == 7
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="min_records"):
            record_threshold(8, 2, bad)


def test_tasks_the_log_holds_cost_no_trials(tmp_path):
    from tecomp.frontend.tasks import held_tasks
    model = tc.from_onnx(three_convs())
    tasks, log = _log_with(tmp_path, model, [3, 1])
    held = held_tasks([t for t, _ in tasks], str(log), 3)
    assert list(held) == [0] and held[0].best_cost == 1e-3 and held[0].trials == 0
    assert held[0].best_schedule is not None
    assert held_tasks([t for t, _ in tasks], str(log), 0) == {}
    assert set(held_tasks([t for t, _ in tasks], str(log), 1)) == {0, 1}
    before = log.read_bytes()
    # every task holds >= 1 record: nothing is measured, the result is the log's best
    out = tc.tune_model(model, trials=2, log=str(log), min_records=1)
    assert out.allocation == [0, 0] and log.read_bytes() == before
    assert [r.best_cost for r in out.results] == [1e-3, 1e-3]
    assert out.weighted_latency == pytest.approx(2 * 1e-3 + 1e-3)


@pytest.mark.slow  # ~20 s: worker processes measure real candidates
def test_the_budget_goes_to_the_tasks_not_held(tmp_path):
    model = tc.from_onnx(three_convs())
    tasks, log = _log_with(tmp_path, model, [4, 0])
    opt = tc.TuningOptions(population=16, generations=1, measures_per_round=4, repeat=1,
                           min_repeat_ms=1, n_workers=1, verbose=False)
    # trials 8 over 2 tasks: a share of 4, which task 0 holds already
    out = tc.tune_model(model, trials=8, log=str(log), options=opt)
    assert out.allocation == [0, 8]
    assert out.results[0].best_cost == 1e-3 and out.results[1].trials == 8
    assert out.history and out.history[-1][1] == pytest.approx(out.weighted_latency)
