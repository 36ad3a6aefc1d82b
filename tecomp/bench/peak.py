"""A measured FMA peak and read bandwidth of this CPU, as kernels compiled by tecomp itself.

Peak: each thread updates ``n_acc`` independent vector accumulators (``acc = acc * a + b``) in
registers for ``steps`` rounds: enough independent FMAs to cover the FMA latency, no memory
traffic. The result is the machine's practical fp32 peak that the benchmarks quote next to their
kernels.

Bandwidth: each thread sums its contiguous share of a buffer into ``n_acc`` vector accumulators,
over and over, so the buffer sits wherever its size lets it (L2, L3 or DRAM), as a layer's
weights do when the layer runs again and again. A kernel that must read that many bytes can go no
faster: the bound of a memory-bound layer (a batch-1 dense layer, a matrix-vector product).
"""
from __future__ import annotations

import numpy as np

from ..codegen.vector_plan import register_bits
from ..ir import dtype as dt
from ..ir.expr import Const, Load, Var
from ..ir.loop import Allocate, Buffer, For, ForKind, PrimFunc, Scope, Store, seq

__all__ = ["peak_kernel", "measure_peak", "host_lanes", "bandwidth_kernel", "measure_bandwidth",
           "roofline_seconds", "STARVED_SHARE", "core_share", "host_check"]

#: below this share of ``cores x one core's FMA rate``, the all-core rate says that some core was
#: busy with other work (a shared host): figures timed at all threads are then pessimistic
STARVED_SHARE = 0.8


def host_lanes() -> int:
    """fp32 lanes of this CPU's vector registers (16 with AVX-512, 8 with AVX2)."""
    return register_bits() // 32


def _c(v):
    return Const(v, dt.INDEX)


def peak_kernel(n_threads: int, lanes: int | None = None, n_acc: int = 12, steps: int = 400000):
    """Loop IR of the FMA-peak kernel and its FLOP count (``lanes``: the host's by default; 12
    accumulators fit both 16 AVX2 and 32 AVX-512 registers and cover the FMA latency)."""
    lanes = lanes or host_lanes()
    out = Buffer("out", (n_threads, n_acc, lanes), dt.float32)
    acc = Buffer("acc", (n_acc, lanes), dt.float32, Scope.LOCAL)
    p, t, v, l = Var("p"), Var("t"), Var("v"), Var("l")
    a, b = Const(0.9999, dt.float32), Const(0.0001, dt.float32)

    def nest(body, vectorize=True):
        inner = For(l, _c(0), _c(lanes), ForKind.VECTORIZED if vectorize else ForKind.SERIAL, body)
        return For(v, _c(0), _c(n_acc), ForKind.UNROLLED, inner)
    # start off the fixed point of acc*a+b (1.0), or LLVM proves the loop constant and drops it
    init = nest(Store(acc, (v, l), Const(0.5, dt.float32)))
    update = For(t, _c(0), _c(steps), ForKind.SERIAL,
                 nest(Store(acc, (v, l), Load(acc, (v, l)) * a + b)))
    v2, l2 = Var("v"), Var("l")
    write = For(v2, _c(0), _c(n_acc), ForKind.UNROLLED,
                For(l2, _c(0), _c(lanes), ForKind.VECTORIZED,
                    Store(out, (p, v2, l2), Load(acc, (v2, l2)))))
    body = For(p, _c(0), _c(n_threads), ForKind.PARALLEL, Allocate(acc, seq(init, update, write)))
    func = PrimFunc("fma_peak", [out], body)
    return func, 2.0 * n_threads * steps * n_acc * lanes


def measure_peak(n_threads: int | None = None, lanes: int | None = None) -> float:
    """Measured fp32 GFLOP/s of ``n_threads`` (all cores by default) threads running the
    FMA-peak kernel: the best of 7 timings of a few milliseconds each."""
    import os
    import time

    from ..codegen.llvm_cpu import compile_cpu
    n_threads = n_threads or os.cpu_count() or 1
    func, flops = peak_kernel(n_threads, lanes, steps=2_000_000)  # ~5 ms a call at 150 GFLOP/s
    k = compile_cpu(func)
    out = np.empty(func.params[0].shape, np.float32)
    k.run([out])
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        k.run([out])
        best = min(best, time.perf_counter() - t0)
    return flops / best / 1e9


