"""The numpy loop-IR interpreter: CPU (serial and vectorized loops) and GPU lockstep lanes."""
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tecomp.codegen import interp
from tecomp.codegen.interp import InterpError, run
from tecomp.ir import dtype as dt
from tecomp.ir.evaluate import eval_np
from tecomp.ir.expr import BinOpKind, Const, Load, UnOpKind, Var, binary, cast, select, unary
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
    verify,
)
from tecomp.ir.traverse import substitute

F32, I32, I64 = dt.float32, dt.int32, dt.INDEX


def I(v):
    return Const(v, I64)


def loop(v, extent, body, begin=0, kind=ForKind.SERIAL):
    begin = I(begin) if isinstance(begin, int) else begin
    extent = I(extent) if isinstance(extent, int) else extent
    return For(v, begin, extent, kind, body)


def bind(v, extent, axis, body):
    return For(v, I(0), I(extent), ForKind.THREAD_BOUND, body, thread=axis)


def fn(name, params, body):
    f = PrimFunc(name, params, body)
    verify(f)
    return f


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def rand(rng, shape, t=np.float32):
    if np.issubdtype(t, np.integer):
        return rng.integers(-50, 50, size=shape).astype(t)
    return (rng.standard_normal(shape) + 0.1).astype(t)


@pytest.fixture(params=["vector", "serial"])
def mode(request, monkeypatch):
    """Run each CPU test with the vectorized-loop path enabled and with every loop serial."""
    if request.param == "serial":
        monkeypatch.setattr(interp, "VECTOR_MIN_TRIP", 1 << 62)
    return request.param


