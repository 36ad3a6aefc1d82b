"""Invalid GPU schedules are errors, not wrong programs: a loop nest binding one GPU axis twice, a
block axis nested in itself, a barrier some threads of a block would not reach. And the valid
neighbours of each stay valid: one thread axis in sibling loop nests of a kernel, a cooperative
fetch inside a thread loop, a shared-memory tiled matmul whose tiles do not divide its extents."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import BinOpKind, Const, Load, Var, binary
from tecomp.ir.loop import (
    Allocate,
    Barrier,
    Buffer,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Scope,
    Store,
    ThreadAxis,
    seq,
    stmts,
)
from tecomp.ir.traverse import free_vars
from tecomp.lowering.gpu_passes import GPUScheduleError, prepare_gpu_program
from tecomp.schedule.state import Annotation, ScheduleError
from tecomp.schedule.steps import AnnotationStep


def _scale(M=6, N=5):
    A = tc.placeholder((M, N), name="A")
    B = tc.compute((M, N), lambda i, j: A[i, j] * 2.0, name="B")
    return tc.ComputeDAG([A, B]), B


@pytest.mark.nodevice
@pytest.mark.parametrize("axis", ["threadIdx.x", "blockIdx.x", "threadIdx.y"])
def test_binding_two_loops_of_a_stage_to_one_axis_raises_at_bind(axis):
    dag, B = _scale()
    s = tc.Schedule(dag)
    i, j = s[B].axes
    s[B].bind(i, axis)
    with pytest.raises(ScheduleError, match=f"stage 'B' has loop 'i' bound to {axis} already; "
                                            f"loop 'j' cannot"):
        s[B].bind(j, axis)
    s[B].bind(i, axis)  # the same loop again is no error


@pytest.mark.parametrize("ann", [Annotation.THREAD_X, Annotation.BLOCK_X])
def test_double_binding_from_steps_raises_at_build(ann):
    """Steps applied without the bind call (a record, the search) fail at lowering, naming both
    loops and the axis, before any PTX exists."""
    dag, B = _scale()
    sid = tc.Schedule(dag)[B].index
    s = tc.Schedule(dag, [AnnotationStep(sid, 0, ann), AnnotationStep(sid, 1, ann)])
    msg = f"stage 'B': loops 'i' and 'j' are both bound to {ann.thread.value}"
    with pytest.raises(GPUScheduleError, match=msg):
        tc.lower(s)
    with pytest.raises(GPUScheduleError, match=msg):
        tc.build(dag, "cuda", schedule=s)


def test_two_vthread_loops_of_a_stage_stay_valid():
    dag, B = _scale(8, 8)
    s = tc.Schedule(dag)
    i, j = s[B].axes
    io, ii = s[B].split(i, factor=2)
    jo, ji = s[B].split(j, factor=2)
    s[B].reorder(io, jo, ii, ji)
    s[B].bind(io, "blockIdx.x")
    s[B].bind(jo, "threadIdx.x")
    s[B].bind(ii, "vthread")
    s[B].bind(ji, "vthread")
    a = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    np.testing.assert_allclose(tc.build(dag, "cuda", schedule=s).emulate(a), a * 2)


def _reversed_rows(rows, cols):
    """``y[i, j] = x[i, cols-1-j] * 2``: each thread reads another thread's element, through a
    shared copy of the block's row."""
    x = tc.placeholder((rows, cols), "float32", name="x")
    y = tc.compute((rows, cols), lambda i, j: x[i, cols - 1 - j] * 2.0, name="y")
    dag = tc.ComputeDAG([x, y])
    s = tc.Schedule(dag)
    XS = s.cache_read(x, "shared", [s[y]])
    i, j = s[y].axes
    s[y].bind(i, "blockIdx.x")
    s[y].bind(j, "threadIdx.x")
    s[XS].compute_at(s[y], i)  # at the block loop, beside the thread loop that reads it
    return dag, s, XS


def test_one_thread_axis_in_sibling_loop_nests_stays_valid():
    """The shared copy and the computation are sibling loop nests under one block loop, both bound
    to threadIdx.x, with a barrier between them."""
    dag, s, XS = _reversed_rows(6, 32)
    s[XS].bind(s[XS].axes[1], "threadIdx.x")
    kernel = tc.build(dag, "cuda", schedule=s)
    assert "bar.sync" in kernel.source()
    a = np.random.default_rng(1).random((6, 32), dtype=np.float32)
    np.testing.assert_allclose(kernel.emulate(a), a[:, ::-1] * 2)


def test_block_axis_nested_in_itself_raises():
    """A stage computed inside a blockIdx.x loop that binds blockIdx.x again would compute one
    element of its region per block (each block needs all of it)."""
    dag, s, XS = _reversed_rows(8, 4)
    s[XS].bind(s[XS].axes[1], "blockIdx.x")
    with pytest.raises(GPUScheduleError, match="binds blockIdx.x inside loop 'i' bound to it"):
        tc.build(dag, "cuda", schedule=s)


