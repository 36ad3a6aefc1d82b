"""The composed ONNX operators (activations, PRelu, LogSoftmax, the L1/L2/log-sum reductions,
Instance/GroupNormalization, Split, Tile, DepthToSpace, Trilu, Resize, 1-d Conv and pooling)
compiled by tecomp and compared with ONNX Runtime on random inputs, in both layouts where a
convolution is involved."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import check, make_model, node, one

import tecomp as tc
from tecomp.frontend import ModelError

helper = pytest.importorskip("onnx").helper
rng = np.random.default_rng(7)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


def f32(*v):
    return np.array(v, np.float32)


X4 = {"x": [2, 4, 5, 6]}
ACT = {"x": [3, 17]}
NONE = np.zeros(0, np.float32)

CASES = {
    "leaky_relu": one("LeakyRelu", ACT, [3, 17], alpha=0.2),
    "leaky_relu_default": one("LeakyRelu", ACT, [3, 17]),
    "elu": one("Elu", ACT, [3, 17], alpha=0.7),
    "selu": one("Selu", ACT, [3, 17]),
    "celu": one("Celu", ACT, [3, 17], alpha=1.5, opset=12),
    "hard_sigmoid": one("HardSigmoid", ACT, [3, 17], alpha=0.3, beta=0.4),
    "hard_swish": one("HardSwish", {"x": [3, 40]}, [3, 40], opset=14),
    "softplus": one("Softplus", {"x": [4, 9]}, [4, 9]),
    "softsign": one("Softsign", ACT, [3, 17]),
    "thresholded_relu": one("ThresholdedRelu", ACT, [3, 17], alpha=0.1),
    "mish": one("Mish", ACT, [3, 17], opset=18),
    "sign": one("Sign", ACT, [3, 17]),
    "shrink": one("Shrink", ACT, [3, 17], lambd=0.4, bias=0.1),
    "prelu_channel": one("PRelu", X4, [2, 4, 5, 6], {"s": w(4, 1, 1)}),
    "prelu_scalar": one("PRelu", ACT, [3, 17], {"s": f32(0.25)}),
    "mean3": one("Mean", {"a": [2, 3], "b": [3], "c": [2, 1]}, [2, 3]),
    "log_softmax": one("LogSoftmax", {"x": [3, 7, 5]}, [3, 7, 5], axis=1, opset=13),
    "log_softmax_last": one("LogSoftmax", {"x": [4, 10]}, [4, 10]),
    "log_softmax_opset11": one("LogSoftmax", {"x": [2, 3, 4]}, [2, 3, 4], axis=1, opset=11),
    "reduce_l2": one("ReduceL2", {"x": [3, 4, 5]}, [3, 1, 5], axes=[1], opset=13),
    "reduce_l1_all": one("ReduceL1", {"x": [3, 4]}, [1, 1], opset=13),
    "reduce_sum_square": one("ReduceSumSquare", {"x": [3, 4, 5]}, [3, 5], axes=[1],
                             keepdims=0, opset=13),
    "reduce_log_sum_exp": one("ReduceLogSumExp", {"x": [3, 4, 5]}, [4], {"a": i64(0, 2)},
                              keepdims=0, opset=18),
    "instance_norm": one("InstanceNormalization", X4, [2, 4, 5, 6],
                         {"s": w(4) + 1, "b": w(4)}, epsilon=1e-4),
    "group_norm_21": one("GroupNormalization", {"x": [2, 6, 3, 4]}, [2, 6, 3, 4],
                         {"s": w(6) + 1, "b": w(6)}, num_groups=3, opset=21),
    "split_attr": make_model([node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3])],
                             X4, {"a": [2, 1, 5, 6], "b": [2, 3, 5, 6]}, opset=11),
    "split_input_eq": make_model([node("Split", ["x"], ["a", "b", "c"], axis=-1)],
                                 {"x": [4, 9]}, {"a": [4, 3], "b": [4, 3], "c": [4, 3]},
                                 opset=13),
    "split_num_outputs": make_model([node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2)],
                                    {"x": [5, 3]}, {"a": [3, 3], "b": [2, 3]}, opset=18),
    "tile": one("Tile", {"x": [2, 3]}, [4, 9], {"r": i64(2, 3)}),
    "depth_to_space_dcr": one("DepthToSpace", {"x": [1, 8, 2, 3]}, [1, 2, 4, 6], blocksize=2),
    "depth_to_space_crd": one("DepthToSpace", {"x": [1, 8, 2, 3]}, [1, 2, 4, 6], blocksize=2,
                              mode="CRD"),
    "space_to_depth": one("SpaceToDepth", {"x": [1, 2, 4, 6]}, [1, 8, 2, 3], blocksize=2),
    "trilu_upper_k": one("Trilu", {"x": [2, 5, 6]}, [2, 5, 6], {"k": i64(1)}, opset=14),
    "trilu_lower": one("Trilu", {"x": [5, 6]}, [5, 6], upper=0, opset=14),
    "resize_nearest_2x": one("Resize", X4, [2, 4, 10, 12],
                             {"roi": NONE, "sc": f32(1, 1, 2, 2)}, opset=13),
    "resize_nearest_sizes_asym_floor": one(
        "Resize", X4, [2, 4, 7, 4], {"roi": NONE, "sc": NONE, "sz": i64(2, 4, 7, 4)}, opset=13,
        coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    "resize_linear_half_pixel": one("Resize", X4, [2, 4, 10, 15],
                                    {"roi": NONE, "sc": f32(1, 1, 2, 2.5)}, mode="linear",
                                    opset=13),
    "resize_linear_align_corners_down": one(
        "Resize", X4, [2, 4, 3, 4], {"roi": NONE, "sc": NONE, "sz": i64(2, 4, 3, 4)},
        mode="linear", coordinate_transformation_mode="align_corners", opset=13),
    "resize_linear_pytorch": one("Resize", X4, [2, 4, 7, 9],
                                 {"roi": NONE, "sc": NONE, "sz": i64(2, 4, 7, 9)},
                                 mode="linear",
                                 coordinate_transformation_mode="pytorch_half_pixel", opset=13),
    "upsample_nearest": one("Upsample", X4, [2, 4, 10, 18], {"sc": f32(1, 1, 2, 3)}, opset=9),
    "conv1d": one("Conv", {"x": [2, 3, 20]}, [2, 5, 10], {"W": w(5, 3, 4), "B": w(5)},
                  strides=[2], pads=[1, 2]),
    "conv1d_same_dilated": one("Conv", {"x": [1, 4, 16]}, [1, 4, 16], {"W": w(4, 2, 3)},
                               group=2, dilations=[2], pads=[2, 2]),
    "conv_t_s2_pads_outpad": one("ConvTranspose", X4, [2, 3, 10, 12], {"W": w(4, 3, 3, 3),
                                                                     "B": w(3)},
                                 strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "conv_t_s1_groups_dil": one("ConvTranspose", X4, [2, 6, 9, 10], {"W": w(4, 3, 3, 3)},
                                group=2, dilations=[2, 2], pads=[0, 0, 0, 0]),
    "conv_t_big_pads_crop": one("ConvTranspose", X4, [2, 2, 5, 6], {"W": w(4, 2, 3, 3)},
                                pads=[3, 2, 3, 2]),
    "conv_t_output_shape": one("ConvTranspose", X4, [2, 2, 10, 12], {"W": w(4, 2, 4, 4)},
                               strides=[2, 2], output_shape=[10, 12]),
    "conv_t_same_upper": one("ConvTranspose", X4, [2, 2, 10, 12], {"W": w(4, 2, 3, 3)},
                             strides=[2, 2], auto_pad="SAME_UPPER"),
    "conv_t_phases_uneven_taps_groups": one("ConvTranspose", X4, [2, 6, 11, 13],
                                            {"W": w(4, 3, 3, 3), "B": w(6)}, group=2,
                                            strides=[2, 2], pads=[0, 0, 0, 0]),
    "conv_t_phases_stride3_k5_asym": one("ConvTranspose", X4, [2, 3, 15, 19], {"W": w(4, 3, 5, 4)},
                                         strides=[3, 3], pads=[1, 0, 2, 1], output_padding=[1, 2]),
    "conv_t_phases_strides_2_3": one("ConvTranspose", X4, [2, 3, 11, 19], {"W": w(4, 3, 3, 4)},
                                     strides=[2, 3], pads=[1, 1, 0, 1]),
    "conv_t_kernel_below_stride": one("ConvTranspose", X4, [2, 3, 10, 12], {"W": w(4, 3, 1, 1)},
                                      strides=[2, 2], output_padding=[1, 1]),
    "conv_t_1d": one("ConvTranspose", {"x": [2, 3, 7]}, [2, 4, 16], {"W": w(3, 4, 4)},
                     strides=[2], pads=[0, 0], output_padding=[0]),
    "einsum_bmm": one("Einsum", {"a": [2, 3, 5], "b": [2, 5, 4]}, [2, 3, 4],
                      equation="bij,bjk->bik", opset=12),
    "einsum_attention_heads": one("Einsum", {"q": [2, 7, 3, 4], "k": [2, 6, 3, 4]},
                                  [2, 3, 7, 6], equation="bqhd,bkhd->bhqk", opset=12),
    "einsum_chain_const": one("Einsum", {"a": [4, 6]}, [4, 3], {"B": w(6, 5), "C": w(5, 3)},
                              equation="ij,jk,kl->il", opset=12),
    "einsum_ellipsis_bcast": one("Einsum", {"a": [2, 1, 3, 4], "b": [1, 5, 4, 6]}, [2, 5, 3, 6],
                                 equation="...ij,...jk->...ik", opset=12),
    "einsum_implicit_trace_diag": one("Einsum", {"a": [3, 4, 4]}, [3], equation="bii",
                                      opset=12),
    "einsum_outer_transpose": one("Einsum", {"a": [3], "b": [4]}, [4, 3], equation="i,j->ji",
                                  opset=12),
    "floor_ceil_round": make_model([node("Floor", ["x"], ["f"]), node("Ceil", ["x"], ["c"]),
                                    node("Round", ["x"], ["r"]), node("Add", ["f", "c"], ["s"]),
                                    node("Add", ["s", "r"])], {"x": [4, 33]}, {"y": [4, 33]}),
    "cumsum": one("CumSum", {"x": [3, 9]}, [3, 9], {"ax": i64(1)}),
    "cumsum_exclusive_reverse": one("CumSum", {"x": [4, 5, 3]}, [4, 5, 3], {"ax": i64(-2)},
                                    exclusive=1, reverse=1),
    "cumsum_int_positions": make_model(
        [node("CumSum", ["m", "ax"], ["c"]), node("Mul", ["c", "m"])],
        {"m": ([2, 11], np.int64)}, {"y": ([2, 11], np.int64)}, {"ax": i64(1)}),
    "gather_elements_runtime": one("GatherElements", {"x": [3, 5], "i": ([3, 4], np.int64)},
                                   [3, 4], axis=1),
    "gather_elements_axis0_const_data": one("GatherElements", {"i": ([2, 3], np.int64)},
                                            [2, 3], {"d": w(4, 3)}, ins=["d", "i"], axis=0),
    "argmax_keepdims": one("ArgMax", {"x": [3, 7, 5]}, ([3, 1, 5], np.int64), axis=1),
    "argmin_last_no_keep": one("ArgMin", {"x": [4, 6]}, ([4], np.int64), axis=-1, keepdims=0,
                               select_last_index=1),
    "lrn": one("LRN", {"x": [2, 7, 4, 5]}, [2, 7, 4, 5], size=3, alpha=1e-2, beta=0.75,
               bias=2.0),
    "reshape_attr_opset4": one("Reshape", {"x": [2, 3, 4]}, [6, 4], shape=[6, 4], opset=4),
    "sin_cos_runtime": make_model([node("Sin", ["x"], ["s"]), node("Cos", ["x"], ["c"]),
                                   node("Mul", ["s", "c"])], {"x": [3, 40]}, {"y": [3, 40]}),
    "maxpool1d": one("MaxPool", {"x": [2, 3, 11]}, [2, 3, 5], kernel_shape=[3], strides=[2]),
    "avgpool1d_pads": one("AveragePool", {"x": [2, 3, 11]}, [2, 3, 6], kernel_shape=[3],
                          strides=[2], pads=[1, 1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_composed_operator_matches_onnxruntime(name):
    check(CASES[name], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("layout", [tc.Layout.NCHW, tc.Layout.NHWC])
def test_conv_block_with_new_operators_in_both_layouts(layout):
    """A decoder-like block: conv, LeakyRelu, nearest 2x upsampling, conv, InstanceNorm,
    HardSwish, a stride-2 ConvTranspose, DepthToSpace."""
    proto = make_model(
        [node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]),
         node("LeakyRelu", ["c1"], ["a1"], alpha=0.1),
         node("Resize", ["a1", "roi", "sc"], ["u"], mode="nearest"),
         node("Conv", ["u", "W2"], ["c2"], pads=[1, 1, 1, 1]),
         node("InstanceNormalization", ["c2", "s", "b"], ["n"]),
         node("HardSwish", ["n"], ["h0"]),
         node("ConvTranspose", ["h0", "W3"], ["h"], strides=[2, 2], pads=[1, 1, 1, 1],
              output_padding=[1, 1]),
         node("DepthToSpace", ["h"], ["y"], blocksize=2)],
        {"x": [1, 3, 6, 6]}, {"y": [1, 2, 48, 48]},
        {"W1": w(8, 3, 3, 3), "W2": w(8, 8, 3, 3), "W3": w(8, 8, 3, 3), "roi": NONE, "sc": f32(1, 1, 2, 2),
         "s": w(8) + 1, "b": w(8)}, opset=14)
    check(proto, rtol=5e-4, atol=5e-5, layout=layout)


def test_activation_on_constants_folds_like_the_kernel():
    """An activation of a constant is folded at import with the same formula."""
    proto = make_model([node("Elu", ["c"], ["e"], alpha=0.5), node("Add", ["x", "e"])],
                       {"x": [2, 5]}, {"y": [2, 5]}, {"c": w(2, 5, scale=2.0)})
    model, _ = check(proto)
    assert not any(n.op.label == "activation" for n in model.nodes)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum_of_a_constant_folds_like_the_kernel(exclusive, reverse):
    c = w(3, 6, scale=2.0)
    proto = make_model([node("CumSum", ["c", "ax"], ["s"], exclusive=exclusive, reverse=reverse),
                        node("Add", ["x", "s"])], {"x": [3, 6]}, {"y": [3, 6]},
                       {"c": c, "ax": i64(1)}, opset=14)
    model, _ = check(proto)
    assert not any(n.op.label == "cumsum" for n in model.nodes)


@pytest.mark.parametrize("bad, match", [
    (one("Resize", X4, [2, 4, 10, 12], {"roi": NONE, "sc": f32(1, 1, 2, 2)}, mode="cubic",
         opset=13), "mode 'cubic'"),
    (one("Resize", X4, [2, 4, 10, 12], {"roi": NONE, "sc": f32(1, 1, 2, 2)}, opset=13,
         coordinate_transformation_mode="tf_crop_and_resize"), "tf_crop_and_resize"),
    (make_model([node("Split", ["x"], ["a", "b"], axis=1, split=[1, 2])], X4,
                {"a": [2, 1, 5, 6], "b": [2, 2, 5, 6]}, opset=11), "split sizes"),
    (one("DepthToSpace", {"x": [1, 6, 2, 3]}, [1, 1, 4, 6], blocksize=2), "blocksize"),
    (one("Einsum", {"a": [2, 3], "b": [4, 5]}, [2, 5], equation="ij,jk->ik", opset=12),
     "sizes 3 and 4"),
])
def test_unsupported_or_malformed_raise_clear_errors(bad, match):
    with pytest.raises(ModelError, match=match):
        tc.from_onnx(bad)


def test_gather_elements_runtime_indices_negative_and_out_of_range():
    proto = make_model([node("GatherElements", ["x", "i"], ["y"], axis=1, name="ge")],
                       {"x": [2, 4], "i": ([2, 3], np.int64)}, {"y": [2, 3]})
    cm = tc.compile_model(tc.from_onnx(proto))
    x = w(2, 4)
    i = np.array([[0, -1, 3], [2, -4, 1]], np.int64)
    np.testing.assert_array_equal(cm(x, i), np.take_along_axis(x, np.where(i < 0, i + 4, i), 1))
    with pytest.raises(ValueError, match="'ge'.*index 4 is out of range \\[-4, 4\\)"):
        cm(x, np.array([[0, 4, 1], [0, 0, 0]], np.int64))


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_takes_the_sign_onnx_asks_for(fmod):
    proto = make_model([node("Mod", ["a", "b"], fmod=fmod)],
                       {"a": ([3, 5], np.int64), "b": ([5], np.int64)}, {"y": ([3, 5], np.int64)})
    a = np.array([[7, -7, 7, -7, 0], [5, -6, 9, 13, -1], [1, 2, -3, 4, 100]], np.int64)
    check(proto, feeds={"a": a, "b": np.array([3, 3, -3, -3, 7], np.int64)})


FIXES = {  # cases a random-graph fuzz found wrong or rejected
    "flatten_negative_axis": one("Flatten", {"x": [5, 4, 5, 4]}, [5, 80], axis=-3),
    "gather_elements_const_smaller_indices": one(
        "GatherElements", {"x": [1, 3]}, [1, 3], {"d": w(2, 5), "i": np.array([[0, 4, -1]])},
        ins=["d", "i"], axis=1),
    "reduce_sum_empty_axes_input": one("ReduceSum", {"x": [3, 4]}, [1, 1],
                                       {"a": np.zeros(0, np.int64)}, opset=14),
    "reduce_mean_empty_axes_input": one("ReduceMean", {"x": [3, 4]}, [1, 1],
                                        {"a": np.zeros(0, np.int64)}, opset=18),
    "reduce_sum_of_a_scalar": one("ReduceSum", {"x": []}, [], opset=14),
    "reduce_l2_of_a_scalar": one("ReduceL2", {"x": []}, [], opset=13),
}


@pytest.mark.parametrize("name", sorted(FIXES))
def test_fuzz_found_cases(name):
    proto = FIXES[name]
    if name == "gather_elements_const_smaller_indices":  # all-constant: folded; add an input
        proto = make_model([node("GatherElements", ["d", "i"], ["g"], axis=1),
                            node("Add", ["x", "g"])], {"x": [1, 3]}, {"y": [1, 3]},
                           {"d": w(2, 5), "i": np.array([[0, 4, -1]])})
    check(proto)


def test_pow_of_negative_bases_and_integer_div_and_pow():
    a = np.array([-2.0, -7.0, 3.0, -0.5, 0.0, 2.0, -2.0], np.float32)
    e = np.array([3.0, 2.0, 2.0, 2.0, 0.0, -1.0, 0.5], np.float32)
    proto = make_model([node("Pow", ["a", "e"])], {"a": [7], "e": [7]}, {"y": [7]})
    cm = tc.compile_model(tc.from_onnx(proto))
    with np.errstate(invalid="ignore"):  # (-2) ** 0.5 is NaN
        want = np.power(a, e)
    np.testing.assert_allclose(cm(a, e), want, rtol=1e-5, equal_nan=True)
    ints = {"a": ([6], np.int64), "b": ([6], np.int64)}
    ia = np.array([7, -7, 7, -7, 0, 5], np.int64)
    ib = np.array([2, 2, -2, -2, 3, -3], np.int64)
    div = tc.compile_model(tc.from_onnx(make_model([node("Div", ["a", "b"])], ints,
                                                   {"y": ([6], np.int64)})))
    np.testing.assert_array_equal(div(ia, ib), np.trunc(ia / ib).astype(np.int64))
    pw = tc.compile_model(tc.from_onnx(make_model([node("Pow", ["a", "b"])], ints,
                                                  {"y": ([6], np.int64)})))
    np.testing.assert_array_equal(pw(ia, np.abs(ib)), np.power(ia, np.abs(ib)))


def test_reduce_log_sum_exp_of_a_row_of_minus_infinity():
    proto = one("ReduceLogSumExp", {"x": [2, 3]}, [2], {"a": i64(1)}, keepdims=0, opset=18)
    x = np.array([[-np.inf] * 3, [0.0, 1.0, 2.0]], np.float32)
    got = tc.compile_model(tc.from_onnx(proto))(x)
    assert got[0] == -np.inf and np.isclose(got[1], np.log(np.exp([0, 1, 2]).sum()))


def test_one_value_listed_as_two_outputs_gives_two_arrays():
    proto = make_model([node("Relu", ["x"], ["r"])], {"x": [3]}, {"r": [3]})
    proto.graph.output.append(proto.graph.output[0])
    a, b = tc.compile_model(tc.from_onnx(proto))(np.ones(3, np.float32))
    a[0] = 100
    assert b[0] == 1 and a is not b


@pytest.mark.parametrize("shapes, match", [({"x": 4}, "sequence of integers"),
                                           ({"x": "1x4"}, "sequence of integers"),
                                           ({"x": (2.5, 4)}, "sequence of integers"),
                                           ([("x", (1, 4))], "shapes= must be a dict")])
def test_bad_shapes_argument_names_the_input(shapes, match):
    proto = make_model([node("Relu", ["x"], ["y"])], {"x": ["n", 4]}, {"y": ["n", 4]})
    with pytest.raises((ModelError, TypeError), match=match):
        tc.from_onnx(proto, shapes=shapes)


def test_layout_names_in_any_case():
    proto = make_model([node("Relu", ["x"], ["y"])], {"x": [1, 4]}, {"y": [1, 4]})
    for name in ("AUTO", "auto", "nhwc", "NCHW"):
        tc.from_onnx(proto, layout=name)
