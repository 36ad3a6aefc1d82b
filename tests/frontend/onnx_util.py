"""Helpers of the frontend tests: small ONNX graphs built with onnx.helper, compiled by tecomp and
compared with ONNX Runtime on random inputs."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tecomp as tc  # noqa: E402

_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64,
          np.dtype("int32"): TensorProto.INT32, np.dtype("bool"): TensorProto.BOOL}


def info(name, shape, dtype=np.float32):
    return helper.make_tensor_value_info(name, _TYPES[np.dtype(dtype)], shape)


def make_model(nodes, inputs, outputs, inits=None, opset=17):
    """``inputs``/``outputs``: ``{name: shape}`` or ``{name: (shape, dtype)}``; ``inits``:
    ``{name: array}``."""
    def infos(d):
        out = []
        for k, v in d.items():
            shape, dtype = (v if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], (list, tuple))
                            else (v, np.float32))
            out.append(info(k, list(shape) if shape is not None else None, dtype))
        return out
    g = helper.make_graph(nodes, "g", infos(inputs), infos(outputs),
                          [numpy_helper.from_array(np.asarray(a), k) for k, a in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def node(op, ins, outs=("y",), **attrs):
    """An ONNX node of ``op`` (output ``y`` unless ``outs`` says otherwise)."""
    return helper.make_node(op, list(ins), list(outs), **attrs)


def one(op, inputs, out_shape, inits=None, opset=17, ins=None, **attrs):
    """A model of one ``op`` node: ``inputs`` then the initializers ``inits`` as its inputs (or
    ``ins``), output ``y`` of ``out_shape``."""
    names = list(ins or (list(inputs) + list(inits or {})))
    return make_model([node(op, names, **attrs)], inputs, {"y": out_shape}, inits, opset)


def random_inputs(proto, rng, int_high=None):
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in {i.name for i in proto.graph.initializer}:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, int_high or 4, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def ort_run(proto, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(proto, rtol=1e-4, atol=1e-5, seed=0, int_high=None, feeds=None, layout=tc.Layout.AUTO):
    """Compile ``proto`` with tecomp (its convolutions in ``layout``) and compare every output
    with ONNX Runtime's."""
    rng = np.random.default_rng(seed)
    feeds = feeds or random_inputs(proto, rng, int_high)
    model = tc.from_onnx(proto, layout=layout)
    cm = tc.compile_model(model)
    got = cm(**feeds)
    got = list(got) if isinstance(got, tuple) else [got]
    want = ort_run(proto, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        assert np.any(w != 0) or w.size == 0 or w.dtype == bool  # a test that can fail
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model, cm
