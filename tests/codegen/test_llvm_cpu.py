"""CPU code generation (tecomp.codegen.llvm_cpu) on hand-built loop IR, checked against numpy."""
import time

import numpy as np
import pytest

from tecomp.codegen.llvm_cpu import CompiledCPU, compile_cpu, emit_module, host_cpu
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
)

RNG = np.random.default_rng(1234)
N = 203  # odd, so vectorized loops run a remainder
FLOATS = [dt.float16, dt.float32, dt.float64]
INTS = [dt.int8, dt.int32, dt.int64]


def c64(v):
    return Const(v, dt.INDEX)


def loop(var, begin, extent, body, kind=ForKind.SERIAL):
    return For(var, c64(begin) if isinstance(begin, int) else begin,
               c64(extent) if isinstance(extent, int) else extent, kind, body)


def rand(t, n=N, lo=-50, hi=50, nonzero=False):
    if t.is_bool:
        return RNG.random(n) < 0.5
    if t.is_float:
        x = RNG.uniform(lo, hi, n)
        if nonzero:
            x[x == 0] = 1.0
        return x.astype(t.np)
    x = RNG.integers(max(lo, np.iinfo(t.np).min), min(hi, np.iinfo(t.np).max), n, dtype=t.np)
    if nonzero:
        x[x == 0] = 1
    return x


def garbage(t, shape):
    """An output array pre-filled with non-zero junk, so that missing writes show."""
    if t.is_bool:
        return RNG.random(shape) < 0.5
    if t.is_float:
        return np.full(shape, 123.25, t.np)
    return np.full(shape, 77, t.np)


def elementwise(make, inputs, kind=ForKind.SERIAL, name="ew"):
    """Compile ``out_k[i] = exprs[k]`` with ``exprs = make(*loads)``; return (outputs, references)."""
    i = Var("i")
    bufs = [Buffer(f"in{k}", (N,), dtype=dt.dtype(a.dtype)) for k, a in enumerate(inputs)]
    exprs = make(*[Load(b, (i,)) for b in bufs])
    outs = [Buffer(f"out{k}", (N,), e.dtype) for k, e in enumerate(exprs)]
    body = loop(i, 0, N, seq(*[Store(o, (i,), e) for o, e in zip(outs, exprs)]), kind)
    fn = PrimFunc(name, bufs + outs, body, n_outputs=len(outs))
    k = compile_cpu(fn)
    out_arrays = [garbage(o.dtype, (N,)) for o in outs]
    k.run(list(inputs) + out_arrays)
    env, data = {i: np.arange(N)}, dict(zip(bufs, inputs))
    refs = [np.broadcast_to(eval_np(e, env, data), (N,)) for e in exprs]
    return out_arrays, refs


# ----------------------------------------------------------------------------- basics

def test_host_cpu_and_emit_module():
    name, features = host_cpu()
    assert isinstance(name, str) and name and isinstance(features, str)
    A = Buffer("A", (4,), dt.float32)
    B = Buffer("B", (4,), dt.float32)
    i = Var("i")
    fn = PrimFunc("scale", [A, B], loop(i, 0, 4, Store(B, (i,), Load(A, (i,)) * 2.0)))
    text = emit_module(fn)
    assert 'define void @"scale"(ptr noalias' in text
    assert "fmul contract float" in text
    t0 = time.perf_counter()
    k = compile_cpu(fn)
    assert time.perf_counter() - t0 < 2.0
    assert isinstance(k, CompiledCPU) and "define" in k.source and "define" in k.source_unoptimized
    a = RNG.standard_normal(4).astype(np.float32)
    b = garbage(dt.float32, (4,))
    k.run([a, b])
    np.testing.assert_array_equal(b, a * np.float32(2))


