"""A measured FMA peak of this CPU, as a kernel compiled by tecomp itself.

Each thread updates ``n_acc`` independent vector accumulators (``acc = acc * a + b``) in registers
for ``steps`` rounds: enough independent FMAs to cover the FMA latency, no memory traffic. The
result is the machine's practical fp32 peak that the benchmarks quote next to their kernels.
"""
from __future__ import annotations

import numpy as np

from ..codegen.vector_plan import register_bits
from ..ir import dtype as dt
from ..ir.expr import Const, Load, Var
from ..ir.loop import Allocate, Buffer, For, ForKind, PrimFunc, Scope, Store, seq

__all__ = ["peak_kernel", "measure_peak", "host_lanes"]


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
