"""The layout pass: convolutions (depthwise included) and the operators between them run NHWC,
weights transposed once to HWIO, transposes only where the layout must change; every model still
equals ONNX Runtime's outputs, and tuning and compiling see the same workloads."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx_util import check, make_model, ort_run
from zoo import mobilenet_v2, resnet50

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402
from tecomp.frontend.layout import count_transposes  # noqa: E402
from tecomp.schedule.records import MeasureResult, Record, append_records  # noqa: E402

rng = np.random.default_rng(11)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def n(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


@pytest.mark.parametrize("build", [resnet50, mobilenet_v2], ids=["resnet50", "mobilenet_v2"])
def test_full_models_get_one_transpose_not_one_per_conv(build):
    proto = build()
    model = tc.from_onnx(proto)
    convs = [nd for nd in model.nodes if nd.op is tc.frontend.Op.CONV2D]
    assert model.layout is tc.Layout.NHWC and len(convs) in (53, 52)
    assert all(nd.attrs["layout"] is tc.Layout.NHWC for nd in convs)
    # the input image only: the global pool's (1, 1, 1, C) result flattens as it is
    assert count_transposes(model) == 1
    assert model.nodes[0].op is tc.frontend.Op.TRANSPOSE and model.nodes[0].inputs == ["x"]
    nchw = tc.from_onnx(proto, layout=tc.Layout.NCHW)
    assert nchw.layout is tc.Layout.NCHW and count_transposes(nchw) == 0
    assert len(nchw.nodes) == len(model.nodes) - 1


@pytest.mark.parametrize("build", [resnet50, mobilenet_v2], ids=["resnet50", "mobilenet_v2"])
def test_small_models_equal_onnxruntime_in_both_layouts(build):
    proto = build(div=8, hw=48, classes=10)
    x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32)
    want = ort_run(proto, {"x": x})[0]
    assert np.abs(want).max() > 0
    for layout in (tc.Layout.NHWC, tc.Layout.NCHW):
        got = tc.compile_model(tc.from_onnx(proto, layout=layout))(x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow  # ~2 min: full-size networks compiled with the default schedules
@pytest.mark.parametrize("build", [resnet50, mobilenet_v2], ids=["resnet50", "mobilenet_v2"])
def test_full_models_equal_onnxruntime_in_nhwc(build):
    proto = build()
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    want = ort_run(proto, {"x": x})[0]
    cm = tc.compile_model(tc.from_onnx(proto))
    assert sum(1 for s in cm.steps if s.name.startswith("transpose")) == 1
    np.testing.assert_allclose(cm(x), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def layout_zoo():
    """Every operator the pass carries in NHWC, and some it does not (transposed back)."""
    nodes = [n("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
             n("MaxPool", ["r1"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             n("AveragePool", ["r1"], ["ap"], kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1]),
             n("Concat", ["mp", "ap"], ["cat"], axis=1),
             # squeeze-excite: a runtime (N, C, 1, 1) scale broadcast over H and W
             n("GlobalAveragePool", ["cat"], ["g"]), n("Conv", ["g", "Wse"], ["se"]),
             n("Sigmoid", ["se"], ["sg"]), n("Mul", ["cat", "sg"], ["sc"]),
             n("Add", ["sc", "chan"], ["sa"]),                 # a (C, 1, 1) constant
             n("Pad", ["sa", "pads"], ["pd"]),
             n("Conv", ["pd", "Wd"], ["dw"], group=8),        # depthwise, 3x3, no padding
             n("ReduceSum", ["dw", "ax1"], ["rs"], keepdims=1),  # over the channels
             n("Transpose", ["dw"], ["tr"], perm=[0, 2, 3, 1]),  # the model's own NHWC
             n("ReduceMean", ["dw", "ax23"], ["rm"], keepdims=0),
             n("Reshape", ["dw", "shp"], ["flat"])]            # NCHW order: transposed back
    inits = {"W1": w(4, 3, 3, 3), "B1": w(4), "Wse": w(8, 8, 1, 1), "chan": w(8, 1, 1),
             "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "Wd": w(8, 1, 3, 3),
             "ax1": np.array([1], np.int64), "ax23": np.array([2, 3], np.int64),
             "shp": np.array([1, -1], np.int64)}
    outs = {"rs": [1, 1, 4, 4], "tr": [1, 4, 4, 8], "rm": [1, 8], "flat": [1, 128],
            "dw": [1, 8, 4, 4]}
    return make_model(nodes, {"x": [1, 3, 8, 8]}, outs, inits, opset=18)


def test_the_operators_between_convolutions_run_in_nhwc():
    model, _ = check(layout_zoo(), layout=tc.Layout.NHWC)
    by_out = {nd.output: nd for nd in model.nodes}
    # transforms: the input; dw to NCHW for the reshape, which is output dw as well; output
    # rs (reduced over the channels, so NHWC-shaped (1, 4, 4, 1))
    transforms = [nd for nd in model.nodes if nd.source.startswith("layout transform")]
    assert sorted(nd.output for nd in transforms) == ["dw", "rs", "x_nhwc"], model.summary()
    assert by_out["flat"].inputs == ["dw"]
    assert all(by_out[v].attrs["layout"] is tc.Layout.NHWC for v in ("mp", "ap", "se"))
    assert by_out["cat"].attrs["axis"] == 3 and by_out["g"].attrs["axes"] == (1, 2)
    assert by_out["pd"].attrs["before"] == (0, 1, 1, 0)
    assert by_out["sa"].inputs[1] == "chan_nhwc" and model.values["chan_nhwc"].shape == \
        (1, 1, 1, 8)
    assert by_out["sc"].inputs == ["cat", "sg"]  # (1, 4, 4, 8) * (1, 1, 1, 8)
    assert by_out["tr"].attrs["perm"] == (0, 1, 2, 3)  # the model's own NHWC is the layout's
    assert by_out["rm"].attrs["axes"] == (1, 2) and by_out["rs_nhwc"].attrs["axes"] == (3,)
    check(layout_zoo(), layout=tc.Layout.NCHW)


def test_layout_choices_and_errors():
    proto = layout_zoo()
    assert tc.from_onnx(proto, layout="nhwc").layout is tc.Layout.NHWC
    with pytest.raises(ValueError, match="unknown layout 'blocked'"):
        tc.from_onnx(proto, layout="blocked")
    with pytest.raises(TypeError, match="tc.Layout"):
        tc.from_onnx(proto, layout=4)
    m = tc.from_onnx(proto)
    with pytest.raises(ValueError, match="already converted"):
        tc.frontend.convert_layout(m, tc.Layout.NHWC)
    # no convolution: AUTO keeps the layout
    dense = make_model([n("MatMul", ["a", "B"], ["y"])], {"a": [2, 3]}, {"y": [2, 4]},
                       {"B": w(3, 4)})
    assert tc.from_onnx(dense).layout is tc.Layout.NCHW


def _default_records(tasks, costs):
    """Valid records of each task's default schedule (what a tuning would have logged)."""
    from tecomp.schedule import default_cpu_schedule as default_schedule
    out = []
    for (t, _), cs in zip(tasks, costs):
        steps = default_schedule(t.dag).state.steps_records()
        out += [Record(t.workload_key, str(t.target), steps, {}, MeasureResult((c,)))
                for c in cs]
    return out


