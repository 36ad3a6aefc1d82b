"""Whole-network tuning: the ResNet-18 layer set (batch 1, NHWC) with the gradient task scheduler
versus round-robin, at the same total trial budget, from one run.

    benchmarks/run.sh network_scheduler.py [--network resnet18] [--trials 384] [--model random|default]

Prints the weighted latency sum(count_i * best_i) of both strategies as the budget is spent, and
the final per-layer allocation.
"""
import argparse
import os

import tecomp as tc
from tecomp.search.cost_model import RandomModel
from tecomp.testing.networks import layer_set


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--network", default="resnet18")
    ap.add_argument("--trials", type=int, default=384)
    ap.add_argument("--logdir", default="tuning_logs")
    ap.add_argument("--model", choices=("random", "default"), default="random",
                    help="the cost model of every task: random, or the default (learned) one")
    args = ap.parse_args()
    layers = layer_set(args.network, layout="NHWC")
    tasks = [tc.SearchTask(wl.dag) for wl, _ in layers]
    weights = [c for _, c in layers]
    out = {}
    for strategy in ("gradient", "round-robin"):
        suffix = "" if args.model == "random" else "_learned"
        log = os.path.join(args.logdir, f"{args.network}_{strategy}{suffix}.jsonl")
        if os.path.exists(log):
            os.remove(log)
        opt = tc.TuningOptions(measures_per_round=16, verbose=False, seed=0)
        factory = (lambda t: RandomModel(0)) if args.model == "random" else None
        res = tc.tune_tasks(tasks, trials=args.trials, log=log, weights=weights, options=opt,
                            strategy=strategy, cost_model_factory=factory)
        out[strategy] = res
        print(f"{strategy:<12} weighted latency {res.weighted_latency * 1e3:8.3f} ms after "
              f"{sum(res.allocation)} trials", flush=True)
    print(f"\n{'trials':>7} " + " ".join(f"{s:>14}" for s in out))
    marks = sorted({t for r in out.values() for t, _ in r.history if t % 64 == 0 or
                    t == args.trials})
    for m in marks:
        vals = []
        for r in out.values():
            lat = [v for t, v in r.history if t <= m]
            vals.append(f"{lat[-1] * 1e3:11.3f} ms" if lat and lat[-1] < float("inf") else
                        f"{'-':>14}")
        print(f"{m:>7} " + " ".join(vals))
    print("\nlayer (count): trials gradient / round-robin, best ms gradient / round-robin")
    g, r = out["gradient"], out["round-robin"]
    for i, (wl, c) in enumerate(layers):
        print(f"  {wl!r:<100.100} ({c}): {g.allocation[i]:4d} / {r.allocation[i]:4d}, "
              f"{g.results[i].best_cost * 1e3:7.3f} / {r.results[i].best_cost * 1e3:7.3f}")
    ratio = r.weighted_latency / g.weighted_latency
    print(f"\nround-robin / gradient weighted latency: {ratio:.3f}")


if __name__ == "__main__":
    main()
