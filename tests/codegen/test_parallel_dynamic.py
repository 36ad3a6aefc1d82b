"""Balanced parallel loops: the ``parallel_schedule`` pragma (ParallelSchedule.DYNAMIC) makes the
thread pool hand out chunks from a shared counter; every iteration runs exactly once and the results
equal the static (equal chunks) launch's and the serial loop's."""
import numpy as np
import pytest
import scipy.sparse as sp

import tecomp as tc
from tecomp.codegen import parallel as P
from tecomp.codegen.llvm_cpu import compile_cpu
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var
from tecomp.ir.loop import (
    PRAGMA_PARALLEL_CHUNK,
    PRAGMA_PARALLEL_SCHEDULE,
    Buffer,
    For,
    ForKind,
    ParallelSchedule,
    PrimFunc,
    Store,
)
from tecomp.testing import workloads as W

RNG = np.random.default_rng(11)
DYN = ((PRAGMA_PARALLEL_SCHEDULE, ParallelSchedule.DYNAMIC),)


def c64(v):
    return Const(v, dt.INDEX)


def _counting_kernel(n, pragmas, begin=0):
    """``B[i] = B[i] + A[i] * 2`` over ``[begin, begin + n)``: an iteration run twice or never
    shows."""
    size = max(begin + n, 1)
    A, B = Buffer("A", (size,), dt.float32), Buffer("B", (size,), dt.float32)
    i = Var("i")
    body = Store(B, (i,), Load(B, (i,)) + Load(A, (i,)) * 2.0)
    return compile_cpu(PrimFunc("cnt", [A, B], For(i, c64(begin), c64(n), ForKind.PARALLEL, body,
                                                    pragmas=pragmas))), size


def _check_counting(k, size, begin, n):
    """Run a :func:`_counting_kernel` on random data: each of its iterations ran exactly once."""
    a = RNG.standard_normal(size).astype(np.float32)
    b = RNG.standard_normal(size).astype(np.float32)
    ref = b.copy()
    ref[begin:begin + n] += a[begin:begin + n] * np.float32(2)
    k.run([a, b])
    np.testing.assert_array_equal(b, ref)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 1000, 4099])
@pytest.mark.parametrize("chunk", [1, 3, 64, 5000])
def test_dynamic_runs_every_iteration_once(threads, n, chunk):
    k, size = _counting_kernel(n, DYN + ((PRAGMA_PARALLEL_CHUNK, chunk),), begin=3)
    assert f'@"{P.DYNAMIC_ENTRY}"' in k.source_unoptimized
    assert f'@"{P.ENTRY}"(' not in k.source_unoptimized
    _check_counting(k, size, 3, n)


def test_static_and_dynamic_launches_interleave():
    """The dynamic counter is reset per launch; static launches in between are unaffected."""
    old = P.get_num_threads()
    try:
        P.set_num_threads(2)
        n = 1 << 14
        kd, _ = _counting_kernel(n, DYN + ((PRAGMA_PARALLEL_CHUNK, 7),))
        ks, _ = _counting_kernel(n, ())
        a = RNG.standard_normal(n).astype(np.float32)
        b = np.zeros(n, np.float32)
        for _ in range(20):
            kd.run([a, b])
            ks.run([a, b])
        np.testing.assert_allclose(b, 40 * 2 * a, rtol=1e-5)
        before = P.stats()["worker_chunks"]
        kd.run([a, b])
        assert P.stats()["worker_chunks"] == before + 1  # the worker took part in the launch
    finally:
        P.set_num_threads(old)


def _spmm_schedule(wl, mode, chunk=None):
    s = tc.Schedule(wl.dag)
    out = wl.dag.outputs[0]
    i = s[out].loops[0]
    s[out].parallel(i)
    if mode is not None:
        s[out].pragma(i, PRAGMA_PARALLEL_SCHEDULE, mode)
    if chunk is not None:
        s[out].pragma(i, PRAGMA_PARALLEL_CHUNK, chunk)
    return s