def test_the_log_of_one_layout_builds_that_layout(tmp_path):
    """model.tasks() and compile_model see the same NHWC graph: a record of every task leaves
    nothing untuned; the NCHW import of the same file has none of those workloads."""
    from test_blocks import residual_block
    proto = residual_block()
    model = tc.from_onnx(proto)
    tasks = model.tasks()
    log = tmp_path / "nhwc.jsonl"
    append_records(str(log), _default_records(tasks, [[1e-3]] * len(tasks)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cm = tc.compile_model(model, log=str(log))
    assert cm.untuned == []
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(cm(x), ort_run(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with pytest.warns(UserWarning, match="2 of 2 layers have no record"):
        tc.compile_model(tc.from_onnx(proto, layout=tc.Layout.NCHW), log=str(log))


def test_an_nhwc_export_loses_its_transposes():
    """A model exported from an NHWC framework transposes around every convolution: the
    layout's transposes cancel the model's own, and no layout transform is left."""
    nodes = [n("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
             n("Conv", ["xt", "W1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
             n("Conv", ["r1", "W2"], ["c2"]), n("Transpose", ["c2"], ["y"], perm=[0, 2, 3, 1])]
    proto = make_model(nodes, {"x": [1, 6, 6, 3]}, {"y": [1, 6, 6, 5]},
                       {"W1": w(4, 3, 3, 3), "W2": w(5, 4, 1, 1)})
    model, cm = check(proto)
    assert not any(nd.source.startswith("layout transform") for nd in model.nodes)
    assert model.nodes[0].op is tc.frontend.Op.CONV2D and model.nodes[0].inputs[0] == "x"
    assert model.nodes[-1].attrs["perm"] == (0, 1, 2, 3)  # the model's own: a copy
