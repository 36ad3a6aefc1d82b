"""How a search change fares across seeds: an operator of the DSL suite
(``tecomp.testing.operator_suite``) tuned from an empty log once per seed, each run's best
logged cost printed. One run of a small budget is one draw of the search; a change to its
priors is judged over several seeds, code before and after (``PYTHONPATH=<snapshot>``), with
nothing else running.

    benchmarks/run.sh search_seeds.py conv_transpose --trials 64 --seeds 1,2,3 [--logdir DIR]

These are the tuner's own measurements (mean of its repeats), not a comparison with a peer:
for speed against torch, ``operator_suite.py``.
"""
import argparse
import os
import tempfile
import time

import tecomp as tc
from tecomp.testing.operator_suite import OPERATORS, operator_case


def best_costs(log: str) -> list:
    """The log's error-free mean costs in seconds, best first."""
    return sorted(r.result.mean_cost for r in tc.load_records(log) if r.result.is_valid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op", choices=list(OPERATORS))
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated")
    ap.add_argument("--tag", default="run", help="a label printed on each line")
    ap.add_argument("--logdir", default=None, help="keep the logs here (default: a temp dir)")
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="search_seeds_")
    os.makedirs(logdir, exist_ok=True)
    for seed in (int(s) for s in args.seeds.split(",")):
        case = operator_case(args.op)
        log = os.path.join(logdir, f"{args.op}_{args.trials}_{seed}.jsonl")
        if os.path.exists(log):
            os.remove(log)
        t0 = time.perf_counter()
        tc.tune(tc.SearchTask(case.dag, "llvm"), trials=args.trials, log=log,
                options=tc.TuningOptions(verbose=False, seed=seed))
        wall = time.perf_counter() - t0
        costs = best_costs(log)
        third = f", 3rd {costs[2] * 1e3:.3f}" if len(costs) > 2 else ""
        print(f"{args.tag} {args.op} seed {seed}: best {costs[0] * 1e3:.3f} ms{third}, "
              f"{len(costs)} ran, {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()
