"""The default (untuned) matmul schedule beside numpy and torch, fp32, from one run, with the
protocol of ``tecomp.bench`` (every system at 1 and 2 threads, interleaved shuffled rounds).

    benchmarks/run.sh matmul_default.py [N ...]

The default schedule is the untuned baseline that hand schedules and the search improve on.
"""
import sys

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.report import compare_workload, print_header
from tecomp.testing.workloads import matmul


def main(sizes):
    peak = measure_peak()
    print_header(print, peak)
    for n in sizes:
        wl = matmul(n, n, n)
        print(f"\n== matmul {n}^3, default schedule", flush=True)
        compare_workload(wl, {"default": tc.build(wl.dag)},
                         wl.make_inputs(np.random.default_rng(0)), peak=peak, rounds=3)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [256, 512, 1024])