@pytest.mark.parametrize("opt", [0, 1, 2])
def test_lower_opt_levels(opt):
    a, b = rand(dt.float32), rand(dt.float32, nonzero=True)
    i = Var("i")
    A, B, O = Buffer("A", (N,), dt.float32), Buffer("B", (N,), dt.float32), Buffer("O", (N,), dt.float32)
    x, y = Load(A, (i,)), Load(B, (i,))
    fn = PrimFunc("o", [A, B, O], loop(i, 0, N, Store(O, (i,), binary(BinOpKind.MOD, x, y) - x / y)))
    o = garbage(dt.float32, (N,))
    compile_cpu(fn, opt_level=opt).run([a, b, o])
    np.testing.assert_array_equal(o, np.mod(a, b) - a / b)
    with pytest.raises(ValueError, match="opt_level"):
        compile_cpu(fn, opt_level=4)


def test_kernel_named_like_a_libm_function_does_not_shadow_it():
    A = Buffer("A", (N,), dt.float64)
    B = Buffer("B", (N,), dt.float64)
    i = Var("i")
    fn = PrimFunc("tanh", [A, B], loop(i, 0, N, Store(B, (i,), unary(UnOpKind.TANH, Load(A, (i,))))))
    a, b = rand(dt.float64, lo=-3, hi=3), garbage(dt.float64, (N,))
    compile_cpu(fn).run([a, b])
    np.testing.assert_allclose(b, np.tanh(a), rtol=1e-14)


# ----------------------------------------------------------------------------- elementwise ops

_ARITH = [BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.MIN, BinOpKind.MAX,
          BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE, BinOpKind.EQ, BinOpKind.NE,
          BinOpKind.FLOORDIV, BinOpKind.MOD]


@pytest.mark.parametrize("t", FLOATS + INTS, ids=str)
def test_binary_ops_match_numpy_exactly(t):
    a, b = rand(t, nonzero=True), rand(t, nonzero=True)
    a[:10] = b[:10]  # exercise equality
    ops = _ARITH + ([BinOpKind.DIV] if t.is_float else [])
    outs, refs = elementwise(lambda x, y: [binary(op, x, y) for op in ops], [a, b])
    for op, o, r in zip(ops, outs, refs):
        np.testing.assert_array_equal(o, r, err_msg=f"{op} on {t}")


@pytest.mark.parametrize("t", INTS, ids=str)
def test_int_floordiv_mod_negative_and_by_zero(t):
    info = np.iinfo(t.np)
    a = rand(t, lo=-100, hi=100)
    b = rand(t, lo=-7, hi=8)  # includes 0 and -1
    b[:4] = [0, -1, 0, -1]
    a[:4] = [5, info.min, -5, 7]
    b[4:8] = [3, -3, 3, -3]
    a[4:8] = [-7, 7, 7, -7]
    ops = [BinOpKind.FLOORDIV, BinOpKind.MOD]
    outs, refs = elementwise(lambda x, y: [binary(op, x, y) for op in ops], [a, b])
    for op, o, r in zip(ops, outs, refs):
        np.testing.assert_array_equal(o, r, err_msg=str(op))
    fd, md = outs
    assert fd[0] == 0 and md[0] == 0 and fd[2] == 0   # by zero -> 0, no trap
    assert fd[1] == info.min and md[1] == 0             # MIN // -1 wraps, no trap
    assert list(fd[4:8]) == [-3, -3, 2, 2] and list(md[4:8]) == [2, -2, 1, -1]


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_float_floordiv_mod_special_values_match_numpy(t):
    a, b = rand(t, lo=-20, hi=20), rand(t, lo=-6, hi=6, nonzero=True)
    special = np.array([5.0, -5.0, 0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 6.0, 1.0, -0.0, 7.5])
    divs = np.array([0.0, 0.0, 0.0, 2.0, 2.0, 2.0, np.inf, np.inf, -3.0, -np.inf, 2.0, 2.5])
    a[:12], b[:12] = special.astype(t.np), divs.astype(t.np)
    ops = [BinOpKind.FLOORDIV, BinOpKind.MOD, BinOpKind.MIN, BinOpKind.MAX, BinOpKind.NE,
           BinOpKind.EQ, BinOpKind.LT]
    outs, refs = elementwise(lambda x, y: [binary(op, x, y) for op in ops], [a, b])
    for op, o, r in zip(ops, outs, refs):
        np.testing.assert_array_equal(o, r, err_msg=f"{op} on {t}")
    assert np.isnan(outs[2][5]) and np.isnan(outs[3][5])  # min/max propagate NaN


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_float_unary_math(t):
    a = rand(t, lo=0.1, hi=4)
    a[::2] *= -1
    pos = np.abs(a)
    ops = [UnOpKind.EXP, UnOpKind.TANH, UnOpKind.SIGMOID, UnOpKind.ABS, UnOpKind.NEG]
    outs, refs = elementwise(lambda x, p: [unary(op, x) for op in ops]
                             + [unary(UnOpKind.LOG, p), unary(UnOpKind.SQRT, p)], [a, pos])
    rtol = {dt.float16: 1e-3, dt.float32: 2e-6, dt.float64: 1e-14}[t]
    for name, o, r in zip([*ops, "log", "sqrt"], outs, refs):
        assert o.dtype == t.np
        np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol,
                                   atol=rtol, err_msg=f"{name} on {t}")
    # abs, neg and sqrt are exact
    for k in (3, 4, 6):
        np.testing.assert_array_equal(outs[k], refs[k])


