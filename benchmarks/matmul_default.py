"""Default-schedule matmul beside numpy (OpenBLAS), fp32, from one run.

    .venv/bin/python benchmarks/matmul_default.py [N ...]

Reports GFLOP/s and the ratio tecomp/numpy. The default schedule is the untuned baseline that the
schedules and the search improve on.
"""
import sys

import numpy as np

import tecomp as tc
from tecomp.testing.workloads import matmul
from tecomp.timing import time_callable


def main(sizes):
    try:
        from threadpoolctl import threadpool_info
        blas = ", ".join(f"{i['internal_api']} {i.get('version')} threads={i['num_threads']}"
                         for i in threadpool_info())
    except ImportError:
        blas = "threadpoolctl not installed"
    print(f"numpy {np.__version__} ({blas})")
    print(f"{'size':>6} {'tecomp GFLOP/s':>15} {'numpy GFLOP/s':>14} {'ratio':>7}")
    for n in sizes:
        dag, make_inputs, _ = matmul(n, n, n)
        a, b = make_inputs(np.random.default_rng(0))
        kernel = tc.build(dag)
        flops = dag.flop_count()
        t = time_callable(lambda: kernel(a, b), repeat=3)
        tn = time_callable(lambda: a @ b, repeat=5)
        print(f"{n:>6} {flops / t / 1e9:>15.2f} {flops / tn / 1e9:>14.2f} {tn / t:>7.3f}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [256, 512, 1024])
