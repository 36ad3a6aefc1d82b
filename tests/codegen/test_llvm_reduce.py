"""Serial reduction loops emitted as vector code (tecomp/codegen/llvm_reduce.py): the same results
as numpy for sums, minima and maxima of every length around the register width, with NaN, inf,
a split loop carrying a partial value in, gathers and conditions in the operand."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen.llvm_reduce import reduction_form
from tecomp.codegen.vector_plan import register_bits
from tecomp.ir.loop import For, stmts

RNG = np.random.default_rng(17)
LENGTHS = [3, 4, 15, 16, 17, 64, 100, 129, 513]


def _row_reduce(kind, m, n, dtype="float32"):
    A = tc.placeholder((m, n), dtype, name="A")
    k = tc.reduce_axis(n, name="k")
    Y = tc.compute((m,), lambda i: kind(A[i, k], axis=k), name="Y")
    dag = tc.ComputeDAG([A, Y])
    return dag, tc.Schedule(dag)


def _data(dtype, shape):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-1000, 1000, shape).astype(dtype)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kind,ref", [(tc.sum, np.sum), (tc.min, np.min), (tc.max, np.max)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_row_reductions_match_numpy(n, kind, ref, dtype):
    dag, s = _row_reduce(kind, 5, n, dtype)
    x = _data(dtype, (5, n))
    got = tc.build(dag, schedule=s)(x)
    want = ref(x.astype(np.float64) if dtype != "int32" else x, axis=1)
    if dtype == "int32" or kind is not tc.sum:
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   atol=1e-5)


def test_the_loop_is_vector_code():
    dag, s = _row_reduce(tc.min, 8, 512)
    src = tc.build(dag, schedule=s).source()
    lanes = register_bits() // 32  # a full register of the host: 16 with AVX-512, 8 with AVX2
    assert f"<{lanes} x float>" in src and "shufflevector" in src


@pytest.mark.parametrize("kind,ref", [(tc.min, np.min), (tc.max, np.max), (tc.sum, np.sum)])
def test_nan_and_inf_propagate(kind, ref):
    n = 200
    x = RNG.standard_normal((6, n)).astype("float32")
    x[0, 0] = np.nan          # in the first chunk
    x[1, 137] = np.nan        # in the looped chunks
    x[2, n - 1] = np.nan      # in the remainder
    x[3, 5] = np.inf
    x[4, 77] = -np.inf
    x[5, :] = np.inf
    dag, s = _row_reduce(kind, 6, n)
    got = tc.build(dag, schedule=s)(x)
    with np.errstate(invalid="ignore"):
        want = ref(x, axis=1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5)


@pytest.mark.parametrize("factor", [16, 40, 100])
def test_an_inner_piece_combines_with_the_value_carried_in(factor):
    A = tc.placeholder((7, 300), name="A")
    k = tc.reduce_axis(300, name="k")
    Y = tc.compute((7,), lambda i: tc.max(A[i, k], axis=k), name="Y")
    Z = tc.compute((7,), lambda i: tc.sum(A[i, k] * 0.5, axis=k), name="Z")
    dag = tc.ComputeDAG([A, Y, Z])
    s = tc.Schedule(dag)
    for t in (Y, Z):
        s[t].split(s[t].axes[-1], factor=factor)
    x = _data("float32", (7, 300))
    y, z = tc.build(dag, schedule=s)(x)
    np.testing.assert_array_equal(y, x.max(1))
    np.testing.assert_allclose(z, 0.5 * x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_gathered_and_conditional_operands():
    m, n = 9, 133
    A = tc.placeholder((m, 50), name="A")
    idx = tc.placeholder((n,), "int32", name="idx")
    k = tc.reduce_axis(n, name="k")
    Y = tc.compute((m,), lambda i: tc.sum(tc.if_then_else(k % 3 == 0, A[i, idx[k]], 1.0),
                                          axis=k), name="Y")
    dag = tc.ComputeDAG([A, idx, Y])
    a = _data("float32", (m, 50))
    ix = RNG.integers(0, 50, n).astype("int32")
    got = tc.build(dag, schedule=tc.Schedule(dag))(a, ix)
    want = np.where(np.arange(n) % 3 == 0, a[:, ix].astype(np.float64), 1.0).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_only_single_element_reductions_take_the_vector_form():
    dag, s = _row_reduce(tc.sum, 4, 64)
    loops = [st for st in stmts(tc.lower(s).body) if isinstance(st, For)]
    forms = {lp.var.name: reduction_form(lp) is not None for lp in loops}
    assert forms == {"i": False, "k": True}