@pytest.mark.parametrize("t", INTS, ids=str)
def test_int_unary_abs_neg(t):
    a = rand(t)
    a[0] = np.iinfo(t.np).min
    outs, refs = elementwise(lambda x: [unary(UnOpKind.ABS, x), unary(UnOpKind.NEG, x)], [a])
    for o, r in zip(outs, refs):
        np.testing.assert_array_equal(o, r)


def test_float32_division_by_a_value_may_use_its_reciprocal_but_not_by_a_constant():
    """``arcp`` on a float32 division by a computed value (LLVM hoists one reciprocal out of a
    loop the divisor does not vary in: a softmax's row by its sum), within 2 ulp of the quotient;
    a division by a constant, and any float64 one, stays exact."""
    a, b = rand(dt.float32), rand(dt.float32, nonzero=True)
    outs, refs = elementwise(lambda x, y: [x / y, x / 3.0], [a, b])
    np.testing.assert_array_max_ulp(outs[0], refs[0], maxulp=2)
    np.testing.assert_array_equal(outs[1], refs[1])
    i = Var("i")
    A, B, O = (Buffer(n, (N,), t) for n, t in (("A", dt.float32), ("B", dt.float32),
                                                ("O", dt.float32)))
    text = emit_module(PrimFunc("d", [A, B, O], loop(i, 0, N, Store(
        O, (i,), Load(A, (i,)) / Load(B, (i,)) + Load(A, (i,)) / 3.0))))
    assert "fdiv arcp float" in text and text.count("fdiv float") == 1
    a64, b64 = rand(dt.float64), rand(dt.float64, nonzero=True)
    outs, refs = elementwise(lambda x, y: [x / y], [a64, b64])
    np.testing.assert_array_equal(outs[0], refs[0])


def test_math_on_ints_is_float64():
    a = rand(dt.int32, lo=1, hi=30)
    outs, refs = elementwise(lambda x: [unary(UnOpKind.SQRT, x), binary(BinOpKind.DIV, x, 7)], [a])
    assert outs[0].dtype == np.float64 and outs[1].dtype == np.float64
    np.testing.assert_array_equal(outs[0], refs[0])
    np.testing.assert_array_equal(outs[1], refs[1])


ALL = FLOATS + INTS + [dt.bool_]


@pytest.mark.parametrize("src", ALL, ids=str)
def test_casts_from(src):
    a = rand(src, lo=-120, hi=120)
    if src.is_float:
        a[:3] = [0.0, -0.75, 0.5]
    if src is dt.int64:
        a[3] = 2 ** 40 + 3  # wraps when narrowed
    if src is dt.float64:  # rounding to half: many magnitudes, including halfway cases
        a[10:60] = RNG.standard_normal(50) * 10.0 ** RNG.integers(-8, 6, 50)
        a[60:70] = (np.float16(1.5) + np.float64(2.0 ** -11) * np.array([1, 1 + 2 ** -30, 1 - 2 ** -30,
                    3, 5, 1, 1, 3, 3, 7]))  # ties and near-ties at float16 precision
    targets = [d for d in ALL if d is not src]
    outs, refs = elementwise(lambda x: [cast(x, d) for d in targets], [a])
    for d, o, r in zip(targets, outs, refs):
        assert o.dtype == d.np
        np.testing.assert_array_equal(o, r, err_msg=f"{src} -> {d}")


