"""Whole blocks end to end against ONNX Runtime: a ResNet residual block (conv-BN-relu, residual
add), a MobileNet-V2 depthwise-separable block (ReLU6 as Clip) and a BERT-style attention block
(MatMul / Softmax, layer norm decomposed, Erf GELU), plus what fusion made of them."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import check, make_model

helper = pytest.importorskip("onnx").helper

import tecomp as tc  # noqa: E402

rng = np.random.default_rng(7)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def n(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def bn_inits(prefix, c):
    return {f"{prefix}_s": w(c) + 1, f"{prefix}_b": w(c), f"{prefix}_m": w(c),
            f"{prefix}_v": np.abs(w(c)) + 0.5}


def bn(prefix, x, y):
    return n("BatchNormalization", [x] + [f"{prefix}_{k}" for k in "sbmv"], [y])


def residual_block(C=8, H=6):
    nodes = [n("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]), bn("bn1", "c1", "b1"),
             n("Relu", ["b1"], ["r1"]),
             n("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1]), bn("bn2", "c2", "b2"),
             n("Add", ["b2", "x"], ["a"]), n("Relu", ["a"], ["y"])]
    inits = {"W1": w(C, C, 3, 3), "W2": w(C, C, 3, 3), **bn_inits("bn1", C), **bn_inits("bn2", C)}
    return make_model(nodes, {"x": [1, C, H, H]}, {"y": [1, C, H, H]}, inits)


def depthwise_separable_block(C=4, E=12, H=8):
    six = {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    nodes = [n("Conv", ["x", "We"], ["e"]), bn("bne", "e", "eb"),
             n("Clip", ["eb", "lo", "hi"], ["er"]),
             n("Conv", ["er", "Wd"], ["d"], group=E, pads=[1, 1, 1, 1], strides=[2, 2]),
             bn("bnd", "d", "db"), n("Clip", ["db", "lo", "hi"], ["dr"]),
             n("Conv", ["dr", "Wp", "Bp"], ["p"]),
             n("GlobalAveragePool", ["p"], ["g"]), n("Flatten", ["g"], ["f"]),
             n("Gemm", ["f", "Wfc", "Bfc"], ["y"], transB=1)]
    inits = {"We": w(E, C, 1, 1), "Wd": w(E, 1, 3, 3), "Wp": w(C, E, 1, 1), "Bp": w(C),
             "Wfc": w(5, C), "Bfc": w(5), **six, **bn_inits("bne", E), **bn_inits("bnd", E)}
    return make_model(nodes, {"x": [1, C, H, H]}, {"y": [1, 5]}, inits)


def attention_block(L=8, D=16, heads=2):
    dh = D // heads
    inits = {k: w(D, D) for k in ("Wq", "Wk", "Wv", "Wo")}
    inits.update({k: w(D) for k in ("bq", "bk", "bv", "bo", "beta")})
    inits.update({"gamma": w(D) + 1, "W1": w(D, 2 * D), "b1": w(2 * D), "W2": w(2 * D, D),
                  "b2": w(D), "hs": np.array([1, L, heads, dh], np.int64),
                  "flat": np.array([1, L, D], np.int64), "scale": np.array(dh ** -0.5, np.float32),
                  "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
                  "half": np.array(0.5, np.float32), "one": np.array(1.0, np.float32),
                  "rsq2": np.array(2 ** -0.5, np.float32), "ax": np.array([-1], np.int64)})
    nodes = []
    for p in "qkv":
        nodes += [n("MatMul", ["x", f"W{p}"], [f"{p}m"]), n("Add", [f"{p}m", f"b{p}"], [f"{p}a"]),
                  n("Reshape", [f"{p}a", "hs"], [f"{p}r"])]
    nodes += [n("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
              n("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
              n("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
              n("MatMul", ["qt", "kt"], ["s"]), n("Mul", ["s", "scale"], ["ss"]),
              n("Add", ["ss", "mask"], ["sm"]),
              n("Softmax", ["sm"], ["pr"], axis=-1), n("MatMul", ["pr", "vt"], ["cx"]),
              n("Transpose", ["cx"], ["ct"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ct", "flat"], ["cf"]), n("MatMul", ["cf", "Wo"], ["o"]),
              n("Add", ["o", "bo"], ["ob"]), n("Add", ["ob", "x"], ["res"]),
              # layer norm, decomposed as older exporters write it
              n("ReduceMean", ["res", "ax"], ["mu"]), n("Sub", ["res", "mu"], ["dc"]),
              n("Pow", ["dc", "two"], ["sq"]), n("ReduceMean", ["sq", "ax"], ["var"]),
              n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]),
              n("Div", ["dc", "sd"], ["nz"]), n("Mul", ["nz", "gamma"], ["ng"]),
              n("Add", ["ng", "beta"], ["ln"]),
              # FFN with the Erf form of GELU
              n("MatMul", ["ln", "W1"], ["h"]), n("Add", ["h", "b1"], ["hb"]),
              n("Mul", ["hb", "rsq2"], ["hs2"]), n("Erf", ["hs2"], ["he"]),
              n("Add", ["he", "one"], ["h1"]), n("Mul", ["hb", "h1"], ["hg"]),
              n("Mul", ["hg", "half"], ["g"]), n("MatMul", ["g", "W2"], ["f"]),
              n("Add", ["f", "b2"], ["fb"]), n("Add", ["fb", "ln"], ["y"])]
    return make_model(nodes, {"x": [1, L, D], "mask": [1, 1, 1, L]}, {"y": [1, L, D]}, inits,
                      opset=18)


def test_residual_block():
    model, cm = check(residual_block(), layout=tc.Layout.NCHW)
    # BatchNorm folded into the convolutions; each conv with its epilogue is one kernel
    assert [nd.op.label for nd in model.nodes] == ["conv2d", "relu", "conv2d", "add", "relu"]
    assert [s.name.split(" ")[0] for s in cm.steps] == ["conv2d+relu", "conv2d+add+relu"]


def test_residual_block_in_nhwc():
    """The default for a conv model: NHWC inside, one transpose of the input (read by the conv
    and the residual add alike) and one of the output; the epilogues still fuse."""
    model, cm = check(residual_block())
    assert model.layout is tc.Layout.NHWC
    assert [nd.op.label for nd in model.nodes] == \
        ["transpose", "conv2d", "relu", "conv2d", "add", "relu", "transpose"]
    assert [s.name.split(" ")[0] for s in cm.steps] == \
        ["transpose", "conv2d+relu", "conv2d+add+relu", "transpose"]
    convs = [nd for nd in model.nodes if nd.op.label == "conv2d"]
    assert all(model.values[c.inputs[1]].shape == (3, 3, 8, 8) for c in convs)  # HWIO
    first, last = model.nodes[0], model.nodes[-1]
    assert first.inputs == ["x"] and first.attrs["perm"] == (0, 2, 3, 1)
    assert last.outputs == ["y"] and last.attrs["perm"] == (0, 3, 1, 2)


def test_depthwise_separable_block():
    model, cm = check(depthwise_separable_block(), layout="NCHW")
    names = [s.name.split(" ")[0] for s in cm.steps]
    assert names[:3] == ["conv2d+clip", "conv2d+clip", "conv2d"], names
    assert len(cm.steps) == 5, names  # + the pool, + the reshape feeding the dense layer


def test_depthwise_separable_block_in_nhwc():
    """Depthwise in NHWC too; the global pool reduces H and W of the NHWC value, and the
    Flatten reads its (N, 1, 1, C) result as it is: one transpose, of the input."""
    model, cm = check(depthwise_separable_block(), layout=tc.Layout.NHWC)
    names = [s.name.split(" ")[0] for s in cm.steps]
    assert names == ["transpose", "conv2d+clip", "conv2d+clip", "conv2d", "reduce",
                     "reshape+matmul+add"], names
    dw = [nd for nd in model.nodes if nd.op.label == "conv2d"][1]
    assert dw.attrs["groups"] == 12 and model.values[dw.inputs[1]].shape == (3, 3, 1, 12)


def test_attention_block():
    model, cm = check(attention_block(), rtol=2e-4, atol=2e-5)
    # the written-out layer norm is one node; nothing of it is left
    assert [n.op.label for n in model.nodes].count("layer_norm") == 1
    assert not any(n.op.label in ("reduce", "sqrt", "pow") for n in model.nodes)
    names = [s.name.split(" ")[0] for s in cm.steps]
    assert "matmul+add+mul+erf+add+mul+mul" in names, names   # the FFN's GELU is an epilogue
    assert any(x.startswith("softmax") for x in names)


def test_buffers_are_planned_once_and_reused():
    _, cm = check(residual_block())
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    y1 = cm(x)
    bufs = cm._buffers
    y2 = cm(x)
    assert cm._buffers is bufs and y1 is not y2  # same intermediates, new outputs
    np.testing.assert_array_equal(y1, y2)
    y1[...] = 0  # the caller owns its outputs
    np.testing.assert_array_equal(cm(x), y2)
    # the steps between planned buffers run prepared calls (checked once), the others the
    # checked call on the caller's arrays; a new input still flows through all of them
    assert any(c is not None for c in cm._calls) and None in cm._calls
    x2 = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    y3 = cm(x2)
    assert not np.allclose(y3, y2)
    np.testing.assert_array_equal(y3, cm(x2.copy()))


def test_profile_times_every_step_in_place():
    _, cm = check(residual_block())
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    prof = cm.profile(x, repeat=3)
    assert [n for n, _ in prof] == [st.name for st in cm.steps]
    assert all(t > 0 for _, t in prof)
    with pytest.raises(ValueError, match="repeat"):
        cm.profile(x, repeat=0)
    with pytest.raises(ValueError, match="shape"):
        cm.profile(x[0], repeat=1)  # the call's own argument checks


def test_repeated_computations_are_shared():
    """Layers that recompute the same mask from equal constants (as BERT exports do) share it."""
    nodes = [n("Where", ["m", "c1", "d1"], ["w1"]), n("Where", ["m", "c2", "d2"], ["w2"]),
             n("Add", ["x", "w1"], ["a"]), n("Add", ["a", "w2"], ["y"])]
    inits = {"c1": np.array(0.0, np.float32), "c2": np.array(0.0, np.float32),
             "d1": np.array(-5.0, np.float32), "d2": np.array(-5.0, np.float32)}
    proto = make_model(nodes, {"x": [2, 4], "m": ([1, 4], np.bool_)}, {"y": [2, 4]}, inits)
    model, cm = check(proto)
    assert [nd.op.label for nd in model.nodes].count("where") == 1