def same(a, b):
    """Bitwise-equal values (NaN equals NaN)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


# ----------------------------------------------------------------------------- CPU

def test_elementwise_ops_match_eval_np(rng, mode):
    n = 257
    X, Y, Z = Buffer("X", (n,), F32), Buffer("Y", (n,), F32), Buffer("K", (n,), I32)
    i = Var("i")
    x, y, z = Load(X, (i,)), Load(Y, (i,)), Load(Z, (i,))
    exprs = {
        "arith": x * y + x / y - 2.5 * x,
        "math": unary(UnOpKind.EXP, x) + unary(UnOpKind.SQRT, abs(y)) + unary(UnOpKind.TANH, x)
        + unary(UnOpKind.SIGMOID, y) + unary(UnOpKind.LOG, abs(x)),
        "minmax": binary(BinOpKind.MAX, binary(BinOpKind.MIN, x, y), -x),
        "cmp": select((x < y) & ~(z >= 3) | (z == 7), x, y),
        "cast": cast(cast(x * 100.0, I32), F32) + cast(z, F32) / cast(3, F32),
        "idiv": cast(z // (z % 5) + (z % -4) * 1000, F32),
        "wrap": cast(cast(z * 100000000, I32) + 2147483000, F32),
        "f16": cast(cast(x, dt.float16) * cast(y, dt.float16) + cast(1.0, dt.float16), F32),
    }
    bufs = {name: Buffer(name, (n,), F32) for name in exprs}
    body = seq(*(loop(i, n, Store(bufs[name], (i,), e)) for name, e in exprs.items()))
    f = fn("ew", [X, Y, Z] + list(bufs.values()), body)
    xa, ya, za = rand(rng, n), rand(rng, n), rand(rng, n, np.int32)
    za[:5] = [0, 5, -5, 7, 10]
    outs = {k: np.full(n, np.nan, np.float32) for k in exprs}
    run(f, [xa, ya, za] + list(outs.values()))
    env, data = {i: np.arange(n)}, {X: xa, Y: ya, Z: za}
    for name, e in exprs.items():
        ref = eval_np(e, env, data)
        assert same(outs[name], ref), name


def test_integer_semantics_floor_division_by_zero_and_wrapping(mode):
    n = 20
    A = Buffer("A", (n,), I32)
    B = Buffer("B", (n,), I32)
    Q, R, W = Buffer("Q", (n,), I32), Buffer("R", (n,), I32), Buffer("W", (n,), dt.int8)
    i = Var("i")
    a, b = Load(A, (i,)), Load(B, (i,))
    body = seq(loop(i, n, Store(Q, (i,), a // b)), loop(i, n, Store(R, (i,), a % b)),
               loop(i, n, Store(W, (i,), cast(a * 1000, dt.int8))))
    f = fn("ints", [A, B, Q, R, W], body)
    av = np.array([7, -7, 7, -7, 0, 5, -2147483648, 2147483647] + list(range(12)), np.int32)
    bv = np.array([2, 2, -2, -2, 3, 0, -1, 0] + [0, 1, -3] * 4, np.int32)
    q, r, w = (np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.int8))
    run(f, [av, bv, q, r, w])
    env, data = {i: np.arange(n)}, {A: av, B: bv}
    assert same(q, eval_np(a // b, env, data))
    assert same(r, eval_np(a % b, env, data))
    assert list(q[:6]) == [3, -4, -4, 3, 0, 0] and list(r[:6]) == [1, 1, -1, -1, 0, 0]
    assert same(w, (av.astype(np.int64) * 1000).astype(np.int32).astype(np.int8))


def test_float16_accumulates_in_float16(rng, mode):
    n = 300
    X, S = Buffer("X", (n,), dt.float16), Buffer("S", (1,), dt.float16)
    k = Var("k")
    z = I(0)
    body = seq(Store(S, (z,), Const(0.25, dt.float16)),
               loop(k, n, Store(S, (z,), Load(S, (z,)) + Load(X, (k,)) * Load(X, (k,)))))
    x = rand(rng, n, np.float16)
    s = np.zeros(1, np.float16)
    run(fn("h", [X, S], body), [x, s])
    ref = np.float16(0.25)
    for v in x:
        ref = np.float16(ref + v * v)
    assert s[0] == ref and s.dtype == np.float16


def _naive_matmul(n, m, kk):
    A, B, C = Buffer("A", (n, kk), F32), Buffer("B", (kk, m), F32), Buffer("C", (n, m), F32)
    i, j, k = Var("i"), Var("j"), Var("k")
    body = loop(i, n, loop(j, m, seq(
        Store(C, (i, j), Const(0.0, F32)),
        loop(k, kk, Store(C, (i, j), Load(C, (i, j)) + Load(A, (i, k)) * Load(B, (k, j)))))))
    return fn("matmul", [A, B, C], body)


def _sequential_matmul(a, b):
    """float32 accumulation over k in order, as the loop nest does it."""
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        c += a[:, k:k + 1] * b[k:k + 1, :]
    return c


def test_matmul_reduction_exact(rng, mode):
    # (speed is a benchmark, not a test: the interpreter runs this in well under a second)
    n = 64
    f = _naive_matmul(n, n, n)
    a, b = rand(rng, (n, n)), rand(rng, (n, n))
    c = np.full((n, n), np.nan, np.float32)
    run(f, [a, b, c])
    assert same(c, _sequential_matmul(a, b))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_reduction_with_loop_order_kij_vectorizes_map(rng, mode):
    """for i, k: for j: C[i,j] += A[i,k]*B[k,j] (the inner loop reads what it writes, same element)."""
    n = 40
    A, B, C = Buffer("A", (n, n), F32), Buffer("B", (n, n), F32), Buffer("C", (n, n), F32)
    i, j, k = Var("i"), Var("j"), Var("k")
    body = seq(loop(i, n, loop(j, n, Store(C, (i, j), Const(0.0, F32)))),
               loop(i, n, loop(k, n, loop(j, n, Store(C, (i, j), Load(C, (i, j))
                                                      + Load(A, (i, k)) * Load(B, (k, j)))))))
    a, b = rand(rng, (n, n)), rand(rng, (n, n))
    c = np.empty((n, n), np.float32)
    run(fn("mm2", [A, B, C], body), [a, b, c])
    assert same(c, _sequential_matmul(a, b))


def test_loop_carried_dependences_stay_sequential(rng, mode):
    n = 50
    A, R = Buffer("A", (n,), F32), Buffer("R", (n,), F32)
    i = Var("i")
    # prefix sum in place: A[i+1] = A[i+1] + A[i]
    prefix = loop(i, n - 1, Store(A, (i + 1,), Load(A, (i + 1,)) + Load(A, (i,))))
    # reverse in place (reads elements other iterations write)
    rev = loop(i, n, Store(R, (I(n - 1) - i,), Load(R, (i,))))
    a, r = rand(rng, n), rand(rng, n)
    ra, rr = a.copy(), r.copy()
    for t in range(n - 1):
        ra[t + 1] = ra[t + 1] + ra[t]
    for t in range(n):
        rr[n - 1 - t] = rr[t]
    run(fn("dep", [A, R], seq(prefix, rev)), [a, r])
    assert same(a, ra) and same(r, rr)


def test_nest_reduction_over_several_loops_with_guard(rng, mode):
    """A conv-like reduction over (c, r) with a padding guard: exact against the sequential order;
    rows whose every update is guarded off are never touched (their index is out of range)."""
    n, c, k = 30, 3, 5
    X, W = Buffer("X", (c, n), F32), Buffer("W", (c, k), F32)
    Y = Buffer("Y", (n,), F32)
    i, ci, r = Var("i"), Var("ci"), Var("r")
    pos = i + r - 2
    inside = (pos >= 0) & (pos < n)
    # i runs to n + 6: rows n.. have no valid tap once shifted, and would store out of range
    body = seq(loop(i, n, Store(Y, (i,), Const(0.5, F32))),
               loop(i, n + 6, loop(ci, c, loop(r, k, IfThenElse(inside & (i < n), Store(
                   Y, (i,), Load(Y, (i,)) + select(inside, Load(X, (ci, pos)), Const(0.0, F32))
                   * Load(W, (ci, r))))))))
    x, w = rand(rng, (c, n)), rand(rng, (c, k))
    y = np.zeros(n, np.float32)
    run(fn("conv1d", [X, W, Y], body), [x, w, y])
    ref = np.full(n, 0.5, np.float32)
    for ii in range(n):
        for cc in range(c):
            for rr in range(k):
                p = ii + rr - 2
                if 0 <= p < n:
                    ref[ii] = ref[ii] + x[cc, p] * w[cc, rr]
    assert same(y, ref)


@pytest.mark.parametrize("op", [BinOpKind.MAX, BinOpKind.MIN, BinOpKind.SUB, BinOpKind.MUL])
def test_nest_reductions_other_ops(rng, mode, op):
    n = 20
    A, S = Buffer("A", (4, n, n), F32), Buffer("S", (4,), F32)
    b, i, j = Var("b"), Var("i"), Var("j")
    body = loop(b, 4, loop(i, n, loop(j, n, IfThenElse(
        (i + j) % 3 != 0, Store(S, (b,), binary(op, Load(S, (b,)), Load(A, (b, i, j)) * 0.1 + 1.0))))))
    a = rand(rng, (4, n, n))
    a[0, 1, 1] = np.nan
    s0 = rand(rng, 4)
    s = s0.copy()
    run(fn("red", [A, S], body), [a, s])
    ref = s0.copy()
    fop = {BinOpKind.MAX: np.maximum, BinOpKind.MIN: np.minimum, BinOpKind.SUB: np.subtract,
           BinOpKind.MUL: np.multiply}[op]
    for bb in range(4):
        for ii in range(n):
            for jj in range(n):
                if (ii + jj) % 3:
                    ref[bb] = fop(ref[bb], a[bb, ii, jj] * np.float32(0.1) + np.float32(1))
    assert same(s, ref)


def test_non_injective_stores_keep_the_last_write(rng, mode):
    """A[i + j] = f(i, j) writes elements several times; B[i] = X[i, j] keeps the last j."""
    n = 12
    X, A, B = Buffer("X", (n, n), F32), Buffer("A", (2 * n,), F32), Buffer("B", (n,), F32)
    i, j = Var("i"), Var("j")
    body = seq(loop(i, n, loop(j, n, Store(A, (i + j,), Load(X, (i, j))))),
               loop(i, n, loop(j, n, Store(B, (i,), Load(X, (i, j)) * 2.0))))
    x = rand(rng, (n, n))
    a, b = np.zeros(2 * n, np.float32), np.zeros(n, np.float32)
    run(fn("last", [X, A, B], body), [x, a, b])
    ra = np.zeros(2 * n, np.float32)
    for ii in range(n):
        for jj in range(n):
            ra[ii + jj] = x[ii, jj]
    assert same(a, ra) and same(b, x[:, -1] * np.float32(2))


def test_csr_data_dependent_loop_bounds(rng, mode):
    rows, cols = 30, 25
    dense = rand(rng, (rows, cols))
    dense[rng.random((rows, cols)) < 0.6] = 0
    dense[3] = 0                               # an empty row
    dense[7] = rand(rng, cols) + 5             # a full row (>= VECTOR_MIN_TRIP entries)
    indptr = np.zeros(rows + 1, np.int32)
    indptr[1:] = np.cumsum((dense != 0).sum(1))
    indices = np.nonzero(dense)[1].astype(np.int32)
    data = dense[dense != 0].astype(np.float32)
    nnz = len(data)
    P, J, V = Buffer("indptr", (rows + 1,), I32), Buffer("indices", (nnz,), I32), Buffer("data", (nnz,), F32)
    X, Y = Buffer("x", (cols,), F32), Buffer("y", (rows,), F32)
    i, r = Var("i"), Var("r")
    lo, hi = cast(Load(P, (i,)), I64), cast(Load(P, (i + 1,)), I64)
    body = loop(i, rows, seq(
        Store(Y, (i,), Const(0.0, F32)),
        loop(r, hi - lo, Store(Y, (i,), Load(Y, (i,)) + Load(V, (r,)) * Load(X, (cast(Load(J, (r,)), I64),))),
             begin=lo)))
    x = rand(rng, cols)
    y = np.full(rows, np.nan, np.float32)
    run(fn("spmv", [P, J, V, X, Y], body), [indptr, indices, data, x, y])
    ref = np.zeros(rows, np.float32)
    for row in range(rows):
        for t in range(indptr[row], indptr[row + 1]):
            ref[row] = ref[row] + data[t] * x[indices[t]]
    assert same(y, ref) and y[3] == 0


def test_negative_extent_means_no_iterations(mode):
    A, N = Buffer("A", (4,), F32), Buffer("N", (1,), I64)
    i = Var("i")
    body = loop(i, Load(N, (I(0),)), Store(A, (i + 100,), Const(1.0, F32)), begin=5)
    a = np.zeros(4, np.float32)
    run(fn("neg", [A, N], body), [a, np.array([-3])])
    assert not a.any()


def test_if_then_else_and_local_buffer(rng, mode):
    n = 33
    X, Y = Buffer("X", (n,), F32), Buffer("Y", (n,), F32)
    T = Buffer("T", (2,), F32, Scope.LOCAL)
    i = Var("i")
    x = Load(X, (i,))
    body = loop(i, n, Allocate(T, seq(
        IfThenElse(x > 0.0, Store(T, (I(0),), x * 2.0), Store(T, (I(0),), -x)),
        IfThenElse(i % 3 == 0, Store(T, (I(1),), Const(1.0, F32)), Store(T, (I(1),), Const(0.5, F32))),
        Store(Y, (i,), Load(T, (I(0),)) + Load(T, (I(1),))))))
    xa = rand(rng, n)
    y = np.zeros(n, np.float32)
    run(fn("ite", [X, Y], body), [xa, y])
    ref = (np.where(xa > 0, xa * np.float32(2), -xa)
           + np.where(np.arange(n) % 3 == 0, 1, 0.5).astype(np.float32))
    assert same(y, ref)


def test_guarded_conditional_store_in_vectorizable_loop(rng, mode):
    n = 100
    X, Y = Buffer("X", (n,), F32), Buffer("Y", (n,), F32)
    io, ii = Var("io"), Var("ii")
    idx = io * 32 + ii
    body = loop(io, 4, loop(ii, 32, IfThenElse(idx < n, Store(Y, (idx,), Load(X, (idx,)) + 1.0))))
    xa = rand(rng, n)
    y = np.zeros(n, np.float32)
    run(fn("guard", [X, Y], body), [xa, y])
    assert same(y, xa + np.float32(1))


def test_lazy_select_guards_out_of_range_reads(rng, mode):
    n = 40
    X, Y = Buffer("X", (n,), F32), Buffer("Y", (n,), F32)
    i = Var("i")
    # reads X[i - 4] and X[i + 4] only where in range: negative indices must not wrap, and the
    # untaken branch must not fault
    v = select(i >= 4, Load(X, (i - 4,)), Const(-1.0, F32)) + \
        select(i + 4 < n, Load(X, (i + 4,)), Const(-2.0, F32))
    body = loop(i, n, Store(Y, (i,), v))
    xa = rand(rng, n)
    y = np.zeros(n, np.float32)
    run(fn("lazy", [X, Y], body), [xa, y])
    idx = np.arange(n)
    ref = (np.where(idx >= 4, xa[np.clip(idx - 4, 0, n - 1)], -1)
           + np.where(idx + 4 < n, xa[np.clip(idx + 4, 0, n - 1)], -2)).astype(np.float32)
    assert same(y, ref)


@pytest.mark.parametrize("case", ["read_high", "read_negative", "write_high", "write_negative",
                                  "data_index"])
def test_out_of_bounds_raises_index_error_naming_buffer(case, mode):
    n = 20
    A, B, P = Buffer("Ain", (n,), F32), Buffer("Bout", (n,), F32), Buffer("ptr", (n,), I32)
    i = Var("i")
    one = Const(1.0, F32)
    store, name = {
        "read_high": (Store(B, (i,), Load(A, (i + 1,))), "Ain"),
        "read_negative": (Store(B, (i,), Load(A, (i - 1,))), "Ain"),
        "write_high": (Store(B, (i + 1,), one), "Bout"),
        "write_negative": (Store(B, (i - 1,), one), "Bout"),
        "data_index": (Store(B, (i,), Load(A, (cast(Load(P, (i,)), I64),))), "Ain"),
    }[case]
    f = fn("oob", [A, B, P], loop(i, n, store))
    ptr = np.arange(n, dtype=np.int32)
    ptr[7] = -1
    b = np.zeros(n, np.float32)
    with pytest.raises(IndexError, match=name):
        run(f, [np.ones(n, np.float32), b, ptr])


def test_allocated_float_buffers_start_as_nan():
    T, Y = Buffer("T", (4,), F32, Scope.LOCAL), Buffer("Y", (4,), F32)
    i = Var("i")
    y = np.zeros(4, np.float32)
    run(fn("nan", [Y], Allocate(T, loop(i, 4, Store(Y, (i,), Load(T, (i,)))))), [y])
    assert np.isnan(y).all()


def test_deep_loop_nest_beyond_python_block_limit():
    depth = 24
    Y = Buffer("Y", (1,), I64)
    vs = [Var(f"i{d}") for d in range(depth)]
    body = Store(Y, (I(0),), Load(Y, (I(0),)) + sum(vs[1:], vs[0]))
    for d, v in reversed(list(enumerate(vs))):
        body = loop(v, 2 if d < 5 else 1, body)  # 32 iterations in all
    y = np.zeros(1, np.int64)
    run(fn("deep", [Y], body), [y])
    assert y[0] == 5 * 16


def test_deep_expression_tree():
    Y = Buffer("Y", (4,), F32)
    i = Var("i")
    e = Const(0.0, F32)
    for t in range(150):
        e = e * 0.5 + cast(i + t, F32)
    y = np.zeros(4, np.float32)
    run(fn("deepexpr", [Y], loop(i, 4, Store(Y, (i,), e))), [y])
    assert same(y, eval_np(e, {i: np.arange(4)}, {}))


def test_argument_checks():
    f = _naive_matmul(2, 3, 4)
    with pytest.raises(ValueError, match="3 arrays"):
        run(f, [np.zeros((2, 4), np.float32)])
    with pytest.raises(ValueError, match="'B' must be float32"):
        run(f, [np.zeros((2, 4), np.float32), np.zeros((4, 3)), np.zeros((2, 3), np.float32)])
    same_mem = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="share memory"):
        run(_naive_matmul(4, 4, 4), [same_mem, np.zeros((4, 4), np.float32), same_mem])


# ----------------------------------------------------------------------------- GPU (lockstep lanes)

def _gpu_matmul(n, tile, barriers=(True, True)):
    """C = A @ B with blocks of tile x tile threads, tiles of A and B staged in shared memory."""
    A, B, C = Buffer("A", (n, n), F32), Buffer("B", (n, n), F32), Buffer("C", (n, n), F32)
    As = Buffer("As", (tile, tile), F32, Scope.SHARED)
    Bs = Buffer("Bs", (tile, tile), F32, Scope.SHARED)
    acc = Buffer("acc", (1,), F32, Scope.LOCAL)
    bx, by, tx, ty, ko, ki = (Var(x) for x in ("bx", "by", "tx", "ty", "ko", "ki"))
    row, col = by * tile + ty, bx * tile + tx
    z = I(0)
    inner = seq(
        Store(acc, (z,), Const(0.0, F32)),
        loop(ko, n // tile, seq(
            Store(As, (ty, tx), Load(A, (row, ko * tile + tx))),
            Store(Bs, (ty, tx), Load(B, (ko * tile + ty, col))),
            Barrier() if barriers[0] else None,
            loop(ki, tile, Store(acc, (z,), Load(acc, (z,)) + Load(As, (ty, ki)) * Load(Bs, (ki, tx)))),
            Barrier() if barriers[1] else None)),
        Store(C, (row, col), Load(acc, (z,))))
    threads = bind(ty, tile, ThreadAxis.THREAD_Y, bind(tx, tile, ThreadAxis.THREAD_X, Allocate(acc, inner)))
    body = bind(by, n // tile, ThreadAxis.BLOCK_Y, bind(bx, n // tile, ThreadAxis.BLOCK_X,
                                                         Allocate(As, Allocate(Bs, threads))))
    return fn("gpu_matmul", [A, B, C], body)


def test_gpu_shared_memory_matmul(rng):
    n = 64
    f = _gpu_matmul(n, 16)
    assert f.is_gpu
    a, b = rand(rng, (n, n)), rand(rng, (n, n))
    c = np.full((n, n), np.nan, np.float32)
    t0 = time.perf_counter()
    run(f, [a, b, c])
    assert time.perf_counter() - t0 < 2.0
    assert same(c, _sequential_matmul(a, b))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("barriers,hazard", [((False, True), "reads an element that thread"),
                                             ((True, False), "writes an element that thread")])
def test_gpu_missing_barrier_is_a_shared_memory_race(rng, barriers, hazard):
    """Lockstep execution would hide a missing barrier; the race check reports it."""
    n = 16
    f = _gpu_matmul(n, 4, barriers)
    a, b = rand(rng, (n, n)), rand(rng, (n, n))
    c = np.zeros((n, n), np.float32)
    with pytest.raises(InterpError, match=f"shared memory race on 'As'.*{hazard}"):
        run(f, [a, b, c])
    run(f, [a, b, c], check_races=False)  # lockstep gives the sequential result anyway
    assert same(c, _sequential_matmul(a, b))


def test_gpu_race_check_allows_own_and_redundant_writes(rng):
    A = Buffer("A", (64,), F32)
    S = Buffer("S", (65,), F32, scope=Scope.SHARED)
    b, t = Var("b"), Var("t")
    body = bind(b, 1, ThreadAxis.BLOCK_X, Allocate(S, seq(
        Store(S, (I(64),), Const(2.0, F32)),               # every thread writes S[64] (same value)
        bind(t, 64, ThreadAxis.THREAD_X, seq(
            Store(S, (t,), Load(A, (t,))),
            Store(S, (t,), Load(S, (t,)) * Load(S, (I(64),))),  # own element, redundant element
            Store(A, (t,), Load(S, (t,))))))))
    a = rand(rng, 64)
    ref = a * np.float32(2)
    run(fn("own", [A], body), [a])
    assert same(a, ref)


def test_gpu_guard_for_non_divisible_extent(rng):
    n, threads = 100, 32
    X, Y = Buffer("X", (n,), F32), Buffer("Y", (n,), F32)
    b, t = Var("b"), Var("t")
    gi = b * threads + t
    store = Store(Y, (gi,), Load(X, (gi,)) * 3.0)
    guarded = bind(b, 4, ThreadAxis.BLOCK_X, bind(t, threads, ThreadAxis.THREAD_X, IfThenElse(gi < n, store)))
    xa = rand(rng, n)
    y = np.zeros(n, np.float32)
    run(fn("guarded", [X, Y], guarded), [xa, y])
    assert same(y, xa * np.float32(3))
    unguarded = bind(b, 4, ThreadAxis.BLOCK_X, bind(t, threads, ThreadAxis.THREAD_X, store))
    with pytest.raises(IndexError, match="'[XY]'"):
        run(fn("unguarded", [X, Y], unguarded), [xa, y])


def test_gpu_reverse_through_shared_memory_and_lane_select(rng):
    """The loop-IR test's kernel: S[t] = A[t]; sync; A[t] = S[63 - t], plus a lazy lane select."""
    A = Buffer("A", (64,), F32)
    S = Buffer("S", (64,), F32, scope=Scope.SHARED)
    t = Var("t")
    guarded = select(t > 0, Load(S, (t - 1,)), Const(0.0, F32))  # S[-1] never read
    body = bind(t, 64, ThreadAxis.THREAD_X, Allocate(S, seq(
        Store(S, (t,), Load(A, (t,))), Barrier(), Store(A, (t,), Load(S, (I(63) - t,)) + guarded))))
    a = rand(rng, 64)
    ref = a[::-1] + np.concatenate(([0], a[:-1])).astype(np.float32)
    run(fn("rev", [A], body), [a])
    assert same(a, ref)


