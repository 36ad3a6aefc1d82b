"""Small shapes of every standard workload (:data:`tecomp.workloads.WORKLOADS`), for tests
that run many schedules of each through the interpreter (odd sizes on purpose: tails)."""
from __future__ import annotations

from ..workloads import WORKLOADS, get_workload

__all__ = ["SMALL_PARAMS", "small_workload"]

#: keyword arguments of each workload builder, small enough for the lockstep GPU emulator
SMALL_PARAMS = {
    "matmul": dict(M=16, N=12, K=8),
    "batch_matmul": dict(B=2, M=4, N=6, K=8),
    "conv2d": dict(N=1, C=4, H=6, W=6, O=4, KH=3, KW=3, padding=1),
    "conv2d_nchw": dict(N=1, C=3, H=5, W=5, O=4, KH=3, KW=3, stride=2, padding=1),
    "conv2d_nhwc": dict(N=1, C=4, H=6, W=6, O=4, KH=3, KW=3, padding=1, method="implicit_gemm"),
    "csr_spmm": dict(M=8, K=8, N=16, density=0.3, empty_rows=1),
    "bsr_spmm": dict(Mb=4, Kb=4, N=8, bs_r=2, bs_c=2, density=0.4, empty_rows=1),
    "sddmm": dict(M=8, N=8, K=8, density=0.3, empty_rows=1),
    "softmax": dict(M=4, N=64),
    "matmul_bias_relu": dict(M=8, N=8, K=8),
}
assert set(SMALL_PARAMS) == set(WORKLOADS)


def small_workload(name: str):
    """The workload ``name`` at its small shape."""
    return get_workload(name, **SMALL_PARAMS[name])
