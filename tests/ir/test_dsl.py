"""The DSL: construction, promotion and construction-time errors."""
import numpy as np
import pytest

import tecomp.ir as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import BinOp, Cast, Const, Reduce, TensorRead

pytestmark = pytest.mark.nodevice  # no compiled code: the fast tier


def test_compute_names_axes_after_lambda_parameters():
    A = tc.placeholder((3, 4), name="A")
    B = tc.compute((3, 4), lambda row, col: A[row, col] * 2.0, name="B")
    assert [a.name for a in B.op.axes] == ["row", "col"]
    assert B.dtype is dt.float32 and B.shape == (3, 4)


@pytest.mark.parametrize("t, scalar, expect", [
    ("float32", 2.0, "float32"), ("float32", 2, "float32"), ("int8", 1, "int8"),
    ("int32", 0.5, "float64"), ("float16", 3.0, "float16"), ("bool", 1, "int64"),
])
def test_python_scalars_are_weak(t, scalar, expect):
    A = tc.placeholder((2,), t, name="A")
    assert (A[0] * scalar).dtype.name == expect
    assert (scalar * A[0]).dtype.name == expect


@pytest.mark.parametrize("a, b", [("float16", "float32"), ("int8", "int32"), ("int32", "float32"),
                                  ("int64", "float32"), ("float32", "float64"), ("bool", "int8")])
def test_typed_promotion_follows_numpy(a, b):
    A = tc.placeholder((2,), a, name="A")
    B = tc.placeholder((2,), b, name="B")
    e = A[0] + B[0]
    assert e.dtype.np == np.result_type(np.dtype(a), np.dtype(b))
    assert isinstance(e, BinOp) and e.a.dtype is e.b.dtype  # casts were inserted


