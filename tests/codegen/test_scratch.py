"""The runtime's scratch cache (codegen/scratch_ir.py): a kernel's intermediate buffers of a
constant size are reused from one call to the next (no fresh pages to fault in), stay correct when
Python threads call kernels concurrently and when parallel loop bodies allocate, are freed on
request, and survive a fork."""
import os
import resource
import subprocess
import sys
import threading

import numpy as np
import pytest

from tecomp.codegen import parallel as P
from tecomp.codegen.llvm_cpu import compile_cpu
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var
from tecomp.ir.loop import Allocate, Buffer, For, ForKind, PrimFunc, Scope, Store, seq


def _c(v):
    return Const(v, dt.INDEX)


def _kernel(rows: int, size: int, parallel: bool):
    """``O[i, :] = reversed(A[i, :]) * 2 + 1`` through a ``size``-float buffer allocated per row
    (inside the parallel loop when ``parallel``: one buffer per worker at a time)."""
    A = Buffer("A", (rows, size), dt.float32)
    O = Buffer("O", (rows, size), dt.float32)
    T = Buffer("T", (size,), dt.float32, Scope.LOCAL)
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    body = Allocate(T, seq(
        For(j, _c(0), _c(size), ForKind.SERIAL,
            Store(T, (_c(size - 1) - j,), Load(A, (i, j)) * 2.0)),
        For(j2, _c(0), _c(size), ForKind.SERIAL, Store(O, (i, j2), Load(T, (j2,)) + 1.0))))
    loop = For(i, _c(0), _c(rows), ForKind.PARALLEL if parallel else ForKind.SERIAL, body)
    return compile_cpu(PrimFunc("scratch_user", [A, O], loop))


def _ref(a):
    return a[:, ::-1] * np.float32(2) + np.float32(1)


def test_a_large_buffer_is_reused_without_page_faults():
    rows, size = 4, 1 << 20  # a 4 MB buffer: mmap'ed (fresh pages every call) by malloc
    k = _kernel(rows, size, parallel=False)
    a = np.random.default_rng(0).uniform(-1, 1, (rows, size)).astype(np.float32)
    o = np.empty_like(a)
    k.run([a, o])
    before = P.scratch_stats()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        k.run([a, o])
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    after = P.scratch_stats()
    np.testing.assert_array_equal(o, _ref(a))
    assert after["hits"] - before["hits"] >= 10 * rows
    assert faults < 10 * (4 << 20) // 4096 // 20, faults  # a fresh buffer would be 1024 per call


def test_concurrent_callers_and_allocating_parallel_bodies_stay_correct():
    rows, size = 16, 50000
    k = _kernel(rows, size, parallel=True)
    rng = np.random.default_rng(1)
    arrays = [rng.uniform(-1, 1, (rows, size)).astype(np.float32) for _ in range(3)]
    errors = []

    def work(a):
        o = np.empty_like(a)
        for _ in range(20):
            o[:] = 0
            k.run([a, o])
            if not np.array_equal(o, _ref(a)):
                errors.append("wrong result")

    threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_cache_can_be_emptied_and_turned_off():
    rows, size = 2, 40000
    k = _kernel(rows, size, parallel=False)
    a = np.random.default_rng(2).uniform(-1, 1, (rows, size)).astype(np.float32)
    o = np.empty_like(a)
    k.run([a, o])
    assert P.scratch_stats()["cached_bytes"] >= size * 4
    try:
        assert P.set_scratch_cache(0) >= size * 4
        assert P.scratch_stats()["cached_bytes"] == 0
        misses = P.scratch_stats()["misses"]
        k.run([a, o])
        np.testing.assert_array_equal(o, _ref(a))
        assert P.scratch_stats()["misses"] == misses + rows
        assert P.scratch_stats()["cached_bytes"] == 0
    finally:
        P.set_scratch_cache(512 << 20)
    with pytest.raises(ValueError, match="set_scratch_cache"):
        P.set_scratch_cache(-1)


_CHILD = """
import os, sys, numpy as np
sys.path.insert(0, {tests!r})
from test_scratch import _kernel, _ref
k = _kernel(4, 40000, parallel=True)
a = np.random.default_rng(3).uniform(-1, 1, (4, 40000)).astype(np.float32); o = np.empty_like(a)
k.run([a, o])
pid = os.fork()
if pid == 0:
    o[:] = 0
    k.run([a, o])   # the cache (and its lock) as the fork left them
    os._exit(0 if np.array_equal(o, _ref(a)) else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
print("done")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_uses_the_cache():
    code = _CHILD.format(tests=os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