def test_gpu_divergent_barrier_is_an_error():
    A = Buffer("A", (64,), F32)
    S = Buffer("S", (64,), F32, scope=Scope.SHARED)
    b, t = Var("b"), Var("t")
    div = bind(b, 2, ThreadAxis.BLOCK_X, bind(t, 32, ThreadAxis.THREAD_X, Allocate(S, IfThenElse(
        t < 16, seq(Store(S, (t,), Const(1.0, F32)), Barrier())))))
    with pytest.raises(InterpError, match="barrier in divergent control flow"):
        run(fn("div", [A], div), [np.zeros(64, np.float32)])
    # a condition uniform over each block is fine
    ok = bind(b, 2, ThreadAxis.BLOCK_X, bind(t, 32, ThreadAxis.THREAD_X, Allocate(S, IfThenElse(
        b < 1, seq(Store(S, (t,), cast(t, F32)), Barrier(), Store(A, (t,), Load(S, (I(31) - t,))))))))
    a = np.zeros(64, np.float32)
    run(fn("ok", [A], ok), [a])
    assert same(a, np.concatenate((np.arange(31, -1, -1), np.zeros(32))).astype(np.float32))


def test_gpu_csr_rows_per_thread_with_varying_trip_counts(rng):
    rows, cols = 70, 9
    dense = rand(rng, (rows, cols))
    dense[rng.random((rows, cols)) < 0.5] = 0
    indptr = np.zeros(rows + 1, np.int32)
    indptr[1:] = np.cumsum((dense != 0).sum(1))
    indices = np.nonzero(dense)[1].astype(np.int32)
    data = dense[dense != 0].astype(np.float32)
    nnz = len(data)
    P, J, V = Buffer("indptr", (rows + 1,), I32), Buffer("indices", (nnz,), I32), Buffer("data", (nnz,), F32)
    X, Y = Buffer("x", (cols,), F32), Buffer("y", (rows,), F32)
    acc = Buffer("acc", (1,), F32, Scope.LOCAL)
    b, t, r = Var("b"), Var("t"), Var("r")
    i = b * 32 + t
    lo, hi = cast(Load(P, (i,)), I64), cast(Load(P, (i + 1,)), I64)
    z = I(0)
    update = Store(acc, (z,), Load(acc, (z,)) + Load(V, (r,)) * Load(X, (cast(Load(J, (r,)), I64),)))
    row = Allocate(acc, seq(Store(acc, (z,), Const(0.0, F32)), loop(r, hi - lo, update, begin=lo),
                            Store(Y, (i,), Load(acc, (z,)))))
    body = bind(b, 3, ThreadAxis.BLOCK_X, bind(t, 32, ThreadAxis.THREAD_X, IfThenElse(i < rows, row)))
    x = rand(rng, cols)
    y = np.full(rows, np.nan, np.float32)
    run(fn("gpu_spmv", [P, J, V, X, Y], body), [indptr, indices, data, x, y])
    ref = np.zeros(rows, np.float32)
    for row in range(rows):
        for k in range(indptr[row], indptr[row + 1]):
            ref[row] = ref[row] + data[k] * x[indices[k]]
    assert same(y, ref)