def _shared_matmul(M, N, K, order, local=True):
    """A TVM-style shared-memory tiled matmul: 8x8 threads per block, k tiles of 4 fetched
    cooperatively by threadIdx.x; ``order`` places the accumulator's loops around the k loops."""
    A = tc.placeholder((M, K), name="A")
    B = tc.placeholder((K, N), name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    dag = tc.ComputeDAG([A, B, C])
    s = tc.Schedule(dag)
    acc = s.cache_write(C, "local") if local else C
    AS = s.cache_read(A, "shared", [s[acc]])
    BS = s.cache_read(B, "shared", [s[acc]])
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=8)
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(io, jo, ii, ji)
    for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                       (ji, "threadIdx.x")):
        s[C].bind(loop, axis)
    if local:
        s[acc].compute_at(s[C], ji)
    (kk,) = s[acc].reduce_axes
    ko, ki = s[acc].split(kk, factor=4)
    if local:
        ci, cj = s[acc].axes
        s[acc].reorder(*[(ko, ki, ci, cj), (ci, cj, ko, ki), (ci, ko, cj, ki)][order])
    for X in (AS, BS):
        s[X].compute_at(s[acc], ko)
        _, fi = s[X].split(s[X].fuse(*s[X].axes), factor=8)
        s[X].bind(fi, "threadIdx.x")
    return dag, s


def _thread_dependent_barriers(func):
    """Barriers under a condition that reads a threadIdx-bound variable."""
    found = []

    def go(s, tvars, cond):
        if isinstance(s, Barrier) and cond:
            found.append(s)
        if isinstance(s, For) and s.thread is not None and s.thread.is_thread:
            tvars = tvars | {id(s.var)}
        if isinstance(s, IfThenElse):
            cond = cond or any(id(v) in tvars for v in free_vars(s.cond))
        for c in s.children():
            go(c, tvars, cond)
    go(func.body, frozenset(), False)
    return found


@pytest.mark.parametrize("shape,order,local", [((37, 29, 19), 0, True), ((37, 29, 19), 1, True),
                                               ((37, 29, 19), 2, True), ((37, 29, 19), 0, False),
                                               ((9, 17, 5), 1, True), ((16, 16, 8), 0, True)])
def test_shared_matmul_with_tail_tiles_emulates(shape, order, local):
    """The tail guards of the thread loops wrap only the stages' own stores: every thread reaches
    the barriers and takes its part of the fetches (which have their own guards)."""
    M, N, K = shape
    dag, s = _shared_matmul(M, N, K, order, local)
    kernel = tc.build(dag, "cuda", schedule=s)
    assert "bar.sync" in kernel.source()
    func, _ = prepare_gpu_program(tc.lower(s))
    assert any(isinstance(x, Barrier) for x in stmts(func.body))
    assert not _thread_dependent_barriers(func)
    rng = np.random.default_rng(2)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    np.testing.assert_allclose(kernel.emulate(a, b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.nodevice
def test_divisible_shared_matmul_has_no_guards():
    """Tiles that divide the extents: no guard at all, as before tail guards were moved."""
    dag, s = _shared_matmul(16, 16, 8, 0)
    func = tc.lower(s)
    assert not any(isinstance(x, IfThenElse) for x in stmts(func.body))


@pytest.mark.nodevice
@pytest.mark.parametrize("narrow", [False, True])
def test_barrier_some_threads_do_not_reach_is_an_error(narrow):
    """A shared write and its read under ``if tid < 5`` (or in a thread loop narrower than the
    block) would put the barrier between them where only some threads reach it."""
    I = dt.INDEX
    src = Buffer("src", (8,), dt.float32)
    dst = Buffer("dst", (8,), dt.float32)
    S = Buffer("S", (8,), dt.float32, Scope.SHARED)
    t, t2, b = Var("t"), Var("t2"), Var("b")
    body = seq(Store(S, (t,), Load(src, (t,))), Store(dst, (t,), Load(S, (Const(4, I) - t,))))
    if narrow:
        inner = For(t, Const(0, I), Const(5, I), ForKind.THREAD_BOUND, body, thread=ThreadAxis.THREAD_X)
        other = For(t2, Const(0, I), Const(8, I), ForKind.THREAD_BOUND,
                    Store(dst, (t2,), Load(src, (t2,))), thread=ThreadAxis.THREAD_X)
        kernel = seq(other, inner)
        match = "in loop 't' bound to 5 of the 8 threads of threadIdx.x"
    else:
        kernel = For(t, Const(0, I), Const(8, I), ForKind.THREAD_BOUND,
                     IfThenElse(binary(BinOpKind.LT, t, Const(5, I)), body),
                     thread=ThreadAxis.THREAD_X)
        match = r"under 'if \(t < 5\)'"
    kernel = For(b, Const(0, I), Const(1, I), ForKind.THREAD_BOUND, Allocate(S, kernel),
                 thread=ThreadAxis.BLOCK_X)
    func = PrimFunc("f", [src, dst], kernel, n_outputs=1)
    with pytest.raises(GPUScheduleError, match=f"barrier.*{match}"):
        prepare_gpu_program(func)
