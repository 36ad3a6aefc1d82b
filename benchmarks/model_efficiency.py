"""Search efficiency of the learned cost model against the random one, over several seeds.

    benchmarks/run.sh model_efficiency.py [--workload conv2d_nhwc] [--trials 512] [--seeds 0 1 2]

For each seed: random-model search for ``--trials`` trials, then learned-model search (XGBoost)
until it reaches the random search's final best (or ``--trials`` trials). Prints, per seed, the
trials each needed and the ratio, and the mean.

``--pretrain "SPEC=LOG"`` (repeatable; SPEC as in ``python -m tecomp.search.model_eval
--other-log``) gives the learned model the measured programs of other workloads' logs before it
starts (a model that has seen other tunings on this machine); its logs are named
``*_pretrained_s*.jsonl``.
"""
import argparse
import os

import tecomp as tc
from tecomp.search.cost_model import RandomModel
from tecomp.search.xgb_model import XGBModel
from tecomp.testing import workloads as W

CASES = {
    "matmul": lambda: W.matmul(1024, 1024, 1024),
    "conv2d_nhwc": lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NHWC", "direct"),
    "conv2d_nchw": lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NCHW", "direct"),
}


def _history(log, task):
    """(trials, best GFLOP/s so far) along a log; empty when there is none."""
    from tecomp.schedule.records import load_records
    if not os.path.exists(log):
        return []
    best, out = float("inf"), []
    for n, r in enumerate(load_records(log), 1):
        best = min(best, r.result.mean_cost)
        out.append((n, task.flop_count() / best / 1e9 if best < float("inf") else 0.0))
    return out


def first_reaching(history, target_gflops):
    for t, g in history:
        if g >= target_gflops * 0.999:
            return t
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="conv2d_nhwc", choices=list(CASES))
    ap.add_argument("--trials", type=int, default=512)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--logdir", default="tuning_logs/efficiency")
    ap.add_argument("--reuse-random", action="store_true",
                    help="take the random search's best from its existing complete log")
    ap.add_argument("--pretrain", action="append", default=[], metavar="SPEC=LOG",
                    help="another workload's tuning log the learned model trains on first")
    args = ap.parse_args()
    from tecomp.schedule.records import load_records
    from tecomp.search.model_eval import task_and_log
    pre = [(t, load_records(p)) for t, p in map(task_and_log, args.pretrain)]
    os.makedirs(args.logdir, exist_ok=True)
    wl = CASES[args.workload]()
    task = tc.SearchTask(wl.dag)
    rows = []
    for seed in args.seeds:
        opt = tc.TuningOptions(seed=seed, verbose=False)
        logs = {kind: os.path.join(args.logdir, f"{args.workload}_{name}_s{seed}.jsonl")
                for kind, name in (("random", "random"),
                                   ("learned", "pretrained" if pre else "learned"))}
        done = _history(logs["random"], task) if args.reuse_random else []
        for kind in ("random", "learned"):
            if os.path.exists(logs[kind]) and not (kind == "random" and len(done) >= args.trials):
                os.remove(logs[kind])
        if len(done) >= args.trials:
            target = max(g for _, g in done[:args.trials])
        else:
            target = tc.tune(task, trials=args.trials, log=logs["random"], options=opt,
                             cost_model=RandomModel(seed)).best_gflops

        class Stop(Exception):
            pass

        def progress(res, target=target):
            if res.best_gflops >= target * 0.999:
                raise Stop
        model = XGBModel(task, seed=seed)
        if pre:
            n = sum(model.add_records(t, recs) for t, recs in pre)
            model.train()
            print(f"learned model pre-trained on {n} programs of {len(pre)} other workload(s)")
        try:
            lrn = tc.tune(task, trials=args.trials, log=logs["learned"], options=opt,
                          cost_model=model, progress=progress)
            hist = lrn.history
        except Stop:
            hist = _history(logs["learned"], task)
        need = first_reaching(hist, target)
        rows.append((seed, target, need))
        print(f"seed {seed}: random best after {args.trials} trials {target:.1f} GFLOP/s; learned "
              f"reached it after {need if need else '>' + str(args.trials)} trials "
              f"({(need or args.trials) / args.trials:.2f} of the budget)", flush=True)
    fr = [(n or args.trials) / args.trials for _, _, n in rows]
    print(f"\nmean share of the budget the learned model needed: {sum(fr) / len(fr):.2f} "
          f"(goal <= 0.33)")


if __name__ == "__main__":
    main()
