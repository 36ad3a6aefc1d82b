"""Tune sparse kernels with their real index data and time them beside scipy.sparse and
torch.sparse (each at 1 and 2 threads, the best count kept; scipy has no threaded SpMM) with the
protocol of ``tecomp.bench``, fp32, from one run: on the matrix each was tuned on, and, from the
SAME record, on matrices it was not tuned on.

    benchmarks/run.sh sparse_tuned.py [--trials 64] [--logdir DIR] [--quick] [--only csr]

Tasks: CSR SpMM 1024x1024 at densities 0.1, 0.05, 0.01 times a 1024x512 dense matrix; BSR SpMM of
the same size at 5% nonzero blocks for block sizes 1x1, 4x4, 16x16; SDDMM 1024x1024 at 5% with
K = 128. Each task is tuned (``tc.tune``, ``--trials`` measurements, the default cost model) on
its index data; the best record is built, checked and timed on these matrices (block rows/columns
for BSR):

- ``tuned``: the matrix it was tuned on;
- ``same nnz``: another uniform random pattern of the same nnz (the same workload key);
- ``0.5x nnz``, ``2x nnz``: uniform random patterns with half and twice the nonzeros;
- ``1.37x nnz, 1/8 rows empty``: another density, with empty rows;
- ``power-law rows``: one more nonzero than tuned, spread over rows with weights
  ``(rank+1)^-1`` (graph-like: a few full rows, a long tail of short and empty ones).

The matrices with another nnz are other workloads (another workload key): ``tc.build`` finds the
tuned record through its family key (:mod:`tecomp.schedule.record_family`); the ``record`` column
says which record built each kernel. Ratios are best peer time / tecomp time (above 1: tecomp is
faster). With ``--logdir tuning_logs/sparse --trials 0`` it re-times the shipped logs without
tuning (their records predate family keys: the tuned DAG's family is added in memory).
"""
import argparse
import os
import tempfile
import time

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.report import compare_workload, geomean, print_header
from tecomp.schedule.log_schedule import select_from_log
from tecomp.schedule.record_family import with_family
from tecomp.schedule.records import append_records, load_records
from tecomp.testing import sparse_patterns as SP
from tecomp.testing import workloads as W

MATRICES = ("tuned", "same nnz", "0.5x nnz", "2x nnz", "1.37x nnz, 1/8 rows empty",
            "power-law rows")