def test_float_to_bool_nan_is_true_and_bool_to_float():
    a = rand(dt.float32)
    a[:3] = [0.0, np.nan, -0.0]
    outs, refs = elementwise(lambda x: [cast(x, dt.bool_), cast(cast(x, dt.bool_), dt.float64)], [a])
    assert list(outs[0][:3]) == [False, True, False]
    for o, r in zip(outs, refs):
        np.testing.assert_array_equal(o, r)


def test_bool_buffers_and_logic():
    m, n = rand(dt.bool_), rand(dt.bool_)
    a, b = rand(dt.float32), rand(dt.float32)
    outs, refs = elementwise(lambda p, q, x, y: [
        (x < y) & p, p | q, unary(UnOpKind.NOT, p), binary(BinOpKind.LT, p, q),
        binary(BinOpKind.MIN, p, q), binary(BinOpKind.MAX, p, q), binary(BinOpKind.EQ, p, q),
        select(p, x, y), cast(q, dt.int32) + cast(p, dt.int32)], [m, n, a, b])
    for o, r in zip(outs, refs):
        np.testing.assert_array_equal(o, r)
    assert outs[0].dtype == np.bool_ and set(outs[1].view(np.uint8)) <= {0, 1}


def test_float16_arithmetic_and_contraction():
    a, b, c = (rand(dt.float16, lo=-4, hi=4) for _ in range(3))
    outs, refs = elementwise(lambda x, y, z: [x * y + z, x / y - z, binary(BinOpKind.MAX, x, z),
                                              x * 0.5 + 1.25], [a, b, c])
    np.testing.assert_array_equal(outs[3], refs[3])  # exact: x * 0.5 is exact in half
    np.testing.assert_allclose(outs[0].astype(np.float32), refs[0].astype(np.float32),
                               rtol=2e-3, atol=1e-2)
    np.testing.assert_allclose(outs[1].astype(np.float32), refs[1].astype(np.float32),
                               rtol=2e-3, atol=1e-2)
    np.testing.assert_array_equal(outs[2], refs[2])


def test_contract_fuses_but_stays_close_to_numpy():
    a, b, c = (rand(dt.float64) for _ in range(3))
    outs, refs = elementwise(lambda x, y, z: [x * y + z], [a, b, c])
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-15, atol=1e-13)


def test_contract_flag_produces_fma_on_fma_hosts():
    A, B, C = (Buffer(n, (N,), dt.float32) for n in "ABC")
    i = Var("i")
    k = compile_cpu(PrimFunc("axpy", [A, B, C], loop(i, 0, N, Store(C, (i,), Load(A, (i,)) * 3.0
                                                                     + Load(B, (i,))))))
    assert "fast" not in k.source_unoptimized and "reassoc" not in k.source_unoptimized
    if "+fma" in host_cpu()[1].split(","):
        assert "vfmadd" in k.assembly()
    a, b, c = rand(dt.float32), rand(dt.float32), garbage(dt.float32, (N,))
    k.run([a, b, c])
    np.testing.assert_allclose(c, a * np.float32(3) + b, rtol=1e-6, atol=1e-5)


def test_concurrent_compiles_and_runs():
    import threading
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            A, B = Buffer("A", (N,), dt.float64), Buffer("B", (N,), dt.float64)
            i = Var("i")
            k = compile_cpu(PrimFunc(f"w{seed}", [A, B], loop(i, 0, N, Store(B, (i,), Load(A, (i,))
                                                                              * float(seed)))))
            a, b = rng.standard_normal(N), np.full(N, 5.5)
            k.run([a, b])
            np.testing.assert_array_equal(b, a * float(seed))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ----------------------------------------------------------------------------- select