def test_gpu_sibling_thread_loops_with_different_extents_and_vthread(rng):
    """Two stages in one kernel bind threadIdx.x with extents 8 and 5 (lanes 5..7 idle in the
    second); a vthread loop runs serially."""
    A, B = Buffer("A", (16,), F32), Buffer("B", (10,), F32)
    S = Buffer("S", (16,), F32, Scope.SHARED)
    blk, t1, t2, vt = Var("blk"), Var("t1"), Var("t2"), Var("vt")
    body = bind(blk, 1, ThreadAxis.BLOCK_X, Allocate(S, seq(
        bind(t1, 8, ThreadAxis.THREAD_X, seq(Store(S, (t1 * 2,), Load(A, (t1 * 2,)) * 2.0),
                                            Store(S, (t1 * 2 + 1,), Load(A, (t1 * 2 + 1,)) * 2.0))),
        Barrier(),
        bind(t2, 5, ThreadAxis.THREAD_X, For(vt, I(0), I(2), ForKind.THREAD_BOUND,
                                            Store(B, (t2 * 2 + vt,), Load(S, (t2 * 2 + vt,)) + 1.0),
                                            thread=ThreadAxis.VTHREAD)))))
    a = rand(rng, 16)
    bb = np.zeros(10, np.float32)
    run(fn("sib", [A, B], body), [a, bb])
    assert same(bb, a[:10] * np.float32(2) + np.float32(1))


