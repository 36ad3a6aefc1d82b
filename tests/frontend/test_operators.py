"""Each supported ONNX operator (attribute and broadcasting variants) compiled by tecomp and
compared with ONNX Runtime on random inputs."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import check, make_model, node, one

helper = pytest.importorskip("onnx").helper
rng = np.random.default_rng(42)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


X4 = {"x": [1, 4, 6, 6]}

CASES = {
    "conv_pads_bias": one("Conv", X4, [1, 8, 6, 6], {"W": w(8, 4, 3, 3), "B": w(8)},
                          pads=[1, 1, 1, 1]),
    "conv_stride_asym_pads": one("Conv", X4, [1, 6, 3, 4], {"W": w(6, 4, 3, 3)},
                                 strides=[2, 2], pads=[1, 0, 0, 2]),
    "conv_dilation": one("Conv", X4, [1, 4, 2, 2], {"W": w(4, 4, 3, 3)}, dilations=[2, 2]),
    "conv_groups": one("Conv", X4, [1, 6, 6, 6], {"W": w(6, 2, 3, 3)}, group=2,
                       pads=[1, 1, 1, 1]),
    "conv_depthwise_same": one("Conv", X4, [1, 4, 3, 3], {"W": w(4, 1, 3, 3)}, group=4,
                               strides=[2, 2], auto_pad="SAME_UPPER"),
    "conv_runtime_weight": one("Conv", {"x": [1, 4, 5, 5], "W": [3, 4, 1, 1]}, [1, 3, 5, 5]),
    "gemm_transB_bias": one("Gemm", {"a": [3, 5]}, [3, 4], {"B": w(4, 5), "C": w(4)}, transB=1),
    "gemm_alpha_beta_transA": one("Gemm", {"a": [5, 3]}, [3, 4], {"B": w(5, 4), "C": w(3, 4)},
                                  transA=1, alpha=0.5, beta=2.0),
    "matmul_2d": one("MatMul", {"a": [3, 5], "b": [5, 4]}, [3, 4]),
    "matmul_3d_const": one("MatMul", {"a": [2, 3, 5]}, [2, 3, 4], {"B": w(5, 4)}),
    "matmul_batched": one("MatMul", {"a": [2, 3, 5], "b": [2, 5, 4]}, [2, 3, 4]),
    "matmul_broadcast_4d": one("MatMul", {"a": [2, 3, 4, 5], "b": [1, 3, 5, 2]}, [2, 3, 4, 2]),
    "matmul_vec": one("MatMul", {"a": [5], "b": [5, 3]}, [3]),
    "add_bcast": one("Add", {"a": [2, 3, 4], "b": [3, 1]}, [2, 3, 4]),
    "sub_bcast_lead": one("Sub", {"a": [4], "b": [2, 3, 4]}, [2, 3, 4]),
    "mul_scalar_const": one("Mul", {"a": [2, 3]}, [2, 3], {"s": np.array(1.5, np.float32)}),
    "div_const_first": one("Div", {"b": [2, 3]}, [2, 3], {"s": np.array([2.0], np.float32)},
                           ins=["s", "b"]),
    "pow_2": one("Pow", {"a": [2, 5]}, [2, 5], {"e": np.array(2.0, np.float32)}),
    "pow_half_abs": make_model([node("Abs", ["a"], ["t"]), node("Pow", ["t", "e"])],
                               {"a": [3, 4]}, {"y": [3, 4]}, {"e": np.array(0.5, np.float32)}),
    "max_min_variadic": make_model([node("Max", ["a", "b", "c"], ["t"]),
                                    node("Min", ["t", "a"])],
                                   {"a": [2, 3], "b": [3], "c": [2, 1]}, {"y": [2, 3]}),
    "relu": one("Relu", {"x": [2, 7]}, [2, 7]),
    "clip_relu6": one("Clip", {"x": [2, 7]}, [2, 7],
                      {"lo": np.array(0, np.float32), "hi": np.array(0.6, np.float32)}),
    "clip_opset6": one("Clip", {"x": [2, 7]}, [2, 7], opset=6, min=-0.5, max=0.5),
    "sigmoid": one("Sigmoid", {"x": [3, 5]}, [3, 5]),
    "tanh": one("Tanh", {"x": [3, 5]}, [3, 5]),
    "erf": one("Erf", {"x": [4, 9]}, [4, 9]),
    "gelu": one("Gelu", {"x": [4, 9]}, [4, 9], opset=20),
    "gelu_tanh": one("Gelu", {"x": [4, 9]}, [4, 9], opset=20, approximate="tanh"),
    "sqrt_exp_neg": make_model([node("Exp", ["x"], ["e"]), node("Sqrt", ["e"], ["s"]),
                                node("Neg", ["s"])], {"x": [3, 4]}, {"y": [3, 4]}),
    "batchnorm": one("BatchNormalization", X4, [1, 4, 6, 6],
                     {"s": w(4) + 1, "b": w(4), "m": w(4), "v": np.abs(w(4)) + 0.5}),
    "maxpool_pads_stride": one("MaxPool", X4, [1, 4, 3, 3], kernel_shape=[3, 3],
                               strides=[2, 2], pads=[1, 1, 1, 1]),
    "maxpool_ceil": one("MaxPool", {"x": [1, 2, 7, 7]}, [1, 2, 4, 4], kernel_shape=[2, 2],
                        strides=[2, 2], ceil_mode=1),
    "avgpool_exclude_pad": one("AveragePool", X4, [1, 4, 3, 3], kernel_shape=[3, 3],
                               strides=[2, 2], pads=[1, 1, 1, 1]),
    "avgpool_include_pad": one("AveragePool", X4, [1, 4, 6, 6], kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1], count_include_pad=1),
    "global_avgpool": one("GlobalAveragePool", X4, [1, 4, 1, 1]),
    "flatten": make_model([node("Relu", ["x"], ["r"]), node("Flatten", ["r"], axis=1)], X4,
                          {"y": [1, 144]}),
    "reshape_transpose": make_model(
        [node("Reshape", ["x", "s"], ["r"]), node("Transpose", ["r"], perm=[0, 2, 1, 3])],
        {"x": [2, 6, 8]}, {"y": [2, 2, 6, 4]}, {"s": np.array([2, 6, 2, 4], np.int64)}),
    "concat": one("Concat", {"a": [2, 3, 2], "b": [2, 1, 2], "c": [2, 2, 2]}, [2, 6, 2], axis=1),
    "softmax_last": one("Softmax", {"x": [2, 3, 7]}, [2, 3, 7], axis=-1),
    "softmax_axis1": one("Softmax", {"x": [2, 3, 4]}, [2, 3, 4], axis=1),
    "softmax_opset11": one("Softmax", {"x": [2, 3, 4]}, [2, 3, 4], opset=11, axis=1),
    "layernorm": one("LayerNormalization", {"x": [2, 5, 8]}, [2, 5, 8],
                     {"g": w(8) + 1, "b": w(8)}, epsilon=1e-5),
    "reduce_mean_keep": one("ReduceMean", {"x": [2, 3, 4]}, [2, 1, 4], axes=[1]),
    "reduce_mean_18": one("ReduceMean", {"x": [2, 3, 4]}, [2, 3], {"ax": np.array([-1], np.int64)},
                          opset=18, keepdims=0),
    "reduce_sum_max": make_model([node("ReduceSum", ["x", "ax"], ["s"], keepdims=0),
                                  node("ReduceMax", ["x"], ["m"], axes=[0, 2], keepdims=0),
                                  node("Add", ["s", "m"])],
                                 {"x": [2, 3, 4]}, {"y": [3]}, {"ax": np.array([0, 2], np.int64)},
                                 opset=13),
    "gather_embedding": one("Gather", {"ids": ([2, 3], np.int64)}, [2, 3, 5], {"E": w(6, 5)},
                            ins=["E", "ids"]),
    "gather_axis1_neg": one("Gather", {"x": [3, 4, 2]}, [3, 2, 2],
                            {"i": np.array([-1, 1], np.int64)}, axis=1),
    "slice_steps": one("Slice", {"x": [4, 6]}, [2, 2], {
        "st": np.array([1, 5], np.int64), "en": np.array([4, 0], np.int64),
        "ax": np.array([0, 1], np.int64), "sp": np.array([2, -2], np.int64)}),
    "expand": one("Expand", {"x": [3, 1]}, [2, 3, 4], {"s": np.array([2, 1, 4], np.int64)}),
    "pad_constant": one("Pad", {"x": [2, 3]}, [3, 6], {"p": np.array([0, 1, 1, 2], np.int64),
                                                       "v": np.array(0.5, np.float32)}),
    "unsqueeze_squeeze": make_model(
        [node("Unsqueeze", ["x", "a"], ["u"]), node("Relu", ["u"], ["r"]),
         node("Squeeze", ["r", "a"])], {"x": [3, 4]}, {"y": [3, 4]},
        {"a": np.array([0, 2], np.int64)}),
    "shape_pattern": make_model(
        [node("Shape", ["x"], ["sh"]), node("Gather", ["sh", "i0"], ["d0"], axis=0),
         node("Unsqueeze", ["d0", "a0"], ["u0"]), node("Concat", ["u0", "m1"], ["ns"], axis=0),
         node("Reshape", ["x", "ns"])],
        {"x": [2, 3, 4]}, {"y": [2, 12]},
        {"i0": np.array(0, np.int64), "a0": np.array([0], np.int64),
         "m1": np.array([-1], np.int64)}),
    "cast_int": make_model([node("Cast", ["x"], ["c"], to=7), node("Cast", ["c"], to=1)],
                           {"x": [3, 4]}, {"y": [3, 4]}),
    "constant_node": make_model(
        [node("Constant", [], ["k"], value=helper.make_tensor("k", 1, [4], [1, 2, 3, 4])),
         node("Mul", ["x", "k"])], {"x": [3, 4]}, {"y": [3, 4]}),
    "identity_dropout": make_model([node("Dropout", ["x"], ["d"]), node("Identity", ["d"])],
                                   {"x": [3, 4]}, {"y": [3, 4]}),
    "compare_where": make_model(
        [node("Greater", ["a", "b"], ["g"]), node("Equal", ["a", "z"], ["e"]),
         node("Or", ["g", "e"], ["o"]), node("Not", ["o"], ["n"]),
         node("LessOrEqual", ["b", "z"], ["le"]), node("And", ["n", "le"], ["m"]),
         node("Where", ["m", "a", "b"])],
        {"a": [2, 3, 4], "b": [3, 1]}, {"y": [2, 3, 4]}, {"z": np.array(0.0, np.float32)}),
    "where_isnan_mask": make_model(
        [node("Cast", ["mask"], ["mb"], to=9), node("Where", ["mb", "x", "neg"], ["w"]),
         node("IsNaN", ["w"], ["nan"]), node("Where", ["nan", "zero", "w"])],
        {"x": [2, 5], "mask": ([1, 5], np.int64)}, {"y": [2, 5]},
        {"neg": np.array(-1e4, np.float32), "zero": np.array(0.0, np.float32)}),
    "gather_elements_const": make_model(
        [node("GatherElements", ["c", "i"], ["g"], axis=1), node("Add", ["x", "g"])],
        {"x": [2, 3]}, {"y": [2, 3]},
        {"c": w(2, 4), "i": np.array([[0, 3, 1], [2, 2, 0]], np.int64)}),
    "layernorm_written_out_plain": make_model(
        [node("ReduceMean", ["x"], ["mu"], axes=[-1]), node("Sub", ["x", "mu"], ["d"]),
         node("Pow", ["d", "two"], ["p"]), node("ReduceMean", ["p"], ["v"], axes=[-1]),
         node("Add", ["v", "eps"], ["ve"]), node("Sqrt", ["ve"], ["sd"]),
         node("Div", ["d", "sd"])],
        {"x": [3, 6]}, {"y": [3, 6]},
        {"two": np.array(2.0, np.float32), "eps": np.array(1e-3, np.float32)}, opset=13),
    "two_outputs": make_model([node("Relu", ["x"], ["y"]), node("Sigmoid", ["y"], ["z"])],
                              {"x": [3, 4]}, {"y": [3, 4], "z": [3, 4]}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_onnxruntime(name):
    proto = CASES[name]
    int_high = {"gather_embedding": 6, "where_isnan_mask": 2}.get(name)
    model, cm = check(proto, int_high=int_high)
    assert cm(**{n: np.zeros(v.shape, v.dtype) for n, v in zip(
        model.inputs, model.input_values())}) is not None  # callable again, by name


def test_isnan_sees_nan():
    proto = make_model([node("IsNaN", ["x"], ["n"]), node("Where", ["n", "zero", "x"])],
                       {"x": [4]}, {"y": [4]}, {"zero": np.array(0.0, np.float32)})
    x = np.array([1.0, np.nan, -2.0, np.nan], np.float32)
    check(proto, feeds={"x": x})