def test_lazy_select_guards_out_of_range_load():
    """out[i] = i in [1, n] ? A[i - 1 + huge*(i > n)] : -1 -- padding-like guarded read."""
    n = 37
    A = Buffer("A", (n,), dt.float32)
    O = Buffer("O", (n + 10,), dt.float32)
    i = Var("i")
    far = (i - 1) + select(i > n, c64(1 << 40), c64(0))  # way out of range when unguarded
    guarded = select((i >= 1) & (i <= n), Load(A, (far,)), Const(-1.0, dt.float32))
    fn = PrimFunc("pad", [A, O], loop(i, 0, n + 10, Store(O, (i,), guarded)))
    text = emit_module(fn)
    assert "sel.t" in text and "phi" in text
    a, o = rand(dt.float32, n), garbage(dt.float32, (n + 10,))
    compile_cpu(fn).run([a, o])
    ref = np.full(n + 10, -1.0, np.float32)
    ref[1:n + 1] = a
    np.testing.assert_array_equal(o, ref)


def test_select_without_loads_in_branches_is_a_plain_select():
    A = Buffer("A", (N,), dt.float32)
    O = Buffer("O", (N,), dt.float32)
    i = Var("i")
    x = Load(A, (i,))
    fn = PrimFunc("relu", [A, O], loop(i, 0, N, Store(O, (i,), select(x > 0.0, x * 2.0, x * 0.5))))
    # x is a load, so this one is lazy; a select on loop-variable arithmetic is not
    fn2 = PrimFunc("iota", [O], loop(i, 0, N, Store(O, (i,), select(i > 5, cast(i, dt.float32),
                                                                    Const(0.5, dt.float32)))))
    assert "sel.t" in emit_module(fn)
    assert "sel.t" not in emit_module(fn2) and "select" in emit_module(fn2)
    a, o = rand(dt.float32), garbage(dt.float32, (N,))
    compile_cpu(fn).run([a, o])
    np.testing.assert_array_equal(o, np.where(a > 0, a * np.float32(2), a * np.float32(0.5)))
    compile_cpu(fn2).run([o])
    np.testing.assert_array_equal(o, np.where(np.arange(N) > 5, np.arange(N), 0.5).astype(np.float32))


# ----------------------------------------------------------------------------- loops

def _csr(m, n, density=0.3):
    dense = RNG.standard_normal((m, n)) * (RNG.random((m, n)) < density)
    dense[0] = 0.0  # an empty row
    rows, cols = np.nonzero(dense)
    indptr = np.zeros(m + 1, np.int32)
    np.add.at(indptr, rows + 1, 1)
    return dense, np.cumsum(indptr).astype(np.int32), cols.astype(np.int32), dense[rows, cols]


def test_csr_spmv_data_dependent_bounds():
    m, n = 23, 17
    dense, indptr, cols, vals = _csr(m, n)
    nnz = len(vals)
    P = Buffer("indptr", (m + 1,), dt.int32)
    C = Buffer("cols", (nnz,), dt.int32)
    V = Buffer("vals", (nnz,), dt.float64)
    X = Buffer("x", (n,), dt.float64)
    Y = Buffer("y", (m,), dt.float64)
    i, r = Var("i"), Var("r")
    lo = cast(Load(P, (i,)), dt.INDEX)
    hi = cast(Load(P, (i + 1,)), dt.INDEX)
    body = loop(i, 0, m, seq(
        Store(Y, (i,), Const(0.0, dt.float64)),
        For(r, lo, hi - lo, ForKind.SERIAL,
            Store(Y, (i,), Load(Y, (i,)) + Load(V, (r,)) * Load(X, (cast(Load(C, (r,)), dt.INDEX),))))))
    fn = PrimFunc("spmv", [P, C, V, X, Y], body)
    x, y = rand(dt.float64, n), garbage(dt.float64, (m,))
    compile_cpu(fn).run([indptr, cols, vals, x, y])
    np.testing.assert_allclose(y, dense @ x, rtol=1e-12, atol=1e-12)
    assert y[0] == 0.0


