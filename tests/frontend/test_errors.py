"""Clear errors: unsupported operators (named with their node and position), malformed files,
dynamic shapes, wrong inputs at call time, out-of-range Gather indices."""
from __future__ import annotations

import numpy as np
import pytest
from onnx_util import make_model

onnx = pytest.importorskip("onnx")
helper = onnx.helper

import tecomp as tc  # noqa: E402
from tecomp.frontend import ModelError, UnsupportedOperatorError  # noqa: E402


def relu_model(shape=(2, 3)):
    return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": list(shape)},
                      {"y": list(shape)})


def test_unsupported_operator_names_op_node_and_position():
    proto = make_model([helper.make_node("Relu", ["x"], ["r"]),
                        helper.make_node("Hardmax", ["r"], ["y"], name="hm_7")],
                       {"x": [2, 3]}, {"y": [2, 3]})
    with pytest.raises(UnsupportedOperatorError) as e:
        tc.from_onnx(proto)
    msg = str(e.value)
    assert "'Hardmax'" in msg and "'hm_7'" in msg and "#1 of 2" in msg, msg


def test_unsupported_attribute_is_an_error_not_a_wrong_result():
    proto = make_model([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
                       {"x": [2, 3]}, {"y": [2, 5]}, {"p": np.array([0, 1, 0, 1], np.int64)})
    with pytest.raises(UnsupportedOperatorError, match="mode 'reflect'"):
        tc.from_onnx(proto)


def test_custom_domain_operator():
    node = helper.make_node("FusedMatMul", ["x", "x"], ["y"], domain="com.microsoft")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2, 2])],
                          [helper.make_tensor_value_info("y", 1, [2, 2])])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOperatorError, match="FusedMatMul.*com.microsoft"):
        tc.from_onnx(proto)


def test_malformed_files(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07this is not a protobuf\xff\xfe" * 10)
    with pytest.raises(ModelError, match="garbage.onnx"):
        tc.from_onnx(garbage)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match="empty graph|malformed"):
        tc.from_onnx(empty)
    with pytest.raises(FileNotFoundError):
        tc.from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(TypeError):
        tc.from_onnx(42)


def test_graph_reading_an_undefined_value_is_malformed():
    proto = make_model([helper.make_node("Relu", ["nowhere"], ["y"])], {"x": [2]}, {"y": [2]})
    with pytest.raises(ModelError, match="malformed|nowhere"):
        tc.from_onnx(proto)


def test_dynamic_input_needs_shapes():
    proto = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["batch", 3]},
                       {"y": ["batch", 3]})
    with pytest.raises(ModelError, match="dynamic dimension 0 \\('batch'\\).*shapes="):
        tc.from_onnx(proto)
    cm = tc.compile_model(tc.from_onnx(proto, shapes={"x": (4, 3)}))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(cm(x), np.maximum(x, 0))
    with pytest.raises(ModelError, match="not graph inputs"):
        tc.from_onnx(proto, shapes={"y": (4, 3)})


def test_inconsistent_shapes_name_the_node():
    proto = make_model([helper.make_node("Conv", ["x", "W"], ["y"], name="c1")],
                       {"x": [1, 3, 5, 5]}, {"y": [1, 2, 5, 5]},
                       {"W": np.zeros((2, 4, 1, 1), np.float32)})
    with pytest.raises(ModelError, match="'c1'.*channels"):
        tc.from_onnx(proto)


def test_wrong_inputs_at_call_time():
    cm = tc.compile_model(tc.from_onnx(relu_model()))
    with pytest.raises(ValueError, match="input 'x' has shape \\(3, 2\\), expected \\(2, 3\\)"):
        cm(np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError, match="input 'x' has dtype float64, expected float32"):
        cm(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="takes 1 input"):
        cm()
    with pytest.raises(TypeError, match="no input\\(s\\) \\['z'\\]"):
        cm(z=np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="numpy array"):
        cm([[1.0, 2.0, 3.0]] * 2)


def test_gather_index_out_of_range_is_reported():
    proto = make_model([helper.make_node("Gather", ["E", "ids"], ["y"], name="embed")],
                       {"ids": ([3], np.int64)}, {"y": [3, 4]},
                       {"E": np.arange(20, dtype=np.float32).reshape(5, 4)})
    cm = tc.compile_model(tc.from_onnx(proto))
    np.testing.assert_array_equal(cm(np.array([0, 4, -1])),
                                  np.arange(20, dtype=np.float32).reshape(5, 4)[[0, 4, -1]])
    with pytest.raises(ValueError, match="'embed'.*index 5 is out of range \\[-5, 5\\)"):
        cm(np.array([0, 5, 1]))


def test_huge_shapes_from_the_file_are_errors_not_allocations():
    big = np.array([1 << 20, 1 << 20, 1 << 20], np.int64)
    proto = make_model([helper.make_node("ConstantOfShape", ["s"], ["c"]),
                        helper.make_node("Add", ["x", "c"], ["y"])],
                       {"x": [1]}, {"y": [1]}, {"s": big})
    with pytest.raises(ModelError, match="more than"):
        tc.from_onnx(proto)
    proto = make_model([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": [1, 1, 1]},
                       {"y": [1, 1, 1]}, {"s": big})
    with pytest.raises(ModelError, match="more than"):
        tc.from_onnx(proto)
    proto = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": [4]}, {"y": [4]},
                       {"s": np.array([-2, -2], np.int64)})
    with pytest.raises(ModelError, match="cannot reshape"):
        tc.from_onnx(proto)
