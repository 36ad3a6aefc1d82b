"""The PHASED variant of a strided NCHW convolution group (tecomp/ops/phased.py): which groups
get it, and that compile_model runs it where its record is the fastest, against ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import make_model, ort_run

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402
from tecomp.frontend.fusion import ConvAlgorithm, group_variants, partition  # noqa: E402
from tecomp.schedule import default_cpu_schedule as default_schedule  # noqa: E402
from tecomp.schedule.records import MeasureResult, Record, append_records  # noqa: E402

rng = np.random.default_rng(12)


def w(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def stem_then_conv():
    """A 7x7 stride-2 stem with bias and relu, then a 3x3 stride-1 conv."""
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], strides=[2, 2],
                              pads=[3, 3, 3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2"], ["y"], pads=[1, 1, 1, 1])]
    inits = {"W1": w(8, 3, 7, 7), "B1": w(8), "W2": w(4, 8, 3, 3)}
    return make_model(nodes, {"x": [1, 3, 13, 13]}, {"y": [1, 4, 7, 7]}, inits)


def _phased_of(model):
    return [[gd for gd in group_variants(model, g) if gd.algorithm is ConvAlgorithm.PHASED]
            for g in partition(model)]


def test_only_the_strided_nchw_group_has_a_phased_variant():
    assert [len(v) for v in _phased_of(tc.from_onnx(stem_then_conv(), layout=tc.Layout.NCHW))] \
        == [1, 0]
    assert not any(_phased_of(tc.from_onnx(stem_then_conv(), layout=tc.Layout.NHWC)))


def test_compile_model_runs_the_phased_variant(tmp_path):
    proto = stem_then_conv()
    model = tc.from_onnx(proto, layout=tc.Layout.NCHW)
    recs = []
    for t, _ in model.tasks():
        phased = any(s.op.name.endswith("_phase") for s in t.dag.stages if not s.is_placeholder)
        steps = default_schedule(t.dag).state.steps_records()
        recs.append(Record(t.workload_key, str(t.target), steps, {},
                           MeasureResult((1e-6 if phased else 1e-3,))))
    append_records(str(tmp_path / "m.jsonl"), recs)
    cm = tc.compile_model(model, log=str(tmp_path / "m.jsonl"))
    assert any(st.name.endswith("[phased]") for st in cm.steps)
    feeds = {"x": rng.standard_normal((1, 3, 13, 13)).astype(np.float32)}
    np.testing.assert_allclose(cm(**feeds), ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-5)
