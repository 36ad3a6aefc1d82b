"""A tuning option's two settings side by side: each operator tuned from an empty log with the
option off and on (same seed, same budget), then both bests and torch timed interleaved with the
protocol of ``tecomp.bench`` in one process. One run is one draw of each search: judge an option
over several seeds, with nothing else running.

    benchmarks/run.sh option_ab.py --option panel_seeds --off 0 --on 2 --trials 64 --seed 0 \\
        --only mm1024 atb abt conv1d qkt [--logdir DIR]

Operators: the DSL suite's (``tecomp.testing.operator_suite``) and the matmul variants below,
which a user writes as often as the suite's matmul: square 1024^3 and 512^3, A^T.B and A.B^T
(a transposed operand), one weight shared by a batch of matrices, a lower-triangular A
written as a select in the reduction, and causal attention's P.V per head (P masked to
``k <= i``). Prints each operator's table and a line
``AB <op> off <ms> on <ms> torch <ms> on/off speedup <x>``, then the geometric mean.
"""
import argparse
import math
import os
import tempfile
import time

import numpy as np
from operator_suite import case_inputs, torch_configs

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import tecomp_configs
from tecomp.bench.report import print_header, run_comparison
from tecomp.testing.op_case import inputs_of, rand_input
from tecomp.testing.operator_suite import OPERATORS, OpCase, operator_case
from tecomp.workloads.builders import parse_value


def _matmul_case(name, a_shape, b_shape, out_shape, body, ref, peer, red=None, least=None):
    """An OpCase of ``out[...] = sum_k body(A, B, indices, k)`` over a reduction ``k`` of
    ``red`` (default: A's last dimension); ``least``: its work where the body adds zeros."""
    A = tc.placeholder(a_shape, name="A")
    B = tc.placeholder(b_shape, name="B")
    k = tc.reduce_axis(a_shape[-1] if red is None else red, name="k")
    out = tc.compute(out_shape, lambda *ix: tc.sum(body(A, B, ix, k), axis=k), name=name)
    return OpCase(name, tc.ComputeDAG([A, B, out]),
                  inputs_of(rand_input(a_shape), rand_input(b_shape)),
                  lambda x: [ref(x[0].astype(np.float64), x[1].astype(np.float64))],
                  lambda torch, x: (lambda a=torch.from_numpy(x[0]), b=torch.from_numpy(x[1]):
                                    lambda: peer(torch, a, b))(), least_flops=least)


MATMULS = {
    "mm1024": lambda: _matmul_case("mm1024", (1024, 1024), (1024, 1024), (1024, 1024),
                                   lambda A, B, ix, k: A[ix[0], k] * B[k, ix[1]],
                                   lambda a, b: a @ b, lambda t, a, b: a @ b),
    "mm512": lambda: _matmul_case("mm512", (512, 512), (512, 512), (512, 512),
                                  lambda A, B, ix, k: A[ix[0], k] * B[k, ix[1]],
                                  lambda a, b: a @ b, lambda t, a, b: a @ b),
    "atb": lambda: _matmul_case("atb", (1024, 512), (1024, 512), (512, 512),
                                lambda A, B, ix, k: A[k, ix[0]] * B[k, ix[1]],
                                lambda a, b: a.T @ b, lambda t, a, b: a.T @ b, red=1024),
    "abt": lambda: _matmul_case("abt", (512, 512), (512, 512), (512, 512),
                                lambda A, B, ix, k: A[ix[0], k] * B[ix[1], k],
                                lambda a, b: a @ b.T, lambda t, a, b: a @ b.T),
    "bmm_shared": lambda: _matmul_case("bmm_shared", (8, 256, 256), (256, 256), (8, 256, 256),
                                       lambda A, B, ix, k: A[ix[0], ix[1], k] * B[k, ix[2]],
                                       lambda a, b: a @ b, lambda t, a, b: a @ b),
    "trimm": lambda: _matmul_case(
        "trimm", (512, 512), (512, 512), (512, 512),
        lambda A, B, ix, k: tc.if_then_else(k <= ix[0], A[ix[0], k], 0.0) * B[k, ix[1]],
        lambda a, b: np.tril(a) @ b, lambda t, a, b: t.tril(a) @ b,
        least=2.0 * 512 * (512 * 513 // 2)),   # the lower triangle's rows times B
    # causal attention's P.V per head (BERT-base heads, 256 tokens): P masked to k <= i
    "causal_pv": lambda: _matmul_case(
        "causal_pv", (12, 256, 256), (12, 256, 64), (12, 256, 64),
        lambda A, B, ix, k: tc.if_then_else(k <= ix[1], A[ix[0], ix[1], k], 0.0)
        * B[ix[0], k, ix[2]],
        lambda a, b: np.tril(a) @ b, lambda t, a, b: t.tril(a) @ b,
        least=2.0 * 12 * 64 * (256 * 257 // 2)),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--option", required=True, help="a tc.TuningOptions field")
    ap.add_argument("--off", required=True)
    ap.add_argument("--on", required=True)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="+", default=list(MATMULS),
                    choices=list(MATMULS) + list(OPERATORS))
    ap.add_argument("--logdir", default=None, help="keep the logs here (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not hasattr(tc.TuningOptions(), args.option):
        ap.error(f"TuningOptions has no option {args.option!r}")
    logdir = args.logdir or tempfile.mkdtemp(prefix="option_ab_")
    os.makedirs(logdir, exist_ok=True)
    peak = measure_peak()
    print_header(peak=peak)
    speedups = []
    for name in args.only:
        case = MATMULS[name]() if name in MATMULS else operator_case(name, "bench")
        kernels, walls = {}, {}
        for arm in ("off", "on"):
            log = os.path.join(logdir, f"{name}_{arm}.jsonl")
            if os.path.exists(log):
                os.remove(log)
            opts = tc.TuningOptions(verbose=False, seed=args.seed,
                                    **{args.option: parse_value(getattr(args, arm))})
            t0 = time.perf_counter()
            tc.tune(tc.SearchTask(case.dag, "llvm"), trials=args.trials, log=log, options=opts)
            walls[arm] = time.perf_counter() - t0
            kernels[arm] = tc.build(case.dag, "llvm", log=log)
        x = case_inputs(case)
        print(f"\n{name}: tuning {walls['off']:.0f} s off, {walls['on']:.0f} s on")
        cfgs = (tecomp_configs(kernels["off"], x, variant="off")
                + tecomp_configs(kernels["on"], x, variant="on") + torch_configs(case, x))
        res = run_comparison(cfgs, case.reference(x)[0], case.flops(),
                             peak=peak, rounds=args.rounds)
        best = {}
        for t in res.comparison.timings:
            key = t.config.variant if t.config.system == "tecomp" else t.config.system
            best[key] = min(best.get(key, math.inf), t.median)
        speedups.append(best["off"] / best["on"])
        peer = f" torch {best['torch'] * 1e3:.4f}" if "torch" in best else ""
        print(f"AB {name} off {best['off'] * 1e3:.4f} on {best['on'] * 1e3:.4f}{peer} "
              f"on/off speedup {speedups[-1]:.3f}", flush=True)
    gm = math.exp(sum(map(math.log, speedups)) / len(speedups))
    print(f"\n{args.option} {args.off} -> {args.on}, seed {args.seed}, {args.trials} trials: "
          f"geomean speedup {gm:.3f} over {len(speedups)} operators, "
          f"{sum(s > 1 for s in speedups)} faster")


if __name__ == "__main__":
    main()
