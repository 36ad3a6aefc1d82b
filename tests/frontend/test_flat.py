"""The FLAT variant of a 1x1 unpadded convolution group (tecomp/frontend/flat.py): which groups
get it (strided ones too, reading their plain input), that compile_model runs it on views of
the model's buffers where its record is the fastest, against ONNX Runtime in both layouts, and
that an export of it loads and runs."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import make_model, ort_run

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402
from tecomp.frontend.fusion import ConvAlgorithm, group_variants, partition  # noqa: E402
from tecomp.schedule import default_cpu_schedule as default_schedule  # noqa: E402
from tecomp.schedule.records import MeasureResult, Record, append_records  # noqa: E402

rng = np.random.default_rng(11)


def w(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def n(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def bottleneck_tail(C=6, O=8, H=5):
    """A 1x1 conv with bias, its residual add and relu (fusable into one group), then a 1x1
    stride-2 conv (FLAT after a copy of the pixels it reads) and a 3x3 conv (not FLAT)."""
    nodes = [n("Conv", ["x", "W1", "B1"], ["c1"]), n("Add", ["c1", "r"], ["a"]),
             n("Relu", ["a"], ["y1"]), n("Conv", ["y1", "W2"], ["c2"], strides=[2, 2]),
             n("Conv", ["c2", "W3"], ["y"], pads=[1, 1, 1, 1])]
    inits = {"W1": w(O, C, 1, 1), "B1": w(O), "W2": w(O, O, 1, 1), "W3": w(4, O, 3, 3)}
    return make_model(nodes, {"x": [1, C, H, H], "r": [1, O, H, H]},
                      {"y": [1, 4, (H + 1) // 2, (H + 1) // 2]}, inits)


def _flat_of(model):
    return [[gd for gd in group_variants(model, g) if gd.algorithm is ConvAlgorithm.FLAT]
            for g in partition(model)]


@pytest.mark.parametrize("layout", [tc.Layout.NCHW, tc.Layout.NHWC])
def test_only_the_1x1_unpadded_groups_have_a_flat_variant(layout):
    model = tc.from_onnx(bottleneck_tail(), layout=layout)
    flats = [f for f in _flat_of(model) if f]
    assert len(flats) == 2  # not the 3x3 one
    gd, strided = flats[0][0], flats[1][0]
    shapes = [tuple(t.shape) for t in gd.dag.inputs if t.name.startswith("in")]
    nchw = layout is tc.Layout.NCHW
    want = [(1, 6, 1, 25), (1, 8, 1, 25)] if nchw else [(1, 1, 25, 6), (1, 1, 25, 8)]
    assert shapes == want  # the input and the residual, both viewed flat
    assert gd.name.endswith("[flat]") and strided.name.endswith("[flat]")
    # the strided one reads its plain 5x5 input and writes its 3x3 output as one row of 9
    (x,) = [tuple(t.shape) for t in strided.dag.inputs if t.name.startswith("in")]
    assert x == ((1, 8, 5, 5) if nchw else (1, 5, 5, 8))
    assert tuple(strided.dag.outputs[0].shape) == ((1, 8, 1, 9) if nchw else (1, 1, 9, 8))


def test_an_epilogue_that_varies_over_the_image_keeps_the_plain_form():
    nodes = [n("Conv", ["x", "W1"], ["c1"]), n("Add", ["c1", "P"], ["y"])]
    proto = make_model(nodes, {"x": [1, 3, 4, 4]}, {"y": [1, 5, 4, 4]},
                       {"W1": w(5, 3, 1, 1), "P": w(5, 4, 4)})  # a per-pixel constant
    model = tc.from_onnx(proto, layout=tc.Layout.NCHW)
    assert not any(_flat_of(model))


def _log_favouring_flat(model, path):
    """Records of every task's default schedule, the FLAT variants' (their output one row of
    pixels) the cheapest."""
    recs = []
    for t, _ in model.tasks():
        out = tuple(t.dag.outputs[0].shape)
        flat = (out[2] == 1 and out[3] in (9, 25)) or (out[1] == 1 and out[2] in (9, 25))
        steps = default_schedule(t.dag).state.steps_records()
        recs.append(Record(t.workload_key, str(t.target), steps, {},
                           MeasureResult((1e-6 if flat else 1e-3,))))
    append_records(str(path), recs)


@pytest.mark.parametrize("layout", [tc.Layout.NCHW, tc.Layout.NHWC])
def test_compile_model_runs_the_flat_variant_on_views(tmp_path, layout):
    proto = bottleneck_tail()
    model = tc.from_onnx(proto, layout=layout)
    log = tmp_path / "m.jsonl"
    _log_favouring_flat(model, log)
    cm = tc.compile_model(model, log=str(log))
    assert sum(st.name.endswith("[flat]") for st in cm.steps) == 2  # strided too
    feeds = {"x": rng.standard_normal((1, 6, 5, 5)).astype(np.float32),
             "r": rng.standard_normal((1, 8, 5, 5)).astype(np.float32)}
    want = ort_run(proto, feeds)[0]
    np.testing.assert_allclose(cm(**feeds), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cm(**feeds), want, rtol=1e-4, atol=1e-5)  # prepared calls
    if layout is tc.Layout.NCHW:  # an export keeps the views
        cm.export(tmp_path / "exp")
        np.testing.assert_allclose(tc.load(tmp_path / "exp")(**feeds), want, rtol=1e-4,
                                   atol=1e-5)