def test_non_positive_extent_runs_zero_iterations():
    O = Buffer("O", (8,), dt.int32)
    i, j = Var("i"), Var("j")
    body = seq(loop(i, 3, -2, Store(O, (i,), Const(1, dt.int32))),
               loop(j, 5, 0, Store(O, (j,), Const(2, dt.int32))))
    o = garbage(dt.int32, (8,))
    compile_cpu(PrimFunc("nop", [O], body)).run([o])
    assert (o == 77).all()


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED], ids=str)
def test_matmul_reduction(kind):
    M, K, Nn = 13, 29, 19
    A = Buffer("A", (M, K), dt.float32)
    B = Buffer("B", (K, Nn), dt.float32)
    C = Buffer("C", (M, Nn), dt.float32)
    i, j, k = Var("i"), Var("j"), Var("k")
    inner_kind = kind if kind is ForKind.VECTORIZED else ForKind.SERIAL
    body = loop(i, 0, M, loop(j, 0, Nn, seq(
        Store(C, (i, j), Const(0.0, dt.float32)),
        loop(k, 0, K, Store(C, (i, j), Load(C, (i, j)) + Load(A, (i, k)) * Load(B, (k, j))))),
        inner_kind), kind if kind is ForKind.PARALLEL else ForKind.SERIAL)
    fn = PrimFunc("mm", [A, B, C], body)
    k_ = compile_cpu(fn)
    if kind is ForKind.VECTORIZED:  # vector code over j, the k loop a scalar loop of vectors
        assert " x float>" in k_.source_unoptimized
    a, b = rand(dt.float32, M * K, -1, 1).reshape(M, K), rand(dt.float32, K * Nn, -1, 1).reshape(K, Nn)
    c = garbage(dt.float32, (M, Nn))
    k_.run([a, b, c])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_unrolled_loops():
    A = Buffer("A", (6, 100), dt.int64)
    O = Buffer("O", (6, 100), dt.int64)
    i, j, k = Var("i"), Var("j"), Var("k")
    small = loop(i, 0, 6, loop(j, Load(O, (c64(0), c64(0))) * 0 + 10, 4,  # non-constant begin
                               Store(O, (i, j), Load(A, (i, j)) * 3 + j), ForKind.UNROLLED))
    big = loop(i, 0, 6, loop(k, 20, 80, Store(O, (i, k), Load(A, (i, k)) - k), ForKind.UNROLLED))
    fn = PrimFunc("unr", [A, O], seq(small, big))
    text = emit_module(fn)
    assert "j.head" not in text  # emitted 4 times, no loop
    assert "llvm.loop.unroll.full" in text and "k.head" in text
    a, o = rand(dt.int64, 600).reshape(6, 100), garbage(dt.int64, (6, 100))
    compile_cpu(fn).run([a, o])
    ref = np.full((6, 100), 77, np.int64)
    ref[:, 10:14] = a[:, 10:14] * 3 + np.arange(10, 14)
    ref[:, 20:100] = a[:, 20:100] - np.arange(20, 100)
    np.testing.assert_array_equal(o, ref)


def test_if_then_else():
    A = Buffer("A", (N,), dt.int32)
    O = Buffer("O", (N,), dt.int32)
    i = Var("i")
    x = Load(A, (i,))
    body = loop(i, 0, N, seq(IfThenElse(x > 0, Store(O, (i,), x * 2), Store(O, (i,), -x)),
                             IfThenElse(binary(BinOpKind.MOD, x, 5) == 0, Store(O, (i,), x - x + 1))))
    a, o = rand(dt.int32), garbage(dt.int32, (N,))
    compile_cpu(PrimFunc("ite", [A, O], body)).run([a, o])
    ref = np.where(a > 0, a * 2, -a)
    ref[a % 5 == 0] = 1
    np.testing.assert_array_equal(o, ref)


# ----------------------------------------------------------------------------- allocation