def test_gpu_out_of_bounds_local_and_shared(rng):
    S = Buffer("S", (8,), F32, Scope.SHARED)
    L = Buffer("L", (2,), F32, Scope.LOCAL)
    A = Buffer("A", (8,), F32)
    t = Var("t")
    shared_oob = bind(t, 8, ThreadAxis.THREAD_X, Allocate(S, seq(
        Store(S, (t,), Const(1.0, F32)), Barrier(), Store(A, (t,), Load(S, (t + 1,))))))
    with pytest.raises(IndexError, match="'S'"):
        run(fn("s_oob", [A], shared_oob), [np.zeros(8, np.float32)])
    local_oob = bind(t, 8, ThreadAxis.THREAD_X, Allocate(L, Store(L, (t % 3,), Const(1.0, F32))))
    with pytest.raises(IndexError, match="'L'"):
        run(fn("l_oob", [A], local_oob), [np.zeros(8, np.float32)])


# ----------------------------------------------------------------------------- random expressions

_FUNCS = [UnOpKind.EXP, UnOpKind.LOG, UnOpKind.SQRT, UnOpKind.TANH, UnOpKind.SIGMOID, UnOpKind.ABS]
_OPS = [BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.MIN, BinOpKind.MAX,
        BinOpKind.FLOORDIV, BinOpKind.MOD, BinOpKind.DIV]


