"""Tune sparse kernels with their real index data and time them beside scipy.sparse and
torch.sparse (each at 1 and 2 threads; scipy has no threaded SpMM) with the protocol of
``tecomp.bench``, fp32, from one run, on the matrix each was tuned on and on another random
matrix of the same shape and nnz.

    benchmarks/run.sh sparse_tuned.py [--trials 64] [--logdir DIR] [--quick]

Tasks: CSR SpMM 1024x1024 at densities 0.1, 0.05, 0.01 times a 1024x512 dense matrix; BSR SpMM of
the same size at 5% nonzero blocks for block sizes 1x1, 4x4, 16x16; SDDMM 1024x1024 at 5% with
K = 128. Each task is tuned (``tc.tune``, ``--trials`` measurements, the default cost model) on
its index data; the best record is built, checked and timed. Ratios are best peer time / tecomp
time (above 1: tecomp is faster). With ``--logdir tuning_logs/sparse --trials 0`` it re-times the
shipped logs without tuning.
"""
import argparse
import os
import tempfile
import time

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.report import compare_workload, geomean, print_header
from tecomp.testing import workloads as W


def tasks(quick: bool):
    n = 256 if quick else 1024
    out = [(f"csr_spmm d={d}", W.csr_spmm(n, n, n // 2, density=d, seed=1))
           for d in (0.1, 0.05, 0.01)]
    for bs in (1, 4, 16):
        out.append((f"bsr_spmm {bs}x{bs} d=0.05",
                    W.bsr_spmm(n // bs, n // bs, n // 2, bs, bs, density=0.05, seed=2)))
    out.append(("sddmm d=0.05 K=128", W.sddmm(n, n, 128, density=0.05, seed=3)))
    return out


def log_name(task_name: str) -> str:
    """``csr_spmm d=0.1`` -> ``csr_spmm_d0.1.jsonl`` (the names in tuning_logs/sparse/)."""
    return task_name.replace(" ", "_").replace("=", "") + ".jsonl"


def other_matrix(wl, x, rng):
    """The inputs with another random pattern of the same shapes and nnz (other row lengths)."""
    if wl.name == "sddmm":
        a, b, indices, indptr = x
        idx, ptr = W.random_pattern_like(rng, indptr, b.shape[0])
        return [a, b, idx, ptr]
    data, indices, indptr, dense = x
    ncols = dense.shape[0] // (data.shape[2] if data.ndim == 3 else 1)
    idx, ptr = W.random_pattern_like(rng, indptr, ncols)
    return [data, idx, ptr, dense]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64, help="measurements per task (0: re-time)")
    ap.add_argument("--logdir", default=None,
                    help="keep the tuning logs here (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="256-row matrices (a smoke run)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="sparse_tuned_")
    os.makedirs(logdir, exist_ok=True)
    peak = measure_peak()
    print_header(print, peak)
    print(f"{args.trials} trials per task, logs in {logdir}")
    rows = []
    rng = np.random.default_rng(0)
    for name, wl in tasks(args.quick):
        log = os.path.join(logdir, log_name(name))
        t0 = time.perf_counter()
        trials = 0
        if args.trials:
            task = tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data)
            trials = tc.tune(task, trials=args.trials, log=log,
                             options=tc.TuningOptions(verbose=False)).trials
        wall = time.perf_counter() - t0
        k = tc.build(wl.dag, "llvm", log=log)
        x = wl.make_inputs(np.random.default_rng(0))
        for which, xs in (("tuned matrix", x), ("other matrix", other_matrix(wl, x, rng))):
            print(f"\n== {name} ({which}), record of {log}", flush=True)
            res = compare_workload(wl, {"tuned": k}, xs, peak=peak, rounds=args.rounds)
            rows.append((f"{name} ({which})", trials, wall, res))
    print(f"\n{'task':<40} {'trials':>6} {'tune s':>7} {'tecomp ms':>10} {'best peer':<28} "
          f"{'ms':>8} {'ratio':>6}")
    for name, trials, wall, res in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        print(f"{name:<40} {trials:>6} {wall:>7.0f} {t.median * 1e3:>10.3f} {p.config.label:<28} "
              f"{p.median * 1e3:8.3f} {res.ratio:6.2f}")
    print(f"\ngeomean ratio {geomean([r.ratio for *_, r in rows]):.3f}")


if __name__ == "__main__":
    main()