@pytest.mark.parametrize("size", [8, 40000], ids=["stack", "heap"])
def test_local_allocation(size):
    rows = 3
    A = Buffer("A", (rows, size), dt.float32)
    O = Buffer("O", (rows, size), dt.float32)
    T = Buffer("T", (size,), dt.float32, Scope.LOCAL)
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    body = loop(i, 0, rows, Allocate(T, seq(
        loop(j, 0, size, Store(T, (c64(size - 1) - j,), Load(A, (i, j)) * 2.0)),
        loop(j2, 0, size, Store(O, (i, j2), Load(T, (j2,)) + 1.0)))))
    fn = PrimFunc("alloc", [A, O], body)
    text = emit_module(fn)
    if size * 4 > 64 * 1024:  # a constant size: from the runtime's scratch cache
        assert "tecomp_scratch_alloc" in text and "tecomp_scratch_free" in text
        # a fresh block to LLVM, as malloc's is (else every access of it may alias every other)
        assert 'declare noalias ptr @"tecomp_scratch_alloc"' in text
    else:
        assert "alloca [8 x float], align 64" in text
    a, o = rand(dt.float32, rows * size).reshape(rows, size), garbage(dt.float32, (rows, size))
    compile_cpu(fn).run([a, o])
    np.testing.assert_array_equal(o, a[:, ::-1] * np.float32(2) + np.float32(1))


def test_local_bool_allocation():
    A = Buffer("A", (N,), dt.float64)
    O = Buffer("O", (N,), dt.int8)
    T = Buffer("T", (N,), dt.bool_, Scope.LOCAL)
    i, j = Var("i"), Var("j")
    body = Allocate(T, seq(loop(i, 0, N, Store(T, (i,), Load(A, (i,)) > 0.0)),
                           loop(j, 0, N, Store(O, (j,), cast(Load(T, (j,)), dt.int8)))))
    a, o = rand(dt.float64), garbage(dt.int8, (N,))
    compile_cpu(PrimFunc("bt", [A, O], body)).run([a, o])
    np.testing.assert_array_equal(o, (a > 0).astype(np.int8))


# ----------------------------------------------------------------------------- errors

def test_gpu_constructs_are_rejected():
    A = Buffer("A", (32,), dt.float32)
    tx = Var("tx")
    bound = For(tx, c64(0), c64(32), ForKind.THREAD_BOUND, Store(A, (tx,), Const(1.0, dt.float32)),
                thread=ThreadAxis.THREAD_X)
    with pytest.raises(ValueError, match="thread binding cannot be compiled for CPU"):
        compile_cpu(PrimFunc("g", [A], bound))
    i = Var("i")
    with pytest.raises(NotImplementedError, match="barrier"):
        compile_cpu(PrimFunc("b", [A], loop(i, 0, 32, seq(Barrier(), Store(A, (i,), Const(
            1.0, dt.float32))))))


def test_run_checks_argument_count():
    A = Buffer("A", (4,), dt.float32)
    i = Var("i")
    k = compile_cpu(PrimFunc("one", [A], loop(i, 0, 4, Store(A, (i,), Const(1.0, dt.float32)))))
    with pytest.raises(ValueError, match="takes 1 arrays"):
        k.run([])


def test_a_kernel_called_again_with_other_arrays_uses_their_addresses():
    """run() remembers each position's last array and address; a new array in a position (or a
    new one where a dead one was) must be read and written at its own address."""
    A = Buffer("A", (N,), dt.float32)
    O = Buffer("O", (N,), dt.float32)
    i = Var("i")
    k = compile_cpu(PrimFunc("twice", [A, O], loop(i, 0, N, Store(O, (i,), Load(A, (i,)) * 2.0))))
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, o = rng.standard_normal(N).astype(np.float32), garbage(dt.float32, (N,))
        k.run([a, o])
        np.testing.assert_array_equal(o, a * np.float32(2))
        k.run([o, a])  # the same arrays, swapped positions
        np.testing.assert_array_equal(a, o * np.float32(2))
        del a, o  # the next arrays may reuse these objects' memory and ids