def _expr_strategy(X, K, i, n):
    def leaves(t):
        if t is F32:
            return st.one_of(st.floats(-4, 4, width=32).map(lambda v: Const(v, F32)),
                             st.just(Load(X, (i,))),
                             st.just(select(i >= 3, Load(X, (i - 3,)), Const(0.5, F32))))
        return st.one_of(st.integers(-9, 9).map(lambda v: Const(v, I32)), st.just(Load(K, (i,))),
                         st.just(cast(i, I32)))

    def build(t, depth):
        if depth == 0:
            return leaves(t)
        sub = build(t, depth - 1)
        ops = [o for o in _OPS if not (o is BinOpKind.DIV and t is I32)]
        other = I32 if t is F32 else F32
        return st.one_of(
            leaves(t),
            st.tuples(st.sampled_from(ops), sub, sub).map(lambda x: binary(x[0], x[1], x[2])),
            st.tuples(build(other, depth - 1)).map(lambda x: cast(x[0], t)),
            st.tuples(conds(depth - 1), sub, sub).map(lambda x: select(*x)),
            sub.map(lambda x: -x),
            st.tuples(st.sampled_from(_FUNCS if t is F32 else [UnOpKind.ABS]), sub)
            .map(lambda x: unary(*x)),
        )

    def conds(depth):
        leaf = st.tuples(st.sampled_from([BinOpKind.LT, BinOpKind.EQ, BinOpKind.GE, BinOpKind.NE]),
                         build(F32, max(depth - 1, 0)), build(F32, max(depth - 1, 0)))
        leaf_i = st.tuples(st.sampled_from([BinOpKind.LT, BinOpKind.EQ, BinOpKind.GE]),
                           build(I32, max(depth - 1, 0)), build(I32, max(depth - 1, 0)))
        base = st.one_of(leaf, leaf_i).map(lambda x: binary(*x))
        return st.one_of(base, st.tuples(st.sampled_from([BinOpKind.AND, BinOpKind.OR]), base, base)
                         .map(lambda x: binary(*x)), base.map(lambda c: ~c))
    return st.one_of(build(F32, 3), build(I32, 3))


