"""Vectorized loops as LLVM vector code (tecomp.codegen.llvm_vector): the vector code computes
exactly what the scalar loop computes (numpy semantics), for hand-built loop IR and schedules."""
import re

import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen.llvm_cpu import compile_cpu
from tecomp.codegen.llvm_vector import register_bits, vector_plan
from tecomp.codegen.vector_plan import interval_condition, pinned_shuffle_bits
from tecomp.ir import dtype as dt
from tecomp.ir.evaluate import eval_np
from tecomp.ir.expr import BinOpKind, Const, Load, UnOpKind, Var, binary, cast, select, unary
from tecomp.ir.loop import Allocate, Buffer, For, ForKind, IfThenElse, PrimFunc, Scope, Store, seq
from tecomp.testing import workloads as W

RNG = np.random.default_rng(7)
V, S = ForKind.VECTORIZED, ForKind.SERIAL
FLOATS = [dt.float16, dt.float32, dt.float64]
INTS = [dt.int8, dt.int32, dt.int64]
ALL = FLOATS + INTS + [dt.bool_]


def c64(v):
    return Const(v, dt.INDEX)


def loop(var, extent, body, kind=S, begin=0):
    return For(var, c64(begin), c64(extent), kind, body)


def rand(t, n, lo=-50, hi=50, nonzero=False):
    if t.is_bool:
        return RNG.random(n) < 0.5
    if t.is_float:
        x = RNG.uniform(lo, hi, n).astype(t.np)
    else:
        x = RNG.integers(max(lo, np.iinfo(t.np).min), min(hi, np.iinfo(t.np).max), n, dtype=t.np)
    if nonzero:
        x[x == 0] = 1
    return x


def garbage(t, shape):
    return np.full(shape, 77, t.np) if not t.is_bool else np.ones(shape, bool)


def vector_vs_scalar(make, inputs, outs, vector=True):
    """Compile ``make(kind)`` with the marked loop vectorized and serial, run both on the same
    inputs, and check that the results are identical; return the vectorized kernel's outputs."""
    results = []
    for kind in (V, S):
        fn = make(kind)
        k = compile_cpu(fn)
        arrays = [garbage(b.dtype, b.shape) for b in outs]
        k.run([a.copy() for a in inputs] + arrays)
        results.append((k, arrays))
    (kv, got), (_, want) = results
    assert (" x " in kv.source_unoptimized) == vector, "vector code emitted" if vector else "fallback"
    for g, w, b in zip(got, want, outs):
        np.testing.assert_array_equal(g, w, err_msg=b.name)
    return got, kv


def elementwise(make_exprs, inputs, n, begin=0, rtol=0.0):
    """``out_k[i] = exprs[k]`` over a loop of extent ``n``; checked against the serial loop
    (bitwise) and numpy (eval_np, to ``rtol``). Returns the outputs and the references."""
    i = Var("i")
    bufs = [Buffer(f"in{k}", (n + begin,), dt.dtype(a.dtype)) for k, a in enumerate(inputs)]
    exprs = make_exprs(*[Load(b, (i,)) for b in bufs])
    outs = [Buffer(f"out{k}", (n + begin,), e.dtype) for k, e in enumerate(exprs)]

    def make(kind):
        body = loop(i, n, seq(*[Store(o, (i,), e) for o, e in zip(outs, exprs)]), kind, begin)
        return PrimFunc("ew", bufs + outs, body, n_outputs=len(outs))
    got, _ = vector_vs_scalar(make, inputs, outs)
    env, data = {i: np.arange(n + begin)}, dict(zip(bufs, inputs))
    refs = [np.broadcast_to(eval_np(e, env, data), (n + begin,)) for e in exprs]
    for g, r in zip(got, refs):
        if rtol:
            np.testing.assert_allclose(g[begin:].astype(float), r[begin:].astype(float), rtol=rtol)
        else:
            np.testing.assert_array_equal(g[begin:], r[begin:])
    return got, refs


# ----------------------------------------------------------------------------- expressions

_ARITH = [BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.MIN, BinOpKind.MAX,
          BinOpKind.LT, BinOpKind.NE, BinOpKind.EQ, BinOpKind.GE, BinOpKind.FLOORDIV, BinOpKind.MOD]


