"""The matmul variants of ``option_ab.py`` (transposed operands, a shared batch weight, a
lower-triangular ``A`` written as a select, causal attention's masked P.V), each tuned with the
defaults and timed beside torch (at 1 and 2 threads) with the protocol of ``tecomp.bench``,
fp32, in one run.

    benchmarks/run.sh matmul_variants.py [--trials 64] [--only trimm abt ...] [--logdir DIR]

GFLOP/s divide each operator's least work (the triangle's, for ``trimm``).
"""
import argparse
import os
import tempfile
import time

from operator_suite import case_inputs, torch_configs  # this folder's script
from option_ab import MATMULS

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import tecomp_configs
from tecomp.bench.report import print_header, print_host_check, run_comparison


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--only", nargs="+", default=list(MATMULS), choices=list(MATMULS))
    ap.add_argument("--logdir", default=None, help="keep the logs here (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="matmul_variants_")
    os.makedirs(logdir, exist_ok=True)
    peak = measure_peak()
    print_header(print, peak)
    for name in args.only:
        case = MATMULS[name]()
        log = os.path.join(logdir, f"{name}.jsonl")
        t0 = time.perf_counter()
        tc.tune(tc.SearchTask(case.dag, "llvm"), trials=args.trials, log=log,
                options=tc.TuningOptions(verbose=False, seed=args.seed))
        wall = time.perf_counter() - t0
        k = tc.build(case.dag, "llvm", log=log)
        x = case_inputs(case)
        print(f"\n== {name}: {args.trials} trials in {wall:.0f} s", flush=True)
        run_comparison(tecomp_configs(k, x, variant="tuned") + torch_configs(case, x),
                       case.reference(x)[0], case.flops(), peak=peak, rounds=args.rounds)
        print_host_check(print, peak)


if __name__ == "__main__":
    main()
