"""Hand-scheduled tecomp kernels beside numpy (OpenBLAS) and torch (oneDNN) on this CPU, fp32,
from one run, with the machine's measured FMA peak.

    benchmarks/run.sh cpu_schedules.py [--threads 2] [--sizes 512 1024 2048]

Every kernel is checked against its reference before it is timed. Ratios are peer time / tecomp
time (> 1: tecomp is faster).
"""
import argparse

import numpy as np

import tecomp as tc
from tecomp.codegen import parallel
from tecomp.testing import workloads as W
from tecomp.testing.hand_schedules import conv2d_schedule, matmul_schedule
from tecomp.testing.peak import measure_peak
from tecomp.timing import time_callable


def _check(kernel, wl, x):
    np.testing.assert_allclose(kernel(*x), wl.reference(x)[0], rtol=2e-3, atol=2e-3)


def bench_matmul(n, peak):
    wl = W.matmul(n, n, n)
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, schedule=matmul_schedule(wl.dag))
    _check(k, wl, x)
    flops = wl.dag.flop_count()
    t = time_callable(lambda: k(*x), repeat=7)
    a, b = x
    tn = time_callable(lambda: a @ b, repeat=7)
    g, gn = flops / t / 1e9, flops / tn / 1e9
    print(f"matmul {n}^3{'':<14} {g:8.1f} {gn:8.1f}  numpy  {tn / t:6.3f}  {g / peak:5.0%}")


def bench_conv(layout, method, peak, torch):
    wl = W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, layout, method)
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, schedule=conv2d_schedule(wl.dag, layout, method))
    _check(k, wl, x)
    flops = wl.dag.flop_count()
    t = time_callable(lambda: k(*x), repeat=7)
    g = flops / t / 1e9
    peer, gp = "-", float("nan")
    if torch is not None:
        data, weight = (torch.from_numpy(a) for a in x)
        if layout == "NHWC":  # torch's channels_last is NHWC in memory
            data = data.permute(0, 3, 1, 2)
            weight = weight.permute(3, 2, 0, 1).contiguous()
            conv = torch.nn.functional.conv2d
            fn = lambda: conv(data, weight, padding=1)  # noqa: E731
        else:
            fn = lambda: torch.nn.functional.conv2d(data, weight, padding=1)  # noqa: E731
        with torch.no_grad():
            tp = time_callable(fn, repeat=7)
        peer, gp = "torch", flops / tp / 1e9
    print(f"conv2d {layout} {method:<14} {g:8.1f} {gp:8.1f}  {peer:<6} {g / gp:6.3f}  {g / peak:5.0%}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048])
    args = ap.parse_args()
    parallel.set_num_threads(args.threads)
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
        threadpool_limits(args.threads)
        blas = ", ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')}) "
                         f"threads={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        blas = "threadpoolctl missing: numpy thread count not controlled"
    try:
        import torch
        torch.set_num_threads(args.threads)
        tver = f"torch {torch.__version__} threads={torch.get_num_threads()}"
    except ImportError:
        torch, tver = None, "torch not installed (conv peers skipped)"
    peak1, peak = measure_peak(1), measure_peak(args.threads)
    print(f"# threads={args.threads}; numpy {np.__version__}: {blas}; {tver}")
    print(f"# measured fp32 FMA peak: {peak1:.1f} GFLOP/s on 1 thread, {peak:.1f} on {args.threads}")
    print(f"{'kernel':<31} {'tecomp':>8} {'peer':>8}  {'':<6} {'ratio':>6}  {'%peak':>5}")
    for n in args.sizes:
        bench_matmul(n, peak)
    for layout in ("NCHW", "NHWC"):
        for method in ("direct", "implicit_gemm"):
            bench_conv(layout, method, peak, torch)


if __name__ == "__main__":
    main()