@pytest.mark.parametrize("n", [1, 3, 8, 16, 37, 64])
@pytest.mark.parametrize("t", ALL, ids=str)
def test_elementwise_every_dtype_and_extent(t, n):
    if t.is_bool:
        ops = [BinOpKind.AND, BinOpKind.OR, BinOpKind.LT, BinOpKind.EQ, BinOpKind.MIN]

        def extra(x, y):
            return [unary(UnOpKind.NOT, x), select(x, y, unary(UnOpKind.NOT, y))]
    else:
        ops = _ARITH + ([BinOpKind.DIV] if t.is_float else [])

        def extra(x, y):
            return [unary(UnOpKind.NEG, x), unary(UnOpKind.ABS, y), select(x < y, x, y * 2)]
    a, b = rand(t, n + 2, nonzero=True), rand(t, n + 2, nonzero=True)
    a[:2] = b[:2]
    # begin 2: the loop starts off the start of the buffers
    elementwise(lambda x, y: [binary(op, x, y) for op in ops] + extra(x, y), [a, b], n, begin=2)


@pytest.mark.parametrize("t", INTS, ids=str)
def test_int_floordiv_mod_by_zero_and_minus_one_lanewise(t):
    n = 37
    a, b = rand(t, n, -100, 100), rand(t, n, -3, 4)
    b[:6] = [0, -1, 0, -1, 3, -3]
    a[:6] = [5, np.iinfo(t.np).min, -5, 7, -7, 7]
    (fd, md), _ = elementwise(lambda x, y: [x // y, x % y], [a, b], n)
    assert fd[0] == 0 and md[0] == 0 and fd[1] == np.iinfo(t.np).min and list(fd[4:6]) == [-3, -3]


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_float_special_values_and_math(t):
    n = 19
    a, b = rand(t, n, -20, 20), rand(t, n, -6, 6, nonzero=True)
    a[:8] = np.array([5.0, -5.0, np.inf, np.nan, -0.0, 7.5, 3.0, 0.0], t.np)
    b[:8] = np.array([0.0, 2.0, 2.0, 2.0, 2.0, 2.5, np.inf, 0.0], t.np)
    elementwise(lambda x, y: [x // y, x % y, binary(BinOpKind.MAX, x, y), x != y], [a, b], n)
    pos = np.abs(rand(t, n, 0.1, 4))
    x = rand(t, n, -4, 4)
    elementwise(lambda x, p: [unary(UnOpKind.EXP, x), unary(UnOpKind.TANH, x),
                              unary(UnOpKind.SIGMOID, x), unary(UnOpKind.LOG, p),
                              unary(UnOpKind.SQRT, p)], [x, pos], n,
                rtol={dt.float16: 2e-3, dt.float32: 2e-6, dt.float64: 1e-14}[t])


@pytest.mark.parametrize("src", ALL, ids=str)
def test_casts_from(src):
    n = 37
    a = rand(src, n, -120, 120)
    if src.is_float:
        a[:3] = [0.0, -0.75, 0.5]
    if src is dt.int64:
        a[3] = 2 ** 40 + 3
    elementwise(lambda x: [cast(x, d) for d in ALL if d is not src], [a], n)


# ----------------------------------------------------------------------------- memory

def test_gather_scatter_and_strides():
    n, m = 37, 120
    A = Buffer("A", (m,), dt.float32)
    idx = Buffer("idx", (n,), dt.int32)
    O = Buffer("O", (m,), dt.float32)
    P = Buffer("P", (n,), dt.float32)
    i = Var("i")

    def make(kind):
        return PrimFunc("g", [A, idx, O, P], loop(i, n, seq(
            Store(O, (2 * i + 1,), Load(A, (3 * i,)) + 1.0),               # strided: gather, scatter
            Store(O, (2 * i,), Load(A, (cast(Load(idx, (i,)), dt.INDEX),))),  # data-dependent gather
            Store(P, ((n - 1) - i,), Load(A, (i,)) * Load(A, (c64(5),)))), kind))  # reversed, broadcast
    a, ix = rand(dt.float32, m), RNG.integers(0, m, n).astype(np.int32)
    (o, p), k = vector_vs_scalar(make, [a, ix], [O, P])
    assert "llvm.masked.gather" in k.source_unoptimized and "llvm.masked.scatter" in k.source_unoptimized
    np.testing.assert_array_equal(o[1:2 * n:2], a[0:3 * n:3] + np.float32(1))
    np.testing.assert_array_equal(o[0:2 * n:2], a[ix])
    np.testing.assert_array_equal(p[::-1], a[:n] * a[5])


@pytest.mark.parametrize("t", [dt.float32, dt.float64, dt.int8])
@pytest.mark.parametrize("st", [2, 3, 4, 5])
def test_small_strides_are_wide_loads(t, st):
    """Lanes 2-4 elements apart are wide loads and a shuffle, wider ones a gather; the
    buffer ends at the last lane's element, a remainder chunk and a lane mask (odd lanes only)
    included: the result is the scalar loop's."""
    n = 37
    m = (n - 1) * st + 1
    A = Buffer("A", (m,), t)
    O, Q = Buffer("O", (n,), t), Buffer("Q", (n,), t)
    i = Var("i")

    def make(kind):
        x = Load(A, (st * i,))
        return PrimFunc("strided", [A, O, Q], loop(i, n, seq(
            Store(O, (i,), x),
            IfThenElse(binary(BinOpKind.MOD, i, c64(2)) > 0, Store(Q, (i,), Load(A, (st * i,))),
                       Store(Q, (i,), Const(0, t)))), kind))
    a = rand(t, m)
    (o, q), k = vector_vs_scalar(make, [a], [O, Q])
    src = k.source_unoptimized
    assert ("llvm.masked.gather" in src) == (st > 4)
    np.testing.assert_array_equal(o, a[::st])
    np.testing.assert_array_equal(q, np.where(np.arange(n) % 2 == 1, a[::st], 0).astype(t.np))


def _before_guard_page(a: np.ndarray):
    """A copy of ``a`` whose last byte is the last byte before an unreadable page (a read past
    its end faults), and the mapping that holds it."""
    import ctypes
    import mmap
    page = mmap.PAGESIZE
    size = -(-a.nbytes // page) * page + page
    mm = mmap.mmap(-1, size)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mprotect(ctypes.c_void_p(base + size - page), page, 0) == 0  # PROT_NONE
    out = np.frombuffer(mm, a.dtype, a.size, size - page - a.nbytes)
    out[...] = a
    return out, mm


@pytest.mark.parametrize("t", [dt.float32, dt.float64, dt.int8])
@pytest.mark.parametrize("st", [2, 3, 4])
@pytest.mark.parametrize("n", [64, 64 + 3])  # full chunks only (the last one ends the buffer), and
@pytest.mark.parametrize("shuffle", [None, 128])  # a remainder; shuffles of the host's width or of
def test_strided_loads_of_full_chunks_stay_inside_the_buffer(t, st, n, shuffle):  # Zen 1's
    """A chunk with every lane active reads its strided lanes with plain loads of the span
    between its first and last lane's elements (no masked load); with the buffer ending at the
    last lane's element, right before an unreadable page, nothing past it is read. The same
    with the chunk built from 128-bit pieces (as on a CPU whose shuffles are that wide)."""
    m = (n - 1) * st + 1
    A = Buffer("A", (m,), t)
    O = Buffer("O", (n,), t)
    i = Var("i")
    func = PrimFunc("strided", [A, O], loop(i, n, Store(O, (i,), Load(A, (st * i,))), V))
    if shuffle is None:
        k = compile_cpu(func)
    else:
        with pinned_shuffle_bits(shuffle):
            k = compile_cpu(func)
        if register_bits() > shuffle:  # pieces of 128 bits, concatenated
            assert re.search(rf"load <{shuffle // t.bits} x ", k.source_unoptimized)
    assert " x " in k.source_unoptimized
    assert "llvm.masked.load" not in k.source_unoptimized
    a, mm = _before_guard_page(rand(t, m))
    o = garbage(t, (n,))
    k.run([a, o])
    np.testing.assert_array_equal(o, a[::st])
    del a
    mm.close()


def test_fused_pixels_split_by_division_are_one_stride():
    """``A[v // 7, v % 7]`` over a vectorized ``v`` (a loop of fused pixels ``y@x`` indexing
    rows and columns) is ``A`` at ``v``: vector loads and stores, no gather or scatter."""
    A, O = Buffer("A", (7, 7), dt.float32), Buffer("O", (7, 7), dt.float32)
    v = Var("v")
    yx = (binary(BinOpKind.FLOORDIV, v, c64(7)), binary(BinOpKind.MOD, v, c64(7)))

    def make(kind):
        return PrimFunc("fused", [A, O], loop(v, 49, Store(O, yx, Load(A, yx) * 2.0), kind))
    a = rand(dt.float32, (7, 7))
    (o,), k = vector_vs_scalar(make, [a], [O])
    src = k.source_unoptimized
    assert re.search(r"load <\d+ x float>", src) and re.search(r"store <\d+ x float>", src)
    assert "masked.gather" not in src and "masked.scatter" not in src
    np.testing.assert_array_equal(o, a * np.float32(2))


def test_lane_masks_branches_and_guarded_loads():
    """Lane-dependent if/else (masks), a lane-invariant if (branch), a lazy select whose arm would
    read far out of range, a lane-invariant load under a mask, and a select with an invariant
    condition whose arms load."""
    n, m = 37, 40
    A = Buffer("A", (m,), dt.float32)
    F = Buffer("F", (4,), dt.int32)
    O, Q = Buffer("O", (n,), dt.float32), Buffer("Q", (n,), dt.int32)
    i, r = Var("i"), Var("r")
    far = i + select(i > 30, c64(1 << 40), c64(0))

    def make(kind):
        x = Load(A, (i,))
        body = seq(
            IfThenElse(x > 0.0, Store(O, (i,), x * 2.0), Store(O, (i,), select(i < 31, Load(A, (far,)),
                                                                              Const(-1.0, dt.float32)))),
            IfThenElse(i < 3, Store(Q, (i,), Load(F, (c64(0),)) + 100)),  # F[0] only if a lane runs
            IfThenElse(Load(F, (c64(1),)) > 0, Store(Q, (i,), Load(Q, (i,)) + 1)),
            Store(O, (i,), Load(O, (i,)) + select(Load(F, (c64(2),)) > 0, Load(A, (i + 1,)),
                                                  Load(A, (i + 2,)))))
        return PrimFunc("masks", [A, F, O, Q], loop(r, 1, loop(i, n, body, kind)))
    a, f = rand(dt.float32, m), np.array([5, 1, -1, 0], np.int32)
    (o, q), k = vector_vs_scalar(make, [a, f], [O, Q])
    src = k.source_unoptimized
    assert "llvm.masked.store" in src and "any.lane" in src and "vsel.t" in src
    ref = np.where(a[:n] > 0, a[:n] * 2, np.where(np.arange(n) < 31, a[:n], -1)) + a[2:n + 2]
    np.testing.assert_array_equal(o, ref.astype(np.float32))
    np.testing.assert_array_equal(q[:3], [106, 106, 106])


def test_interval_conditions_run_whole_chunks_without_masks():
    """A padding copy (a select whose condition is a conjunction of affine comparisons of the
    lane) and a guarded tail (an if on such a condition) test the chunk's first and last lane in
    scalar and run chunks that lie inside without masks; chunks that straddle an edge keep the
    masked path. Outer loop variables move the edges across chunk boundaries; results equal the
    serial loop's bit for bit."""
    n, m = 45, 80
    A = Buffer("A", (m,), dt.float32)
    O, P = Buffer("O", (4, n), dt.float32), Buffer("P", (4, n), dt.float32)
    i, r = Var("i"), Var("r")
    col = i * 2 + r * 7 - 9  # reads A at stride 2, from before 0 to past the end

    def make(kind):
        inside = binary(BinOpKind.AND, col >= 0, col < m)
        body = seq(
            Store(O, (r, i), select(inside, Load(A, (col,)), Const(0.0, dt.float32))),
            IfThenElse(i + r * 11 < 52, Store(P, (r, i), Load(A, (i + r * 7,)) + 1.0),
                       Store(P, (r, i), Const(-1.0, dt.float32))))
        return PrimFunc("pad", [A, O, P], loop(r, 4, loop(i, n, body, kind)))
    a = rand(dt.float32, m)
    (o, p), k = vector_vs_scalar(make, [a], [O, P])
    rr, ii = np.meshgrid(np.arange(4), np.arange(n), indexing="ij")
    c = ii * 2 + rr * 7 - 9
    np.testing.assert_array_equal(o, np.where((c >= 0) & (c < m), a[np.clip(c, 0, m - 1)], 0))
    np.testing.assert_array_equal(p, np.where(ii + rr * 11 < 52, a[np.clip(ii + rr * 7, 0, m - 1)]
                                              + 1, -1))
    src = k.source_unoptimized
    assert "vsel.t" in src and "llvm.masked.load" in src  # both paths are there


def test_interval_condition_analysis():
    i, r = Var("i"), Var("r")
    assert interval_condition(binary(BinOpKind.AND, i * 2 + r >= 1, i - r < 9), i)
    assert interval_condition(i * -3 + 4 == r, i)
    assert not interval_condition(i != r, i)  # two intervals
    assert not interval_condition(binary(BinOpKind.OR, i < 2, i > 9), i)
    assert not interval_condition(i % 4 < 2, i)  # not affine in the lane
    F = Buffer("F", (4,), dt.int64)
    assert not interval_condition(Load(F, (c64(0),)) < i, i)  # loads stay masked


def test_inner_loop_is_a_scalar_loop_of_vectors():
    """acc[j] += A[i, k] * B[k, j] vectorized over j with k inside, and an inner loop under a mask
    whose bounds load (sparse rows)."""
    M, K, N = 5, 7, 21
    A, B = Buffer("A", (M, K), dt.float32), Buffer("B", (K, N), dt.float32)
    L = Buffer("L", (2,), dt.int64)
    C = Buffer("C", (M, N), dt.float32)
    i, j, k = Var("i"), Var("j"), Var("k")

    def make(kind):
        acc = Store(C, (i, j), Load(C, (i, j)) + Load(A, (i, k)) * Load(B, (k, j)))
        body = seq(Store(C, (i, j), Const(0.0, dt.float32)),
                   IfThenElse(j < 19, For(k, Load(L, (c64(0),)), Load(L, (c64(1),)), S, acc)))
        return PrimFunc("mm", [A, B, L, C], loop(i, M, loop(j, N, body, kind)))
    a, b = rand(dt.float32, M * K, -1, 1).reshape(M, K), rand(dt.float32, K * N, -1, 1).reshape(K, N)
    (c,), kv = vector_vs_scalar(make, [a, b, np.array([1, 5])], [C])
    ref = a[:, 1:6].astype(np.float64) @ b[1:6].astype(np.float64)
    ref[:, 19:] = 0
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_plans_and_fallbacks_keep_serial_semantics():
    n = 32
    A, B = Buffer("A", (2 * n + 2,), dt.float32), Buffer("B", (2 * n + 2,), dt.float32)
    i = Var("i")
    cases = {  # body -> vectorizable
        "reduction into one element": (Store(B, (c64(0),), Load(B, (c64(0),)) + Load(A, (i,))), False),
        "lanes overlap": (Store(B, (i + 1,), Load(B, (i,)) * 2.0 + Load(A, (i,))), False),
        "data-dependent store": (Store(B, (cast(Load(A, (i,)), dt.INDEX) % 3,), Load(A, (i,))), False),
        "allocation inside": (Allocate(Buffer("t", (1,), dt.float32, Scope.LOCAL),
                                       Store(B, (i,), Load(A, (i,)))), False),
        "disjoint offsets": (Store(B, (2 * i,), Load(B, (2 * i + 1,)) + 1.0), True),
        "far apart": (Store(B, (i,), Load(B, (i + n,)) + 1.0), True),
    }
    for name, (body, ok) in cases.items():
        lanes, why = vector_plan(loop(i, n, body, V))
        assert (lanes is not None) == ok, (name, why)
        a, b0 = rand(dt.float32, 2 * n + 2, -3, 3), rand(dt.float32, 2 * n + 2, 0, 2)
        ks = [compile_cpu(PrimFunc("f", [A, B], loop(i, n, body, kind))) for kind in (V, S)]
        outs = [b0.copy(), b0.copy()]
        for k_, o in zip(ks, outs):
            k_.run([a, o])
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=name)
    assert vector_plan(loop(i, 8, cases["lanes overlap"][0], V))[0] is None
    assert vector_plan(loop(i, n, Store(B, (i,), Load(B, (i + n,))), V))[0] is not None
    assert vector_plan(loop(i, n + 1, Store(B, (i,), Load(B, (i + n,))), V))[0] is None


def test_width_follows_the_register_and_the_widest_element():
    i = Var("i")
    bits = register_bits()
    assert bits in (128, 256, 512)
    for t in (dt.float32, dt.float64, dt.int8):
        X = Buffer("X", (300,), t)
        assert vector_plan(loop(i, 300, Store(X, (i,), Load(X, (i,))), V))[0] == bits // t.bits
        assert vector_plan(loop(i, 3, Store(X, (i,), Load(X, (i,))), V))[0] == 3


def test_float32_extent_16_uses_vector_registers():
    A, B = Buffer("A", (16,), dt.float32), Buffer("B", (16,), dt.float32)
    i = Var("i")
    k = compile_cpu(PrimFunc("v16", [A, B], loop(i, 16, Store(B, (i,), Load(A, (i,)) * 3.0 + 1.0), V)))
    lanes = min(16, register_bits() // 32)  # 16 with AVX-512, 8 (two chunks) with AVX2
    assert f"<{lanes} x float>" in k.source_unoptimized
    asm = k.assembly()
    assert re.search(r"%[zy]mm\d+", asm), asm
    assert not re.search(r"\bmovss|vmovss", asm)  # no scalar element loads or stores


# ----------------------------------------------------------------------------- schedules

def _check_schedule(wl, s, emulate=True, tol=1e-4):
    k = tc.build(wl.dag, schedule=s)
    inputs = wl.make_inputs(np.random.default_rng(0))
    ref = wl.reference(inputs)[0]
    np.testing.assert_allclose(k(*inputs), ref, rtol=tol, atol=tol)
    if emulate:
        np.testing.assert_allclose(k.emulate(*inputs), ref, rtol=tol, atol=tol)
    return k


def _matmul_microkernel(M, N, K, ti, tj, kf=4):
    wl = W.matmul(M, N, K)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    CC = s.cache_write(C, "local")
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=ti)
    jo, ji = s[C].split(j, factor=tj)
    s[C].reorder(io, jo, ii, ji)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].axes
    (k,) = s[CC].reduce_axes
    ko, ki = s[CC].split(k, factor=kf)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    return wl, s


def test_matmul_microkernel_keeps_the_tile_in_registers():
    lanes = register_bits() // 32
    wl, s = _matmul_microkernel(24, 4 * lanes, 16, 4, 2 * lanes)
    k = _check_schedule(wl, s, emulate=False)
    src = k.compiled.source_unoptimized
    assert f"fmul contract <{lanes} x float>" in src and f"fadd contract <{lanes} x float>" in src
    assert "alloca" not in k.source()  # the local tile lives in registers
    asm = k.compiled.assembly()
    reg = "zmm" if lanes == 16 else "ymm"
    if "+fma" in tc.codegen.host_cpu()[1]:
        assert re.search(rf"vfmadd\w+\s+[^\n]*%{reg}", asm)


def test_matmul_nondivisible_tiles_use_masks():
    wl, s = _matmul_microkernel(13, 33, 17, 4, 16, kf=3)
    k = _check_schedule(wl, s)
    assert "llvm.masked.store" in k.compiled.source_unoptimized


def test_conv_padding_inlined_is_a_masked_load():
    wl = W.conv2d(1, 3, 9, 19, 4, 3, 3, 1, 1, 1, 1, "NCHW", "direct")
    dag = wl.dag
    s = tc.Schedule(dag)
    s[dag.stage("pad").tensor].compute_inline()
    out = dag.outputs[0]
    n, o, y, x = s[out].axes
    xo, xi = s[out].split(x, factor=8)
    s[out].reorder(n, o, y, xo, *s[out].reduce_axes, xi)
    s[out].vectorize(xi)
    k = _check_schedule(wl, s)
    src = k.compiled.source_unoptimized
    assert "llvm.masked.load" in src and " x float>" in src


def test_csr_spmm_vectorized_over_dense_columns():
    wl = W.csr_spmm(9, 12, 21, 0.3, empty_rows=2)
    s = tc.Schedule(wl.dag)
    out = wl.dag.outputs[0]
    i, j = s[out].axes
    jo, ji = s[out].split(j, factor=8)
    s[out].vectorize(ji)
    k = _check_schedule(wl, s)
    assert " x float>" in k.compiled.source_unoptimized


def test_softmax_vectorized_stages():
    wl = W.softmax(5, 37)
    s = tc.Schedule(wl.dag)
    for st in wl.dag.compute_stages:
        if not st.is_reduce:
            s[st.tensor].vectorize(s[st.tensor].axes[-1])
    k = _check_schedule(wl, s, tol=1e-5)
    assert " x float>" in k.compiled.source_unoptimized