@pytest.mark.parametrize("chunk", [None, 1, 4, 16])
def test_csr_rows_dynamic_equals_static_and_scipy(threads, chunk):
    """Rows of very different lengths (empty rows, a dense row): the balanced launch gives the
    static launch's result bit for bit, and scipy's."""
    wl = W.csr_spmm(97, 60, 17, density=0.15, empty_rows=20, dense_row=True, seed=3)
    ins = wl.make_inputs(np.random.default_rng(5))
    static = tc.build(wl.dag, "llvm", schedule=_spmm_schedule(wl, None))
    dyn = tc.build(wl.dag, "llvm", schedule=_spmm_schedule(wl, ParallelSchedule.DYNAMIC, chunk))
    assert P.DYNAMIC_ENTRY in dyn.source()
    got = dyn(*ins)
    np.testing.assert_array_equal(got, static(*ins))
    data, indices, indptr, dense = ins
    ref = sp.csr_matrix((data, indices, indptr), shape=(97, 60)) @ dense
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_static_pragma_is_the_default_launch():
    wl = W.csr_spmm(16, 16, 8, density=0.3)
    k = tc.build(wl.dag, "llvm", schedule=_spmm_schedule(wl, ParallelSchedule.STATIC))
    assert P.DYNAMIC_ENTRY not in k.source()
    ins = wl.make_inputs(np.random.default_rng(1))
    np.testing.assert_allclose(k(*ins), wl.reference(ins)[0], rtol=1e-4, atol=1e-4)


def test_pragma_values_are_checked():
    wl = W.csr_spmm(16, 16, 8, density=0.3)
    s = tc.Schedule(wl.dag)
    out = wl.dag.outputs[0]
    i = s[out].loops[0]
    with pytest.raises(tc.ScheduleError, match="not a ParallelSchedule"):
        s[out].pragma(i, PRAGMA_PARALLEL_SCHEDULE, 7)
    with pytest.raises(tc.ScheduleError, match="chunk must be >= 1"):
        s[out].pragma(i, PRAGMA_PARALLEL_CHUNK, 0)
    with pytest.raises(ValueError, match="not a ParallelSchedule"):
        store = Store(Buffer("B", (4,), dt.float32), (c64(0),), Const(1.0, dt.float32))
        P.parallel_schedule(For(Var("i"), c64(0), c64(4), ForKind.PARALLEL, store,
                                pragmas=((PRAGMA_PARALLEL_SCHEDULE, 9),)))


def test_dynamic_kernel_as_object_code_links_to_the_pool():
    """Deployment: a kernel object calling the balanced entry counts as parallel, resolves against
    the registered pool and computes what the JIT kernel does."""
    from tecomp.codegen.objects import compile_object, load_kernel, unresolved
    n = 777
    A, B = Buffer("A", (n,), dt.float32), Buffer("B", (n,), dt.float32)
    i = Var("i")
    func = PrimFunc("dyn_obj", [A, B], For(i, c64(0), c64(n), ForKind.PARALLEL,
                                           Store(B, (i,), Load(A, (i,)) * 3.0),
                                           pragmas=DYN + ((PRAGMA_PARALLEL_CHUNK, 5),)))
    ko = compile_object(func)
    assert ko.parallel and P.DYNAMIC_ENTRY in ko.imports and P.ENTRY not in ko.imports
    assert not unresolved(ko.imports)  # emitting it started the pool: both entries
    k = load_kernel(func, ko.symbol, ko.object)
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros(n, np.float32)
    k.run([a, b])
    np.testing.assert_array_equal(b, a * np.float32(3))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 1001])
@pytest.mark.parametrize("grain", [0, 1, 3, 8, 1000])
def test_balanced_static_launch_runs_every_iteration_once(threads, n, grain):
    """A static loop under set_balance(g) is claimed in about g chunks per thread; any grain (0:
    equal chunks; more chunks than iterations) runs each iteration exactly once."""
    k, size = _counting_kernel(n, (), begin=2)
    assert f'@"{P.ENTRY}"(' in k.source_unoptimized
    old = P.get_balance()
    try:
        P.set_balance(grain)
        assert P.get_balance() == grain
        for _ in range(3):  # the claim counter is reset per launch
            _check_counting(k, size, 2, n)
    finally:
        P.set_balance(old)


def test_set_balance_validates():
    assert P.get_balance() == P.BALANCE_GRAIN  # the default of a JIT-compiled runtime
    with pytest.raises(ValueError, match="grain must be >= 0"):
        P.set_balance(-1)
