"""Issue 16, items 2 and 11: limits instead of crashes and hangs.

A chain of ~900 additions raised RecursionError in build; an unroll pragma of 65536 did not finish
building in 9.5 minutes; a (2**20, 2**20) intermediate segfaulted. Each now raises a clear error
that names the limit (or the buffer), quickly.
"""
import time

import numpy as np
import pytest

import tecomp as tc
from tecomp.ir.loop import MAX_UNROLL, LoopIRError
from tecomp.ir.tensor import MAX_EXPR_DEPTH


def _chain(src, n):
    def f(i):
        e = src[i]
        for _ in range(n):
            e = e + 1.0
        return e
    return f


def test_a_deep_expression_names_the_limit():
    X = tc.placeholder((16,), "float32", "X")
    with pytest.raises(ValueError, match=rf"900|90\d operations deep.*limit of {MAX_EXPR_DEPTH}"):
        tc.compute((16,), _chain(X, 900), name="Y")
    Y = tc.compute((16,), _chain(X, MAX_EXPR_DEPTH - 4), name="Y")  # just inside the limit
    k = tc.build(tc.ComputeDAG([X, Y]))
    x = np.random.default_rng(0).uniform(-1, 1, 16).astype(np.float32)
    want = x.copy()
    for _ in range(MAX_EXPR_DEPTH - 4):
        want = want + np.float32(1)
    np.testing.assert_allclose(k(x), want, rtol=1e-6)
    np.testing.assert_allclose(k.emulate(x), want, rtol=1e-6)


def test_inlining_past_the_limit_is_a_clear_error():
    X = tc.placeholder((16,), "float32", "X")
    A = tc.compute((16,), _chain(X, 240), name="A")
    B = tc.compute((16,), _chain(A, 240), name="B")
    C = tc.compute((16,), _chain(B, 240), name="C")
    dag = tc.ComputeDAG([X, C])
    np.testing.assert_allclose(tc.build(dag)(np.zeros(16, np.float32)), 720.0)
    s = tc.Schedule(dag)
    s[A].compute_inline()
    s[B].compute_inline()
    with pytest.raises(ValueError, match="nested too deeply to compile.*compute_inline"):
        tc.build(dag, schedule=s)


@pytest.mark.parametrize("how", ["pragma", "unroll", "nested"])
def test_unrolling_past_the_limit_is_refused_quickly(how):
    n = 65536
    A = tc.placeholder((n,), "float32", "A")
    B = tc.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    dag = tc.ComputeDAG([A, B])
    s = tc.Schedule(dag)
    (i,) = s[B].axes
    if how == "pragma":
        s[B].pragma(i, "auto_unroll_max_step", n)
    elif how == "unroll":
        s[B].unroll(i)
    else:  # 64 x 64 copies: each loop short, the product past the limit
        io, ii = s[B].split(i, factor=64)
        _, im = s[B].split(io, factor=64)
        s[B].unroll(im)
        s[B].unroll(ii)
    t = time.perf_counter()
    with pytest.raises(LoopIRError, match=rf"{64 * 64 if how == 'nested' else n} times.*"
                                          rf"limit of {MAX_UNROLL}"):
        tc.build(dag, schedule=s)
    assert time.perf_counter() - t < 60


def test_unrolling_within_the_limit_builds_and_computes():
    A = tc.placeholder((256,), "float32", "A")
    B = tc.compute((256,), lambda i: A[i] * 2.0 + 1.0, name="B")
    dag = tc.ComputeDAG([A, B])
    s = tc.Schedule(dag)
    (i,) = s[B].axes
    s[B].pragma(i, "auto_unroll_max_step", 256)
    x = np.random.default_rng(1).uniform(-1, 1, 256).astype(np.float32)
    np.testing.assert_allclose(tc.build(dag, schedule=s)(x), x * 2 + 1, rtol=1e-6)


def test_a_buffer_larger_than_the_machine_is_refused_at_build():
    n = 2**20
    A = tc.placeholder((n,), "float32", "A")
    big = tc.compute((n, n), lambda i, j: A[i] * A[j], name="Big")
    k = tc.reduce_axis(1, "k")
    out = tc.compute((4,), lambda i: tc.sum(big[i, k], axis=k), name="Out")
    with pytest.raises(MemoryError, match=r"buffer 'Big' float32\[1048576, 1048576\] needs "
                                          r"4096 GiB .* more than this machine's"):
        dag = tc.ComputeDAG([A, out])
        tc.build(dag, schedule=tc.Schedule(dag))  # Big at root (the default inlines it)


_ULIMIT = r"""
import resource, numpy as np, tecomp as tc
n = 2**14
A = tc.placeholder((n,), "float32", "A")
big = tc.compute((n, n), lambda i, j: A[i] * A[j], name="Big")   # a 1 GiB intermediate
k = tc.reduce_axis(n, "k")
out = tc.compute((4,), lambda i: tc.sum(big[i, k], axis=k), name="Out")
dag = tc.ComputeDAG([A, out])
kern = tc.build(dag, schedule=tc.Schedule(dag))  # Big at root (the default inlines it)
x = np.linspace(0.5, 1.5, n).astype(np.float32)
want = (x[:4, None] * x[None, :]).sum(axis=1)
np.testing.assert_allclose(kern(x), want, rtol=1e-4)
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
try:
    kern(x)
    print("no error")
except MemoryError as e:
    print(e)
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
np.testing.assert_allclose(kern(x), want, rtol=1e-4)
print("recovered")
"""


def test_an_allocation_that_fails_at_run_time_is_a_memory_error(tmp_path):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc to size the address-space limit")
    p = subprocess.run([sys.executable, "-c", _ULIMIT], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=root))
    assert p.returncode == 0, p.stderr[-2000:]  # it was a segfault (-11)
    lines = p.stdout.strip().splitlines()
    assert "allocating buffer 'Big' float32[16384, 16384] failed" in lines[0]
    assert lines[1] == "recovered"