def tasks(quick: bool, only: str):
    n = 256 if quick else 1024
    out = [(f"csr_spmm d={d}", W.csr_spmm(n, n, n // 2, density=d, seed=1))
           for d in (0.1, 0.05, 0.01)]
    for bs in (1, 4, 16):
        out.append((f"bsr_spmm {bs}x{bs} d=0.05",
                    W.bsr_spmm(n // bs, n // bs, n // 2, bs, bs, density=0.05, seed=2)))
    out.append(("sddmm d=0.05 K=128", W.sddmm(n, n, 128, density=0.05, seed=3)))
    return [(name, wl) for name, wl in out if not only or name.startswith(only)]


def log_name(task_name: str) -> str:
    """``csr_spmm d=0.1`` -> ``csr_spmm_d0.1.jsonl`` (the names in tuning_logs/sparse/)."""
    return task_name.replace(" ", "_").replace("=", "") + ".jsonl"


def _shape(wl):
    """``(rows, cols)`` of the index pattern and a builder of the workload over a pattern."""
    p = wl.params
    if wl.name == "sddmm":
        return (p["M"], p["N"]), lambda i, q: SP.sddmm_on(i, q, p["N"], p["K"])
    if wl.name == "bsr_spmm":
        return (p["Mb"], p["Kb"]), lambda i, q: SP.bsr_spmm_on(i, q, p["Kb"], p["N"], p["bs_r"],
                                                               p["bs_c"])
    return (p["M"], p["K"]), lambda i, q: SP.csr_spmm_on(i, q, p["K"], p["N"])


def other_matrices(wl, rng):
    """``[(label, workload)]``: the workloads of :data:`MATRICES` after ``tuned``."""
    (rows, cols), build = _shape(wl)
    indptr = wl.index_data["indptr"]
    nnz = int(indptr[-1])
    full = rows * cols
    pats = [W.random_pattern_like(rng, indptr, cols),
            SP.pattern(rng, rows, cols, nnz // 2),
            SP.pattern(rng, rows, cols, min(2 * nnz, full)),
            SP.pattern(rng, rows, cols, min(int(1.37 * nnz), (rows - rows // 8) * cols),
                       empty_rows=rows // 8),
            SP.pattern(rng, rows, cols, min(nnz + 1, full), SP.RowLengths.POWER_LAW, alpha=1.0)]
    return [(label, build(*p)) for label, p in zip(MATRICES[1:], pats)]


def usable_log(log, wl, tmpdir):
    """``log``, or a copy whose records of ``wl`` carry its family key (logs from before family
    keys: their records would serve only their own nnz)."""
    recs = load_records(log)
    if all(r.family for r in recs if r.workload_key == wl.dag.workload_key):
        return log
    path = os.path.join(tmpdir, os.path.basename(log))
    if os.path.exists(path):
        os.remove(path)
    append_records(path, with_family(recs, wl.dag))
    print(f"   ({log}: its records predate family keys; timed from a copy that adds them)")
    return path


def kernel_for(wl, log, tuned_key):
    """The kernel ``tc.build`` makes for ``wl`` from ``log``, and which record it used."""
    target = tc.Target.parse("llvm")
    sched, rec = select_from_log(wl.dag, log, target, on_missing="default")
    if sched is None:
        return tc.build(wl.dag, "llvm"), "default schedule (no usable record)"
    how = "own key" if rec.workload_key == wl.dag.workload_key else "family"
    same = "the tuned best" if rec.key == tuned_key else "another record"
    return tc.build(wl.dag, "llvm", schedule=sched), f"{how}: {same}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64, help="measurements per task (0: re-time)")
    ap.add_argument("--logdir", default=None,
                    help="keep the tuning logs here (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="256-row matrices (a smoke run)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="", help="tasks whose name starts with this (csr, bsr, sddmm)")
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="sparse_tuned_")
    os.makedirs(logdir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="sparse_tuned_family_")
    peak = measure_peak()
    print_header(print, peak)
    print(f"{args.trials} trials per task, logs in {logdir}")
    rows = []
    rng = np.random.default_rng(0)
    for name, wl in tasks(args.quick, args.only):
        log = os.path.join(logdir, log_name(name))
        t0 = time.perf_counter()
        trials = 0
        if args.trials:
            task = tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data)
            trials = tc.tune(task, trials=args.trials, log=log,
                             options=tc.TuningOptions(verbose=False)).trials
        wall = time.perf_counter() - t0
        log = usable_log(log, wl, scratch)
        _, best = select_from_log(wl.dag, log, tc.Target.parse("llvm"))
        k = tc.build(wl.dag, "llvm", log=log)
        x = wl.make_inputs(np.random.default_rng(0))
        runs = [("tuned", wl, k, x, "own key: the tuned best")]
        for label, w2 in other_matrices(wl, rng):
            k2, how = kernel_for(w2, log, best.key)
            runs.append((label, w2, k2, w2.make_inputs(np.random.default_rng(1)), how))
        for label, w2, k2, xs, how in runs:
            nnz = int(w2.index_data["indptr"][-1])
            lengths = np.diff(w2.index_data["indptr"])
            print(f"\n== {name} ({label}: nnz {nnz}, rows up to {lengths.max()} long, "
                  f"{int((lengths == 0).sum())} empty), record: {how}", flush=True)
            res = compare_workload(w2, {"tuned": k2}, xs, peak=peak, rounds=args.rounds)
            rows.append((name, label, how, trials, wall, res))
    print(f"\n{'task':<24} {'matrix':<27} {'record':<24} {'trials':>6} {'tune s':>6} "
          f"{'tecomp ms':>10} {'best peer':<28} {'ms':>8} {'ratio':>6}")
    for name, label, how, trials, wall, res in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        print(f"{name:<24} {label:<27} {how:<24} {trials:>6} {wall:>6.0f} {t.median * 1e3:>10.3f} "
              f"{p.config.label:<28} {p.median * 1e3:8.3f} {res.ratio:6.2f}")
    print("\ngeomean ratio by matrix (best peer time / tecomp time):")
    for label in MATRICES:
        rs = [r.ratio for _, lab, *_, r in rows if lab == label]
        if rs:
            print(f"  {label:<27} {geomean(rs):.3f}  (min {min(rs):.2f}, {len(rs)} tasks)")
    others = [r.ratio for name, lab, *_, r in rows if lab != "tuned" and name.startswith("csr")]
    if others:
        print(f"CSR SpMM on matrices other than the tuned one: geomean {geomean(others):.3f}, "
              f"min {min(others):.2f} ({len(others)} matrices)")
    print(f"geomean ratio, all {len(rows)} rows: {geomean([r.ratio for *_, r in rows]):.3f}")


if __name__ == "__main__":
    main()
