"""Operators written in the DSL (``tecomp.testing.operator_suite``: no ``tc.ops`` rule knows them),
each tuned for a fixed small budget with the defaults, then timed beside torch (at 1 and 2
threads) with the protocol of ``tecomp.bench``, fp32, from one run.

    benchmarks/run.sh operator_suite.py [--trials 128] [--only softmax conv1d ...] [--logdir DIR]
    benchmarks/run.sh operator_suite.py --no-tune --logdir DIR   # time the logs in DIR again

Prints per operator: tuning trials and wall time, tecomp's best ms, torch's best ms and the ratio
(torch / tecomp: above 1, tecomp is faster); then the geometric mean and the slowest operator.
A host check follows each operator's table: the machine is shared, and a tenant that takes a
core in the middle of the suite slows both systems' 2-thread figures (a 1-d conv at its 1-thread
time in one run), which the check at the start alone does not show.
The same suite with TVM MetaSchedule as a third system (same trials): ``tvm_suite.py``.
"""
import argparse
import os
import tempfile
import time

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import tecomp_configs
from tecomp.bench.protocol import Config
from tecomp.bench.report import geomean, print_header, print_host_check, run_comparison
from tecomp.bench.threads import thread_counts, torch_threads
from tecomp.codegen.memory import aligned_copy
from tecomp.testing.operator_suite import OPERATORS, operator_case


def case_inputs(case) -> list:
    """The operator's inputs as the same cache-line-aligned arrays for every system (numpy
    promises 16 bytes; the search measures, and a compiled model runs, on aligned buffers)."""
    return [aligned_copy(a) for a in case.make_inputs(np.random.default_rng(0))]


def torch_configs(case, x) -> list:
    import torch
    if case.torch_fn is None:
        return []
    fn = case.torch_fn(torch, x)

    def run():
        with torch.inference_mode():
            return fn()
    return [Config("torch", "", n, run, torch_threads(n), lambda: run().contiguous().numpy())
            for n in thread_counts()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--only", nargs="+", default=list(OPERATORS), choices=list(OPERATORS))
    ap.add_argument("--logdir", default=None, help="keep the logs here (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-tune", action="store_true",
                    help="time the logs already in --logdir, without tuning")
    args = ap.parse_args()
    if args.no_tune and not args.logdir:
        ap.error("--no-tune needs --logdir (the logs to time)")
    logdir = args.logdir or tempfile.mkdtemp(prefix="operator_suite_")
    os.makedirs(logdir, exist_ok=True)
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for name in args.only:
        case = operator_case(name)
        log = os.path.join(logdir, f"{name}.jsonl")
        t0 = time.perf_counter()
        if args.no_tune:
            trials = len(tc.load_records(log))
        else:
            trials = tc.tune(tc.SearchTask(case.dag, "llvm"), trials=args.trials, log=log,
                             options=tc.TuningOptions(verbose=False)).trials
        wall = time.perf_counter() - t0
        k = tc.build(case.dag, "llvm", log=log)
        x = case_inputs(case)
        print(f"\n== {name}: {trials} trials in {wall:.0f} s", flush=True)
        cmp = run_comparison(tecomp_configs(k, x, variant="tuned") + torch_configs(case, x),
                             case.reference(x)[0], case.flops(), peak=peak,
                             rounds=args.rounds)
        print_host_check(print, peak)
        rows.append((name, trials, wall, cmp))
    print(f"\n{'operator':<16} {'trials':>6} {'tune s':>7} {'tecomp ms':>10} {'torch ms':>9} "
          f"{'ratio':>6}")
    ratios = []
    for name, trials, wall, cmp in rows:
        t, p = cmp.comparison.tecomp, cmp.comparison.peer
        pm = f"{p.median * 1e3:9.4f}" if p else f"{'-':>9}"
        print(f"{name:<16} {trials:>6} {wall:>7.0f} {t.median * 1e3:10.4f} {pm} "
              f"{cmp.ratio:6.2f}")
        if p:
            ratios.append((cmp.ratio, name))
    if ratios:
        print(f"\ngeomean {geomean([r for r, _ in ratios]):.3f} vs torch over {len(ratios)} "
              f"operators; slowest {min(ratios)[1]} {min(ratios)[0]:.2f}x")


if __name__ == "__main__":
    main()