_N = 24
_X, _K = Buffer("X", (_N,), F32), Buffer("K", (_N,), I32)
_i = Var("i")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expr_strategy(_X, _K, _i, _N))
def test_random_expressions_cpu_and_gpu_agree_with_eval_np(e):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(_N) * 3).astype(np.float32)
    k = rng.integers(-20, 20, _N).astype(np.int32)
    k[::5] = 0
    ref = np.broadcast_to(eval_np(e, {_i: np.arange(_N)}, {_X: x, _K: k}), (_N,))
    out_t = e.dtype
    Y = Buffer("Y", (_N,), out_t)
    cpu = fn("cpu", [_X, _K, Y], loop(_i, _N, Store(Y, (_i,), e)))
    b, t = Var("b"), Var("t")
    gi = b * 8 + t
    ge = substitute(e, {_i: gi})
    guarded = IfThenElse(gi < _N, Store(Y, (gi,), ge))
    gpu = fn("gpu", [_X, _K, Y], bind(b, 4, ThreadAxis.BLOCK_X, bind(t, 8, ThreadAxis.THREAD_X, guarded)))
    for f, serial in ((cpu, False), (cpu, True), (gpu, False)):
        y = np.zeros(_N, out_t.np)
        with pytest.MonkeyPatch.context() as mp:
            if serial:
                mp.setattr(interp, "VECTOR_MIN_TRIP", 1 << 62)
            run(f, [x, k, y])
        assert same(y, ref), (f.name, serial, e)


