"""ONNX Runtime as a peer: the layer written as a one-node ONNX model (weights as initializers),
run by the CPU provider with every graph optimization, at each thread count (one session per
count, as ``intra_op_num_threads`` is fixed when a session is made), its input and output bound
once through an IOBinding so that no call allocates."""
from __future__ import annotations

import numpy as np

from .threads import thread_counts

__all__ = ["ort_configs", "conv2d_ort", "dense_ort"]


def _libs():
    try:
        import onnx
        import onnxruntime as ort
        return onnx, ort
    except Exception as e:  # noqa: BLE001 - a missing or broken ORT only drops that peer
        from .peers import note_skipped
        note_skipped("onnxruntime", e)
        return None


def ort_configs(model_bytes: bytes, feeds: dict, out_shape, to_ours, variant: str) -> list:
    """Configurations running ``model_bytes`` (one output ``y``) on ``feeds`` at each count."""
    from .protocol import Config
    libs = _libs()
    if libs is None:
        return []
    _, ort = libs
    cfgs = []
    for n in thread_counts():
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = n
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        out = np.empty(out_shape, np.float32)
        io = sess.io_binding()
        for k, v in feeds.items():
            io.bind_cpu_input(k, v)
        io.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)

        def run(sess=sess, io=io):
            sess.run_with_iobinding(io)

        def output(run=run, out=out):
            run()
            return np.ascontiguousarray(to_ours(out.copy()))
        # the session and its binding stay alive in the closures
        cfgs.append(Config("onnxruntime", variant, n, run, None, output))
    return cfgs


def _model(onnx, node, inputs, inits) -> bytes:
    h = onnx.helper
    graph = h.make_graph([node], "layer", inputs,
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                         initializer=[onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    return m.SerializeToString()


def conv2d_ort(params: dict, x, w, to_ours) -> list:
    """The conv layer on NCHW ``x`` and OIHW ``w`` (ORT's only conv layout; it converts to its
    blocked NCHWc layout inside)."""
    libs = _libs()
    if libs is None:
        return []
    onnx, _ = libs
    pad = params.get("padding", 0)
    pad = list(pad) if isinstance(pad, (tuple, list)) else [pad]
    pad = pad * 4 if len(pad) == 1 else pad * 2 if len(pad) == 2 else pad  # (top, left, bottom, right)
    pair = lambda v: list(v) if isinstance(v, (tuple, list)) else [v, v]  # noqa: E731
    stride, dil = pair(params.get("stride", 1)), pair(params.get("dilation", 1))
    node = onnx.helper.make_node("Conv", ["x", "w"], ["y"], strides=stride, dilations=dil,
                                 pads=pad, group=params.get("groups", 1))
    xin = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    return ort_configs(_model(onnx, node, [xin], {"w": w}), {"x": x}, (n, o, oh, ow), to_ours,
                       "Conv NCHW")


def dense_ort(x, w) -> list:
    """``x @ w`` as ONNX Gemm (its weight as the ``(N, K)`` initializer, ``transB``: how
    exporters write ``nn.Linear``)."""
    libs = _libs()
    if libs is None:
        return []
    onnx, _ = libs
    node = onnx.helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    xin = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))
    return ort_configs(_model(onnx, node, [xin], {"w": np.ascontiguousarray(w.T)}), {"x": x},
                       (x.shape[0], w.shape[1]), lambda y: y, "Gemm")
