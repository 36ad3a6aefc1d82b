"""A measured FMA peak of this CPU, as a kernel compiled by tecomp itself.

Each thread updates ``n_acc`` independent vector accumulators (``acc = acc * a + b``) in registers
for ``steps`` rounds: enough independent FMAs to cover the FMA latency, no memory traffic. The
result is the machine's practical fp32 peak that the benchmarks quote next to their kernels.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt
from ..ir.expr import Const, Load, Var
from ..ir.loop import Allocate, Buffer, For, ForKind, PrimFunc, Scope, Store, seq

__all__ = ["peak_kernel", "measure_peak"]


def _c(v):
    return Const(v, dt.INDEX)


def peak_kernel(n_threads: int, lanes: int = 16, n_acc: int = 12, steps: int = 400000):
    """Loop IR of the FMA-peak kernel and its FLOP count."""
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


def measure_peak(n_threads: int, lanes: int = 16) -> float:
    """Measured fp32 GFLOP/s of ``n_threads`` threads running the FMA-peak kernel."""
    from ..codegen.llvm_cpu import compile_cpu
    from ..timing import time_callable
    func, flops = peak_kernel(n_threads, lanes)
    k = compile_cpu(func)
    out = np.empty(func.params[0].shape, np.float32)
    t = time_callable(lambda: k.run([out]), repeat=5)
    return flops / t / 1e9