def test_gpu_two_kernels_lane_varying_loop_bounds_and_local_arrays(rng):
    """Kernel 1: each thread fills a private array with a thread-dependent loop start and indexes it
    with a thread-dependent index; kernel 2 (other launch shape) reads kernel 1's global result,
    with a per-thread trip count."""
    n = 24
    X = Buffer("X", (n * 4,), F32)
    T = Buffer("T", (n,), F32)        # global intermediate, allocated by the host code
    Y = Buffer("Y", (n,), F32)
    L = Buffer("L", (4,), F32, Scope.LOCAL)
    b, t, r, j = Var("b"), Var("t"), Var("r"), Var("j")
    gi = b * 8 + t
    k1 = bind(b, 3, ThreadAxis.BLOCK_X, bind(t, 8, ThreadAxis.THREAD_X, Allocate(L, seq(
        loop(r, 4, Store(L, (r - gi * 4,), Load(X, (r,))), begin=gi * 4),   # lane-varying begin
        Store(T, (gi,), Load(L, (gi % 4,)) + Load(L, ((gi + 1) % 4,)))))))
    b2, t2 = Var("b2"), Var("t2")
    acc = Buffer("acc", (1,), F32, Scope.LOCAL)
    z = I(0)
    k2 = bind(b2, 2, ThreadAxis.BLOCK_X, bind(t2, 16, ThreadAxis.THREAD_X, IfThenElse(
        b2 * 16 + t2 < n, Allocate(acc, seq(
            Store(acc, (z,), Const(0.0, F32)),
            loop(j, (b2 * 16 + t2) % 5, Store(acc, (z,), Load(acc, (z,)) + Load(T, (j,)))),  # varying extent
            Store(Y, (b2 * 16 + t2,), Load(acc, (z,))))))))
    f = fn("two", [X, Y], Allocate(T, seq(k1, k2)))
    x = rand(rng, n * 4)
    y = np.full(n, np.nan, np.float32)
    run(f, [x, y])
    xs = x.reshape(n, 4)
    tref = np.array([xs[g, g % 4] + xs[g, (g + 1) % 4] for g in range(n)], np.float32)
    ref = np.zeros(n, np.float32)
    for g in range(n):
        for jj in range(g % 5):
            ref[g] = ref[g] + tref[jj]
    assert same(y, ref)


def test_gpu_block_level_code_and_bool_int8_buffers(rng):
    """Statements between the block and thread loops run once per thread (redundantly)."""
    F = Buffer("F", (4,), dt.bool_)
    C = Buffer("C", (4, 8), dt.int8)
    b, t = Var("b"), Var("t")
    body = bind(b, 4, ThreadAxis.BLOCK_X, seq(
        Store(F, (b,), b % 2 == 0),
        bind(t, 8, ThreadAxis.THREAD_X, Store(C, (b, t), select(
            Load(F, (b,)), cast(b * 100 + t * 10, dt.int8), cast(-t, dt.int8))))))
    f_out, c = np.zeros(4, bool), np.zeros((4, 8), np.int8)
    run(fn("blocklevel", [F, C], body), [f_out, c])
    bb, tt = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
    ref = np.where(bb % 2 == 0, (bb * 100 + tt * 10).astype(np.int8), (-tt).astype(np.int8))
    assert list(f_out) == [True, False, True, False] and same(c, ref.astype(np.int8))


def test_unbound_variable_and_unallocated_buffer_are_reported():
    A, T = Buffer("A", (4,), F32), Buffer("T", (4,), F32)
    i = Var("i")
    with pytest.raises(InterpError, match="'i' is used outside"):
        run(PrimFunc("f", [A], Store(A, (i,), Const(1.0, F32))), [np.zeros(4, np.float32)])
    with pytest.raises(InterpError, match="'T' is neither"):
        run(PrimFunc("f", [A], loop(i, 4, Store(A, (i,), Load(T, (i,))))), [np.zeros(4, np.float32)])


def test_large_elementwise_is_vectorized():
    n = 512
    A, B = Buffer("A", (n, n), F32), Buffer("B", (n, n), F32)
    i, j = Var("i"), Var("j")
    a = np.linspace(-3, 3, n * n, dtype=np.float32).reshape(n, n)
    body = loop(i, n, loop(j, n, Store(B, (j, i), unary(UnOpKind.TANH, Load(A, (i, j))) * 2.0)))
    b = np.zeros((n, n), np.float32)
    t0 = time.perf_counter()
    run(fn("big", [A, B], body), [a, b])
    assert time.perf_counter() - t0 < 1.0
    assert same(b, (np.tanh(a) * np.float32(2)).T)


def test_gpu_thread_extent_must_be_constant():
    A, N = Buffer("A", (8,), F32), Buffer("N", (1,), I64)
    t = Var("t")
    body = For(t, I(0), Load(N, (I(0),)), ForKind.THREAD_BOUND, Store(A, (t,), Const(1.0, F32)),
               thread=ThreadAxis.THREAD_X)
    with pytest.raises(InterpError, match="constant extent"):
        run(fn("dyn", [A, N], body), [np.zeros(8, np.float32), np.array([8])])
