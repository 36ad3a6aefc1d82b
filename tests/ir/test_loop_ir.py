"""Loop IR: the printer and verify()."""
import pytest

import tecomp.ir as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var
from tecomp.ir.loop import (
    Allocate,
    Barrier,
    Buffer,
    For,
    ForKind,
    IfThenElse,
    LoopIRError,
    PrimFunc,
    Scope,
    Store,
    ThreadAxis,
    seq,
    verify,
)
from tecomp.lowering import lower

pytestmark = pytest.mark.nodevice  # no compiled code: the fast tier


def _buf(name, shape=(8,), t=dt.float32, scope=Scope.GLOBAL):
    return Buffer(name, shape, t, scope)


def test_lowered_default_schedule_prints_like_c_and_verifies():
    A = tc.placeholder((4, 6), name="A")
    B = tc.placeholder((6, 5), name="B")
    k = tc.reduce_axis(6, name="k")
    C = tc.compute((4, 5), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = tc.compute((4, 5), lambda i, j: tc.maximum(C[i, j], 0.0), name="D")
    f = lower(tc.ComputeDAG([A, B, D]))
    verify(f)
    text = str(f)
    assert "global float32 C[4][5];" in text
    assert "for (k = 0; k < 6; ++k) {" in text
    assert "C[i, j] = (C[i, j] + (A[i, k] * B[k, j]));" in text
    assert text.startswith("void ") and "float32 D[4][5]" in text


def test_data_dependent_bounds_lower_to_loads():
    ptr = tc.placeholder((5,), "int32", name="indptr")
    val = tc.placeholder((9,), name="val")

    def f(i):
        r = tc.reduce_axis((ptr[i], ptr[i + 1]), name="r")
        return tc.sum(val[r], axis=r)
    S = tc.compute((4,), f, name="S")
    fn = lower(tc.ComputeDAG([ptr, val, S]))
    verify(fn)
    text = str(fn)
    assert "r < ((int64)indptr[(i + 1)] - (int64)indptr[i])" in text
    assert "val[((int64)indptr[i] + r)]" in text


def test_verify_rejects_unbound_variable():
    A = _buf("A")
    i = Var("i")
    with pytest.raises(LoopIRError, match="'i' is used outside"):
        verify(PrimFunc("f", [A], Store(A, (i,), Const(1.0, dt.float32))))


def test_verify_rejects_unallocated_buffer_and_rank_mismatch():
    A, T = _buf("A"), _buf("T")
    i = Var("i")
    body = For(i, Const(0, dt.INDEX), Const(8, dt.INDEX), ForKind.SERIAL,
               Store(A, (i,), Load(T, (i,))))
    with pytest.raises(LoopIRError, match="'T' is neither a parameter nor allocated"):
        verify(PrimFunc("f", [A], body))
    verify(PrimFunc("f", [A], Allocate(T, body)))
    bad = For(i, Const(0, dt.INDEX), Const(8, dt.INDEX), ForKind.SERIAL,
              Store(A, (i, i), Const(1.0, dt.float32)))
    with pytest.raises(LoopIRError, match="rank 1"):
        verify(PrimFunc("f", [A], bad))


def test_verify_rejects_type_mismatch_and_nonconstant_vector_loop():
    A = _buf("A")
    N = _buf("N", (1,), dt.int64)
    i = Var("i")
    with pytest.raises(LoopIRError, match="type float64"):
        verify(PrimFunc("f", [A], Store(A, (Const(0, dt.INDEX),), Const(1.0, dt.float64))))
    loop = For(i, Const(0, dt.INDEX), Load(N, (Const(0, dt.INDEX),)), ForKind.VECTORIZED,
               Store(A, (i,), Const(1.0, dt.float32)))
    with pytest.raises(LoopIRError, match="constant extent"):
        verify(PrimFunc("f", [A, N], loop))


def test_verify_thread_binding_and_barrier_rules():
    A = _buf("A", (64,))
    S = _buf("S", (64,), scope=Scope.SHARED)
    t, v = Var("t"), Var("v")
    ok = For(t, Const(0, dt.INDEX), Const(64, dt.INDEX), ForKind.THREAD_BOUND,
             Allocate(S, seq(Store(S, (t,), Load(A, (t,))), Barrier(),
                             Store(A, (t,), Load(S, (63 - t,))))), thread=ThreadAxis.THREAD_X)
    fn = PrimFunc("g", [A], ok)
    verify(fn)
    assert fn.is_gpu and "__syncthreads();" in str(fn) and "threadIdx.x" in str(fn)
    missing = For(t, Const(0, dt.INDEX), Const(64, dt.INDEX), ForKind.THREAD_BOUND,
                  Store(A, (t,), Const(0.0, dt.float32)))
    with pytest.raises(LoopIRError, match="thread axis"):
        verify(PrimFunc("g", [A], missing))
    vec = For(v, Const(0, dt.INDEX), Const(4, dt.INDEX), ForKind.VECTORIZED, Barrier())
    with pytest.raises(LoopIRError, match="barrier inside a vectorized loop"):
        verify(PrimFunc("g", [A], vec))


def test_verify_rejects_double_binding_and_bad_if():
    A = _buf("A")
    i = Var("i")
    inner = For(i, Const(0, dt.INDEX), Const(2, dt.INDEX), ForKind.SERIAL,
                Store(A, (i,), Const(1.0, dt.float32)))
    outer = For(i, Const(0, dt.INDEX), Const(2, dt.INDEX), ForKind.SERIAL, inner)
    with pytest.raises(LoopIRError, match="bound twice"):
        verify(PrimFunc("f", [A], outer))
    with pytest.raises(LoopIRError, match="condition has type"):
        verify(PrimFunc("f", [A], IfThenElse(Const(1, dt.INDEX), Store(A, (Const(0, dt.INDEX),),
                                                                       Const(1.0, dt.float32)))))
