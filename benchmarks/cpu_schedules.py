"""Hand-scheduled tecomp kernels beside their strongest fair peers on this CPU, fp32, from one run,
with the machine's measured FMA peak (the protocol of ``tecomp.bench``: every system at 1 and 2
threads and its best layout, interleaved shuffled rounds, median of each round's fastest batch).

    benchmarks/run.sh cpu_schedules.py [--sizes 512 1024 2048] [--rounds 5]

Matmul against numpy (OpenBLAS) and torch; the 64x56x56 3x3 conv layer (NCHW and NHWC, direct and
implicit GEMM) against torch eager and frozen in both memory formats and ONNX Runtime. Ratios are
best peer time / tecomp time (above 1: tecomp is faster).
"""
import argparse

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.report import compare_workload, print_header
from tecomp.testing import workloads as W
from tecomp.testing.hand_schedules import conv2d_schedule, matmul_schedule


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for n in args.sizes:
        wl = W.matmul(n, n, n)
        k = tc.build(wl.dag, schedule=matmul_schedule(wl.dag))
        print(f"\n== matmul {n}^3", flush=True)
        rows.append((f"matmul {n}^3", compare_workload(
            wl, {"hand": k}, wl.make_inputs(np.random.default_rng(0)), peak=peak,
            rounds=args.rounds)))
    for layout in ("NCHW", "NHWC"):
        for method in ("direct", "implicit_gemm"):
            wl = W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, layout, method)
            k = tc.build(wl.dag, schedule=conv2d_schedule(wl.dag, layout, method))
            print(f"\n== conv2d {layout} {method}", flush=True)
            rows.append((f"conv2d {layout} {method}", compare_workload(
                wl, {"hand": k}, wl.make_inputs(np.random.default_rng(0)), name="conv2d",
                peak=peak, rounds=args.rounds)))
    print(f"\n{'kernel':<28} {'tecomp GFLOP/s':>14} {'best peer':<34} {'GFLOP/s':>8} "
          f"{'ratio':>6} {'peak':>5}")
    for label, res in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        g, gp = res.flops / t.median / 1e9, res.flops / p.median / 1e9
        print(f"{label:<28} {g:14.1f} {p.config.label:<34} {gp:8.1f} {res.ratio:6.3f} "
              f"{g / peak:5.0%}")


if __name__ == "__main__":
    main()
