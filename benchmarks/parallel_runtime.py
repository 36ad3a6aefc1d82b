"""The parallel-loop runtime: launch overhead of the thread pool and the speed-up of parallel kernels.

    .venv/bin/python benchmarks/parallel_runtime.py [--threads N]

Launch overhead: an "empty" kernel (one trivial store per thread) with a parallel loop, against the
same kernel with a serial loop, both called directly through ctypes (median per call over many
calls; the overhead is the difference of the medians, "best" the fastest batch); "hot" is
back-to-back calls (workers still spinning), "cold" has 5 ms pauses between calls
(workers asleep on their futex), "native" launches 10^5 times from inside one kernel (no Python).
Compute: exp over 2^24 float32 and matmul 512^3 (loop order i, k, j), parallel outer loop, with 1
and with N threads (default: all cores); measurements alternate between the settings and the best
median of each is kept, since other processes on the machine disturb single runs; "cpu/wall" is the
process's CPU time over wall time with N threads (N when every thread is busy).
"""
import argparse
import os
import statistics
import time

import numpy as np

import tecomp as tc
from tecomp.codegen import parallel as P
from tecomp.codegen import threadpool
from tecomp.codegen.llvm_cpu import compile_cpu
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var
from tecomp.ir.loop import Buffer, For, ForKind, PrimFunc, Store
from tecomp.testing.workloads import matmul
from tecomp.timing import time_callable


def _c(v):
    return Const(v, dt.INDEX)


def empty_kernel(kind, n, repeat=None):
    """``B[i] = A[i]`` for ``i < n`` (inside ``for r < repeat`` when given) as a ctypes call."""
    A, B = Buffer("A", (n,), dt.float32), Buffer("B", (n,), dt.float32)
    i, r = Var("i"), Var("r")
    body = For(i, _c(0), _c(n), kind, Store(B, (i,), Load(A, (i,))))
    if repeat is not None:
        body = For(r, _c(0), _c(repeat), ForKind.SERIAL, body)
    k = compile_cpu(PrimFunc(f"empty_{kind.value}", [A, B], body))
    a, b = np.ones(n, np.float32), np.zeros(n, np.float32)
    pa, pb, f = a.ctypes.data, b.ctypes.data, k._cfunc

    def call():
        f(pa, pb)
    call.keep = (k, a, b)  # the arrays and the JIT code live as long as the callable
    return call


def per_call(fn, calls=2000, batches=25):
    """Median and minimum over ``batches`` of the mean seconds per call in a batch of ``calls``."""
    for _ in range(calls):
        fn()
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls)
    return statistics.median(out), min(out)


def per_call_cold(fn, calls=200, pause=5e-3):
    """Median and minimum seconds of single calls made ``pause`` seconds apart (idle workers
    asleep)."""
    out = []
    for _ in range(calls):
        time.sleep(pause)
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out)


def launch_overhead(threads):
    P.set_num_threads(threads)
    serial = empty_kernel(ForKind.SERIAL, threads)
    par = empty_kernel(ForKind.PARALLEL, threads)
    reps = 100_000
    native = empty_kernel(ForKind.PARALLEL, threads, repeat=reps)
    native_serial = empty_kernel(ForKind.SERIAL, threads, repeat=reps)
    rows = []
    (t_ser, _), (t_par, b_par) = per_call(serial), per_call(par)
    rows.append(("hot (back-to-back ctypes calls)", t_par, t_par - t_ser, b_par))
    (t_ser_c, _), (t_par_c, b_par_c) = per_call_cold(serial), per_call_cold(par)
    rows.append(("cold (workers asleep, 5 ms apart)", t_par_c, t_par_c - t_ser_c, b_par_c))
    (t_nat, b_nat) = per_call(native, calls=3, batches=7)
    t_nat_ser = per_call(native_serial, calls=3, batches=7)[0]
    rows.append(("native (10^5 launches in one kernel)", (t_nat - t_nat_ser) / reps,
                 (t_nat - t_nat_ser) / reps, (b_nat - t_nat_ser) / reps))
    P.set_num_threads(1)
    t_one, b_one = per_call(par)
    rows.append(("1 thread (runtime runs it serially)", t_one, t_one - t_ser, b_one))
    return t_ser, rows


def exp_kernel(n=1 << 24):
    A = tc.placeholder((n,), dtype="float32", name="A")
    B = tc.compute((n,), lambda i: tc.exp(A[i]), name="B")
    dag = tc.ComputeDAG([A, B])
    s = tc.Schedule(dag)
    io, _ = s[B].split(s[B].axes[0], factor=1 << 14)
    s[B].parallel(io)
    k = tc.build(dag, schedule=s)
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = k(a)
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-5)
    return "exp, 2^24 float32", lambda: k(a, out=out)


def matmul_kernel(n=512):
    wl = matmul(n, n, n)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    i, j = s[C].axes
    (k,) = s[C].reduce_axes
    s[C].reorder(i, k, j)
    s[C].parallel(i)
    kern = tc.build(wl.dag, schedule=s)
    a, b = wl.make_inputs(np.random.default_rng(0))
    out = kern(a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
    return f"matmul {n}^3 float32", lambda: kern(a, b, out=out)


def speedup(fn, threads, rounds=4):
    """Best median seconds per call with 1 and with ``threads`` threads, and the process's CPU time
    over wall time while running with ``threads`` (about ``threads`` when every thread works)."""
    best = {1: float("inf"), threads: float("inf")}
    cpu = wall = 0.0
    for _ in range(rounds):
        for t in best:
            P.set_num_threads(t)
            c0, w0 = time.process_time(), time.perf_counter()
            best[t] = min(best[t], time_callable(fn, repeat=5, min_repeat_s=0.2))
            if t == threads:
                cpu += time.process_time() - c0
                wall += time.perf_counter() - w0
    return best[1], best[threads], cpu / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=P.default_num_threads())
    args = ap.parse_args()
    n = args.threads
    print(f"{os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}, load average "
          f"{os.getloadavg()[0]:.2f}, spin {threadpool.SPIN_SECONDS * 1e6:.0f} us")
    t_ser, rows = launch_overhead(n)
    print(f"\nlaunch of an empty parallel kernel, {n} threads (empty serial kernel: "
          f"{t_ser * 1e6:.2f} us per ctypes call)")
    print(f"{'case (medians; best: fastest batch)':<40} {'absolute us':>12} {'overhead us':>12} "
          f"{'best us':>8}")
    for name, absolute, over, best in rows:
        print(f"{name:<40} {absolute * 1e6:>12.2f} {over * 1e6:>12.2f} {best * 1e6:>8.2f}")
    print("\ncompute-bound kernels, parallel outer loop")
    print(f"{'kernel':<22} {'1 thread ms':>12} {f'{n} threads ms':>13} {'ratio':>7} "
          f"{'cpu/wall':>9}")
    for name, fn in (exp_kernel(), matmul_kernel()):
        t1, tn, busy = speedup(fn, n)
        print(f"{name:<22} {t1 * 1e3:>12.2f} {tn * 1e3:>13.2f} {t1 / tn:>7.2f} {busy:>9.2f}")
    P.set_num_threads(P.default_num_threads())


if __name__ == "__main__":
    main()