def core_share(all_cores: float, one_core: float, n_threads: int) -> float:
    """The all-core FMA rate as a share of ``n_threads`` times one thread's (1.0: every core was
    free to this process; 0.5 on two cores: one core's worth)."""
    if one_core <= 0 or n_threads <= 0:
        return float("nan")
    return all_cores / (one_core * n_threads)


def host_check(all_cores: float | None = None, n_threads: int | None = None) -> tuple:
    """``(share, warning)``: :func:`core_share` of the all-core FMA peak (measured unless given)
    against a one-thread one measured now, and a warning line when it is below
    :data:`STARVED_SHARE` (``None`` otherwise). On a shared host another tenant may hold a core
    for minutes; a comparison timed then says little about the multi-threaded figures."""
    import os
    n = n_threads or os.cpu_count() or 1
    if n == 1:
        return 1.0, None
    full = all_cores if all_cores is not None else measure_peak(n)
    share = core_share(full, measure_peak(1), n)
    if share < STARVED_SHARE:
        return share, (f"the cores were not all free: {n} threads ran the FMA peak at {share:.0%} "
                       f"of {n}x one thread's rate; figures at {n} threads are pessimistic, "
                       f"time again on a quiet host")
    return share, None


def bandwidth_kernel(n_threads: int, nbytes: int, reps: int = 1, lanes: int | None = None,
                     n_acc: int = 8):
    """Loop IR of the read-bandwidth kernel, reading a float32 buffer of about ``nbytes``
    (rounded up to whole ``n_threads x n_acc x lanes`` blocks) ``reps`` times, and the bytes one
    call reads."""
    lanes = lanes or host_lanes()
    block = n_threads * n_acc * lanes
    steps = max(1, -(-nbytes // (4 * block)))
    data = Buffer("data", (n_threads, steps, n_acc, lanes), dt.float32)
    out = Buffer("out", (n_threads, n_acc, lanes), dt.float32)
    acc = Buffer("acc", (n_acc, lanes), dt.float32, Scope.LOCAL)
    p, r, t, v, l = Var("p"), Var("r"), Var("t"), Var("v"), Var("l")

    def nest(body, v, l):
        return For(v, _c(0), _c(n_acc), ForKind.UNROLLED,
                   For(l, _c(0), _c(lanes), ForKind.VECTORIZED, body))
    init = nest(Store(acc, (v, l), Const(0.0, dt.float32)), v, l)
    v1, l1 = Var("v"), Var("l")
    update = For(r, _c(0), _c(reps), ForKind.SERIAL, For(
        t, _c(0), _c(steps), ForKind.SERIAL,
        nest(Store(acc, (v1, l1), Load(acc, (v1, l1)) + Load(data, (p, t, v1, l1))), v1, l1)))
    v2, l2 = Var("v"), Var("l")
    write = nest(Store(out, (p, v2, l2), Load(acc, (v2, l2))), v2, l2)
    body = For(p, _c(0), _c(n_threads), ForKind.PARALLEL, Allocate(acc, seq(init, update, write)))
    return PrimFunc("read_bandwidth", [data, out], body), 4 * block * steps * reps


def measure_bandwidth(nbytes: int, n_threads: int | None = None) -> float:
    """Measured read bandwidth in GB/s (1e9 bytes) of ``n_threads`` (all cores by default)
    threads reading a buffer of ``nbytes`` again and again (within one call, so that the call's
    own overhead does not count): the best of 7 calls of a few milliseconds each."""
    import os
    import time

    from ..codegen.llvm_cpu import compile_cpu
    n_threads = n_threads or os.cpu_count() or 1
    nbytes = max(int(nbytes), 1 << 12)
    reps = max(1, (64 << 20) // nbytes)  # ~64 MB read a call: milliseconds at any level
    func, moved = bandwidth_kernel(n_threads, nbytes, reps)
    k = compile_cpu(func)
    data = np.random.default_rng(0).random(func.params[0].shape, dtype=np.float32)
    args = [data, np.empty(func.params[1].shape, np.float32)]
    k.run(args)
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        k.run(args)
        best = min(best, time.perf_counter() - t0)
    return moved / best / 1e9


def roofline_seconds(flops: float, nbytes: float, peak_gflops: float, gbytes_s: float) -> float:
    """The least time a kernel of ``flops`` that must move ``nbytes`` can take at that FMA peak
    and bandwidth: whichever of the two bounds is higher."""
    return max(flops / (peak_gflops * 1e9), nbytes / (gbytes_s * 1e9))
