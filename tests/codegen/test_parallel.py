"""Parallel loops (tecomp.codegen.parallel, tecomp.codegen.threadpool): outlined bodies on the thread
pool give the serial results, with 1, 2 and more threads, from several Python threads at once."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import parallel as P
from tecomp.codegen.llvm_cpu import compile_cpu
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var, cast
from tecomp.ir.loop import Allocate, Buffer, For, ForKind, IfThenElse, PrimFunc, Scope, Store, seq
from tecomp.testing import workloads as W

PAR, SER = ForKind.PARALLEL, ForKind.SERIAL
RNG = np.random.default_rng(7)


def c64(v):
    return Const(v, dt.INDEX)


def loop(var, begin, extent, body, kind=SER):
    return For(var, c64(begin) if isinstance(begin, int) else begin,
               c64(extent) if isinstance(extent, int) else extent, kind, body)


def launches(k) -> int:
    return k.source_unoptimized.count(f"call void @\"{P.ENTRY}\"")


# ----------------------------------------------------------------------------- hand-built loop IR

@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000])
def test_elementwise_extents(threads, n):
    """Extent 0 (no call of the body), 1, fewer iterations than threads, many more."""
    A, B = Buffer("A", (max(n, 1),), dt.float32), Buffer("B", (max(n, 1),), dt.float32)
    i = Var("i")
    k = compile_cpu(PrimFunc("ew", [A, B], loop(i, 0, n, Store(B, (i,), (Load(A, (i,)) - 1.5) * 3.0),
                                                 PAR)))
    assert launches(k) == 1
    a = RNG.standard_normal(max(n, 1)).astype(np.float32)
    b = np.full_like(a, 123.25)
    k.run([a, b])
    ref = (a - np.float32(1.5)) * np.float32(3)  # no FMA contraction to mirror
    np.testing.assert_array_equal(b[:n], ref[:n])
    np.testing.assert_array_equal(b[n:], 123.25)


def test_nonzero_begin_int32_var_and_enclosing_variables(threads):
    """``parallel for j in [r + 2, r + 2 + 37)`` (int32) inside serial and unrolled loops: the
    begin, the enclosing variables (one a constant after unrolling) go through the closure."""
    R, Q, M = 3, 2, 64
    O = Buffer("O", (R, Q, M), dt.int32)
    r, q, j = Var("r"), Var("q"), Var("j", dt.int32)
    jj = cast(j, dt.INDEX)
    value = cast(r * 1000 + q * 100, dt.int32) + j
    body = loop(r, 0, R, For(q, c64(0), c64(Q), ForKind.UNROLLED, For(
        j, cast(r + 2, dt.int32), Const(37, dt.int32), PAR, Store(O, (r, q, jj), value))))
    k = compile_cpu(PrimFunc("nested_vars", [O], body))
    o = np.full((R, Q, M), -1, np.int32)
    k.run([o])
    ref = np.full((R, Q, M), -1, np.int32)
    for rv in range(R):
        for qv in range(Q):
            js = np.arange(rv + 2, rv + 39)
            ref[rv, qv, js] = rv * 1000 + qv * 100 + js
    np.testing.assert_array_equal(o, ref)


def test_body_with_inner_loops_and_allocations(threads):
    """Per-iteration stack and heap allocations inside the body, inner loops, a guard, and a buffer
    allocated in the enclosing scope that the body writes and a later serial loop reads."""
    M, K = 41, 9
    BIG = 20000  # 80 KB: allocated on the heap, per iteration
    A = Buffer("A", (M, K), dt.float32)
    B = Buffer("B", (M, K), dt.float32)
    C = Buffer("C", (M,), dt.float32)
    tmp = Buffer("tmp", (K,), dt.float32, Scope.LOCAL)
    big = Buffer("big", (BIG,), dt.float32, Scope.LOCAL)
    shared = Buffer("shared", (M,), dt.float32, Scope.LOCAL)
    i, k1, k2, k3, t, u = (Var(n) for n in ("i", "k1", "k2", "k3", "t", "u"))
    body = Allocate(shared, seq(
        loop(i, 0, M, Allocate(tmp, Allocate(big, seq(
            loop(k1, 0, K, Store(tmp, (k1,), Load(A, (i, k1)) * 2.0)),
            loop(t, 0, BIG, Store(big, (t,), Const(1.0, dt.float32))),
            loop(k2, 0, K, IfThenElse(k2 < K - 1, Store(B, (i, k2), Load(tmp, (K - 1 - k2,))),
                                      Store(B, (i, k2), Load(big, (c64(BIG - 1),))))),
            Store(shared, (i,), Const(0.0, dt.float32)),
            loop(k3, 0, K, Store(shared, (i,), Load(shared, (i,)) + Load(tmp, (k3,))))))), PAR),
        loop(u, 0, M, Store(C, (u,), Load(shared, (u,)) + 1.0))))
    k = compile_cpu(PrimFunc("allocs", [A, B, C], body, n_outputs=2))
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b, c = np.zeros((M, K), np.float32), np.zeros(M, np.float32)
    k.run([a, b, c])
    ref_b = (a * 2)[:, ::-1].copy()
    ref_b[:, K - 1] = 1.0
    np.testing.assert_array_equal(b, ref_b)
    # the k3 loop is a reduction into one element, emitted as vector lanes (a reassociated sum)
    acc = (a.astype(np.float64) * 2).sum(axis=1)
    np.testing.assert_allclose(c, acc + 1, rtol=2e-6, atol=1e-6)


def test_dynamic_enclosing_allocation_and_loaded_extent(threads):
    """A heap buffer whose shape (so its strides) depends on an enclosing loop variable, and a
    parallel loop whose extent is loaded from memory."""
    R, W_ = 4, 5
    N = Buffer("N", (R,), dt.int32)
    O = Buffer("O", (R, 2, R * W_), dt.int64)
    r, i, j, u, v = (Var(n) for n in ("r", "i", "j", "u", "v"))
    width = (r + 1) * W_
    tile = Buffer("tile", (c64(2), width), dt.int64, Scope.LOCAL)
    extent = cast(Load(N, (r,)), dt.INDEX)
    body = loop(r, 0, R, Allocate(tile, seq(
        loop(i, 0, 2, loop(j, 0, width, Store(tile, (i, j), i * 100 + j + r * 10000)), PAR),
        loop(u, 0, 2, loop(v, 0, extent, Store(O, (r, u, v), Load(tile, (u, v)) * 2), PAR)))))
    k = compile_cpu(PrimFunc("dyn", [N, O], body))
    n = np.array([3, 10, 0, 20], np.int32)
    o = np.full((R, 2, R * W_), -1, np.int64)
    k.run([n, o])
    ref = np.full_like(o, -1)
    for rv in range(R):
        for uv in range(2):
            vs = np.arange(n[rv])
            ref[rv, uv, vs] = (uv * 100 + vs + rv * 10000) * 2
    np.testing.assert_array_equal(o, ref)
    assert launches(k) == 2


def test_nested_parallel_loops_run_serially_inside(threads):
    M, Nn = 23, 17
    A = Buffer("A", (M, Nn), dt.float64)
    B = Buffer("B", (M, Nn), dt.float64)
    i, j = Var("i"), Var("j")
    body = loop(i, 0, M, loop(j, 0, Nn, Store(B, (i, j), Load(A, (i, j)) - 1.0), PAR), PAR)
    k = compile_cpu(PrimFunc("nested", [A, B], body))
    assert launches(k) == 1  # only the outer loop is outlined
    a = RNG.standard_normal((M, Nn))
    b = np.zeros_like(a)
    k.run([a, b])
    np.testing.assert_array_equal(b, a - 1)


def test_kernel_named_like_the_runtime_entry():
    A = Buffer("A", (4,), dt.int32)
    i = Var("i")
    k = compile_cpu(PrimFunc(P.ENTRY, [A], loop(i, 0, 4, Store(A, (i,), cast(i, dt.int32)), PAR)))
    a = np.zeros(4, np.int32)
    k.run([a])
    np.testing.assert_array_equal(a, np.arange(4))


# ----------------------------------------------------------------------------- schedules

def _check(s, wl, **tol):
    inputs = wl.make_inputs(np.random.default_rng(0))
    ref = wl.reference(inputs)[0]
    k = tc.build(wl.dag, schedule=s)
    assert P.ENTRY in k.source()
    np.testing.assert_allclose(k(*inputs), ref, **(tol or dict(rtol=1e-4, atol=1e-4)))


def test_schedule_fused_parallel_with_local_cache_guards_and_vector_loops(threads):
    wl = W.matmul(37, 45, 29)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    CC = s.cache_write(C, "local")
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=8)  # 37 = 4 * 8 + 5: guarded tail
    jo, ji = s[C].split(j, nparts=3)
    s[C].reorder(io, jo, ii, ji)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], f)
    s[CC].vectorize(s[CC].axes[1])
    _check(s, wl)


def test_schedule_nondivisible_split_parallel_outer(threads):
    wl = W.matmul(50, 31, 12)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=7)
    s[C].parallel(io)
    s[C].parallel(ii)  # nested: serial inside
    _check(s, wl)


def test_schedule_csr_rows_in_parallel(threads):
    wl = W.csr_spmm(67, 40, 9, density=0.2, empty_rows=5, dense_row=True)
    s = tc.Schedule(wl.dag)
    out = wl.dag.outputs[0]
    s[out].parallel(s[out].loops[0])
    _check(s, wl)


# ----------------------------------------------------------------------------- the pool

def _big_kernel(n=1 << 16):
    A, B = Buffer("A", (n,), dt.float32), Buffer("B", (n,), dt.float32)
    i = Var("i")
    return compile_cpu(PrimFunc("big", [A, B], loop(i, 0, n, Store(
        B, (i,), (Load(A, (i,)) - 2.0) * Load(A, (i,))), PAR))), n


def test_workers_take_chunks_only_with_more_than_one_thread():
    k, n = _big_kernel()
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.empty_like(a)
    old = P.get_num_threads()
    try:
        P.set_num_threads(1)
        before = P.stats()["worker_chunks"]
        k.run([a, b])
        assert P.stats()["worker_chunks"] == before
        P.set_num_threads(2)
        k.run([a, b])
        assert P.stats()["worker_chunks"] == before + 1 and P.stats()["workers"] >= 1
        np.testing.assert_array_equal(b, (a - np.float32(2)) * a)
    finally:
        P.set_num_threads(old)


def test_same_kernel_from_several_python_threads(threads):
    k, n = _big_kernel()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(30):
                a = rng.standard_normal(n).astype(np.float32)
                b = np.empty_like(a)
                k.run([a, b])
                np.testing.assert_array_equal(b, (a - np.float32(2)) * a)
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a kernel call hung"
    assert not errors, errors[0]


def test_shutdown_and_restart():
    k, n = _big_kernel()
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.empty_like(a)
    old = P.get_num_threads()
    try:
        P.set_num_threads(2)
        k.run([a, b])
        P.shutdown()
        assert P.stats()["workers"] == 0
        b[:] = 0
        k.run([a, b])  # starts the workers again
        assert P.stats()["workers"] >= 1
        np.testing.assert_array_equal(b, (a - np.float32(2)) * a)
    finally:
        P.set_num_threads(old)


def test_set_num_threads_validates():
    with pytest.raises(ValueError, match="set_num_threads"):
        P.set_num_threads(0)
    assert P.default_num_threads() >= 1


_CHILD = """
import numpy as np, os, sys
from tecomp.codegen import parallel as P
sys.path.insert(0, {tests!r})
from test_parallel import _big_kernel
P.set_num_threads(2)
k, n = _big_kernel()
a = np.arange(n, dtype=np.float32); b = np.empty_like(a)
k.run([a, b])
pid = os.fork()
if pid == 0:
    b[:] = 0
    k.run([a, b])   # the child starts its own workers
    os._exit(0 if np.array_equal(b, (a - np.float32(2)) * a) else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
print("done")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_and_process_exit_do_not_hang():
    code = _CHILD.format(tests=os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