def test_true_division_of_ints_is_float64_and_comparisons_are_bool():
    A = tc.placeholder((2,), "int32", name="A")
    assert (A[0] / A[1]).dtype is dt.float64
    assert (A[0] // 2).dtype is dt.int32
    assert (A[0] < 3).dtype is dt.bool_
    assert ((A[0] < 3) & (A[1] > 0)).dtype is dt.bool_


def test_weak_int_scalar_overflow_is_an_error():
    A = tc.placeholder((2,), "int8", name="A")
    with pytest.raises(OverflowError, match="int8"):
        A[0] + 1000


def test_expressions_have_no_truth_value():
    A = tc.placeholder((2,), name="A")
    with pytest.raises(TypeError, match="truth value"):
        if A[0] > 1.0:
            pass


def test_intrinsics_types():
    A = tc.placeholder((2,), "int32", name="A")
    F = tc.placeholder((2,), "float16", name="F")
    assert tc.exp(A[0]).dtype is dt.float64
    assert tc.sqrt(F[0]).dtype is dt.float16
    assert tc.abs(A[0]).dtype is dt.int32
    assert tc.cast(F[0], "int8").dtype is dt.int8
    assert tc.if_then_else(A[0] > 0, F[0], 1.0).dtype is dt.float16
    assert tc.maximum(A[0], 2.5).dtype is dt.float64
    with pytest.raises(TypeError, match="bool"):
        tc.if_then_else(A[0], 1.0, 2.0)


def test_reductions_over_one_or_several_axes():
    A = tc.placeholder((4, 5, 6), name="A")
    k = tc.reduce_axis(5, name="k")
    l = tc.reduce_axis((1, 6), name="l")
    S = tc.compute((4,), lambda i: tc.sum(A[i, k, l], axis=[k, l]), name="S")
    assert isinstance(S.op.body, Reduce) and len(S.op.reduce_axes) == 2
    M = tc.compute((4,), lambda i: tc.max(A[i, k, 0], axis=k), name="M")
    assert M.op.body.identity.value == -np.inf


def test_reduce_axis_with_bounds_loaded_from_a_tensor():
    ptr = tc.placeholder((5,), "int32", name="indptr")
    val = tc.placeholder((9,), name="val")

    def row_sum(i):
        r = tc.reduce_axis((ptr[i], ptr[i + 1]), name="r")
        return tc.sum(val[r], axis=r)
    S = tc.compute((4,), row_sum, name="S")
    (r,) = S.op.reduce_axes
    assert isinstance(r.begin, Cast) and isinstance(r.begin.a, TensorRead)


@pytest.mark.parametrize("build, match", [
    (lambda A, k: A[4, 0], "constant index 4 at position 0"),
    (lambda A, k: A[0, -1], "constant index -1"),
    (lambda A, k: A[0], "rank 2"),
    (lambda A, k: A[0, 0, 0], "rank 2"),
    (lambda A, k: A[0, 1.5], "integers"),
])
def test_bad_indices_name_tensor_and_index(build, match):
    A = tc.placeholder((4, 5), name="Amat")
    with pytest.raises((IndexError, TypeError), match=match) as e:
        build(A, None)
    assert "Amat" in str(e.value)


def test_out_of_range_affine_index_is_caught_at_construction():
    A = tc.placeholder((4,), name="A")
    with pytest.raises(IndexError, match="tensor 'A'.*size 4"):
        tc.compute((4,), lambda i: A[i + 1], name="B")
    # the same read guarded by a condition is legal (padding)
    tc.compute((4,), lambda i: tc.if_then_else(i < 3, A[i + 1], 0.0), name="B")


def test_reducing_over_unused_axis_is_an_error():
    A = tc.placeholder((4, 5), name="A")
    k = tc.reduce_axis(5, name="kk")
    with pytest.raises(ValueError, match="'kk'.*does not use"):
        tc.compute((4,), lambda i: tc.sum(A[i, 0], axis=k))


def test_unreduced_reduce_axis_is_an_error():
    A = tc.placeholder((4, 5), name="A")
    k = tc.reduce_axis(5, name="k")
    with pytest.raises(ValueError, match="reduce axis 'k' is used but not reduced"):
        tc.compute((4,), lambda i: A[i, k])


def test_mixing_axes_of_two_computes_is_an_error():
    A = tc.placeholder((4,), name="A")
    B = tc.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="'i' belongs to another compute"):
        tc.compute((4,), lambda j: A[B.op.axes[0]], name="C")


def test_nested_reduction_is_an_error():
    A = tc.placeholder((4, 5), name="A")
    k = tc.reduce_axis(5, name="k")
    with pytest.raises(ValueError, match="whole body"):
        tc.compute((4,), lambda i: tc.sum(A[i, k], axis=k) + 1.0)


def test_lambda_arity_must_match_shape():
    A = tc.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="2 dimensions"):
        tc.compute((4, 4), lambda i: A[i], name="B")


def test_bad_shapes_and_dtypes():
    with pytest.raises(ValueError, match="negative"):
        tc.placeholder((3, -1), name="X")
    with pytest.raises(TypeError, match="static ints"):
        tc.placeholder((3, 2.5), name="X")
    with pytest.raises(TypeError, match="unsupported dtype"):
        tc.placeholder((3,), "complex64", name="X")


def test_constants_round_to_their_type():
    c = Const(0.1, dt.float32)
    assert c.value == float(np.float32(0.1))


def test_a_reduce_axis_bounded_by_another_nests_inside_it_in_any_listed_order():
    X = tc.placeholder((5, 6), name="X")
    r1 = tc.reduce_axis(5, name="r1")
    r2 = tc.reduce_axis((0, r1 + 1), name="r2")
    Y = tc.compute((1,), lambda z: tc.sum(X[r1, r2], axis=[r2, r1]), name="Y")
    assert [a.name for a in Y.op.reduce_axes] == ["r1", "r2"]
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    import tecomp
    k = tecomp.build(tc.ComputeDAG([X, Y]))
    np.testing.assert_allclose(k(x), [np.tril(x[:, :5]).sum()], rtol=1e-5)
