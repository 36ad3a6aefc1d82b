"""Tune matmul 1024^3 and the 64x56x56 3x3 conv2d (NCHW and NHWC) with tecomp's search, then
time the best kernels beside their strongest fair peers (numpy and torch for matmul; torch eager
and frozen in both memory formats and ONNX Runtime for conv; each at 1 and 2 threads, with the
interleaved protocol of ``tecomp.bench``), fp32, from one run.

    benchmarks/run.sh tune_search.py [--trials 512] [--model random|default] [--logdir DIR]

Prints the tuning curve (best GFLOP/s after 64/128/256/512 trials), wall time, the share of time
spent searching versus measuring, the tuner's peak memory and the final ratios.
"""
import argparse
import os

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.report import compare_workload, print_header
from tecomp.search.cost_model import RandomModel
from tecomp.testing import workloads as W

CHECKPOINTS = (64, 128, 256, 512, 1000, 1024)


def _history(log, task):
    """(trials, best GFLOP/s so far) along a log, in the order it was measured."""
    from tecomp.schedule.records import load_records
    flops, best, out = task.flop_count(), float("inf"), []
    recs = [r for r in load_records(log) if r.workload_key == task.workload_key]
    for n, r in enumerate(recs, 1):
        best = min(best, r.result.mean_cost)
        out.append((n, flops / best / 1e9 if best < float("inf") else 0.0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=512)
    ap.add_argument("--model", choices=["random", "default"], default="random")
    ap.add_argument("--logdir", default="tuning_logs")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--reuse", action="store_true",
                    help="do not tune: take the curve and the best kernel from the existing logs")
    args = ap.parse_args()
    peak = measure_peak()
    cases = [("matmul", W.matmul(1024, 1024, 1024)),
             ("conv2d_nchw", W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NCHW", "direct")),
             ("conv2d_nhwc", W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NHWC", "direct"))]
    rows = []
    for name, wl in cases:
        if args.only and name not in args.only:
            continue
        task = tc.SearchTask(wl.dag)
        suffix = "random" if args.model == "random" else "learned"
        log = os.path.join(args.logdir, f"{name}_{suffix}.jsonl")
        if args.reuse:
            res, history = None, _history(log, task)
        else:
            if os.path.exists(log):
                os.remove(log)
            opt = tc.TuningOptions(verbose=True)
            model = RandomModel(0) if args.model == "random" else None
            res = tc.tune(task, trials=args.trials, log=log, options=opt, cost_model=model)
            history = res.history
        curve = {n: max((g for t, g in history if t <= n), default=0.0) for n in CHECKPOINTS
                 if n <= args.trials}
        x = wl.make_inputs(np.random.default_rng(0))
        k = tc.build(wl.dag, log=log)
        print(f"\n== {name}, best of {log}", flush=True)
        cmp = compare_workload(wl, {"tuned": k}, x, name=name, peak=peak)
        t, p = cmp.comparison.tecomp, cmp.comparison.peer
        share = res.search_seconds / max(res.wall_seconds, 1e-9) if res else 0.0
        rows.append((name, cmp.flops / t.median / 1e9, p.config.label, cmp.flops / p.median / 1e9,
                     cmp.ratio, curve, res, share))
    print()
    print_header(print, peak)
    print(f"{'task':<12} {'tecomp':>8} {'best peer':>34} {'GFLOP/s':>8} {'ratio':>6}  curve (best "
          f"GFLOP/s after N trials)")
    for name, g, pname, gp, ratio, curve, res, share in rows:
        cs = "  ".join(f"{n}:{v:.0f}" for n, v in curve.items())
        print(f"{name:<12} {g:8.1f} {pname:>34} {gp:8.1f} {ratio:6.3f}  {cs}")
    for name, g, pname, gp, ratio, curve, res, share in rows:
        if res is None:
            continue
        overhead = (res.wall_seconds - res.measure_seconds) / max(res.trials, 1)
        print(f"{name:<12} wall {res.wall_seconds:6.1f} s, search {share:5.1%} / measurement "
              f"{res.measure_seconds / max(res.wall_seconds, 1e-9):5.1%} of wall time, "
              f"{res.trials} trials, errors {res.errors}, peak RSS {res.peak_rss_mb:.0f} MiB; "
              f"search overhead (all but compile+run) {overhead * 1e3:.0f} ms per trial")


if __name__ == "__main__":
    main()
