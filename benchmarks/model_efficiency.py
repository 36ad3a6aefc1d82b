"""Search efficiency of the learned cost model against the random one, over several seeds.

    benchmarks/run.sh model_efficiency.py [--workload conv2d_nchw] [--trials 512] [--seeds 0 1 2]
        [--opt NAME=VALUE ...]

For each seed: a random-model search of ``--trials`` trials, then a learned-model (XGBoost)
search of ``--learned-trials`` trials (default a half of ``--trials``). The question is how many
trials the learned search needs to find a program as fast as the best one the random search found.

**Re-measured, interleaved.** On this machine a kernel's time moves with the machine's state by
up to 2x between minutes (other tenants of the host), so one tuner measurement of each program
makes "the best of 512" the luckiest sample of 512, and a search that finds programs as fast
but measures them at another minute never "reaches" it. After both searches of a seed, the
candidates for "best" are timed again, in the same minutes, round-robin (``--rounds`` rounds, the
median of each program's rounds counts): the random search's ``--top`` best programs by their
logged time, and the learned search's ``--top`` best among its first N trials for every
checkpoint N. The random search's best is the fastest of its re-measured programs; the learned
search reached it at the earliest trial that measured a program re-measured at least as fast.
Every re-measured kernel is checked against the workload's reference first. The tuner's own
(logged) figures are printed beside them.

``--pretrain "SPEC=LOG"`` (repeatable; SPEC as in ``python -m tecomp.search.model_eval
--other-log``) gives the learned model the measured programs of other workloads' logs before it
starts (a model that has seen other tunings on this machine); its logs are named
``*_pretrained_s*.jsonl``. ``--reuse-random`` / ``--reuse-learned`` take complete existing logs
instead of tuning again.
"""
import argparse
import os

import numpy as np
from search_sim import name_values  # a sibling script (benchmarks/ is on the path)

import tecomp as tc
from tecomp.search.cost_model import RandomModel
from tecomp.search.xgb_model import XGBModel
from tecomp.testing import workloads as W
from tecomp.timing import time_callable

CASES = {
    "matmul": lambda: W.matmul(1024, 1024, 1024),
    "conv2d_nhwc": lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NHWC", "direct"),
    "conv2d_nchw": lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NCHW", "direct"),
}
CHECKPOINTS = (8, 16, 32, 64, 96, 128, 171, 256, 384, 512)


def _records(log, task):
    from tecomp.schedule.records import load_records
    if not os.path.exists(log):
        return []
    return [r for r in load_records(log) if r.workload_key == task.workload_key]


def logged_best(recs, flops, n=None) -> float:
    """Best logged GFLOP/s among the first ``n`` records (all by default); 0 with none valid."""
    costs = [r.result.mean_cost for r in recs[:n] if r.result.is_valid]
    return flops / min(costs) / 1e9 if costs else 0.0


def top_indices(recs, k, n=None) -> list:
    """Indices of the ``k`` fastest valid records (by logged time) among the first ``n``."""
    idx = [i for i, r in enumerate(recs[:n]) if r.result.is_valid]
    return sorted(idx, key=lambda i: recs[i].result.mean_cost)[:k]


def remeasure(wl, programs: dict, rounds: int) -> dict:
    """``{key: steps}`` -> ``{key: median GFLOP/s}``: each kernel built, checked against the
    reference, then timed once per round, round-robin over all of them."""
    x = wl.make_inputs(np.random.default_rng(0))
    want = wl.reference(x)[0]
    kernels, times = {}, {k: [] for k in programs}
    for key, steps in programs.items():
        k = tc.build(wl.dag, schedule=tc.Schedule.from_records(wl.dag, steps))
        y = k(*x)
        np.testing.assert_allclose(y, want, rtol=2e-3, atol=2e-3)
        kernels[key] = (k, y)
    for _ in range(rounds):
        for key, (k, y) in kernels.items():
            times[key].append(time_callable(lambda: k(*x, out=y), repeat=3, min_repeat_s=0.05))
    flops = wl.dag.flop_count()
    return {key: flops / float(np.median(t)) / 1e9 for key, t in times.items()}


def _tune(task, trials, log, opt, model, reuse):
    recs = _records(log, task) if reuse else []
    if len(recs) >= trials:
        return recs[:trials]
    if os.path.exists(log):
        os.remove(log)
    tc.tune(task, trials=trials, log=log, options=opt, cost_model=model)
    return _records(log, task)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="conv2d_nchw", choices=list(CASES))
    ap.add_argument("--trials", type=int, default=512)
    ap.add_argument("--learned-trials", type=int, default=None,
                    help="the learned search's budget (default: a half of --trials)")
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--logdir", default="tuning_logs/efficiency")
    ap.add_argument("--top", type=int, default=6, help="programs re-measured per run/checkpoint")
    ap.add_argument("--rounds", type=int, default=5, help="re-measurement rounds")
    ap.add_argument("--reuse-random", action="store_true",
                    help="take the random search from its existing complete log")
    ap.add_argument("--reuse-learned", action="store_true",
                    help="take the learned search from its existing complete log")
    ap.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE",
                    help="a TuningOptions field of both searches, e.g. fresh_picks=8")
    ap.add_argument("--pretrain", action="append", default=[], metavar="SPEC=LOG",
                    help="another workload's tuning log the learned model trains on first")
    args = ap.parse_args()
    from tecomp.schedule.records import load_records
    options = name_values(args.opt, tc.TuningOptions.__dataclass_fields__, "--opt")
    from tecomp.search.model_eval import task_and_log
    pre = [(t, load_records(p)) for t, p in map(task_and_log, args.pretrain)]
    os.makedirs(args.logdir, exist_ok=True)
    wl = CASES[args.workload]()
    task = tc.SearchTask(wl.dag)
    budget = args.learned_trials or args.trials // 2
    flops = task.flop_count()
    rows = []
    for seed in args.seeds:
        opt = tc.TuningOptions(**{**options, "seed": seed, "verbose": False})
        name = "pretrained" if pre else "learned"
        logs = {kind: os.path.join(args.logdir, f"{args.workload}_{kind}_s{seed}.jsonl")
                for kind in ("random", name)}
        rnd = _tune(task, args.trials, logs["random"], opt, RandomModel(seed), args.reuse_random)
        model = XGBModel(task, seed=seed)
        if pre and not args.reuse_learned:
            n = sum(model.add_records(t, recs) for t, recs in pre)
            model.train()
            print(f"learned model pre-trained on {n} programs of {len(pre)} other workload(s)")
        lrn = _tune(task, budget, logs[name], opt, model, args.reuse_learned)
        # the re-measured set: random's top by logged time, learned's top at every checkpoint
        progs = {}
        for i in top_indices(rnd, args.top):
            progs[("random", i)] = rnd[i].steps
        for n in [c for c in CHECKPOINTS if c < len(lrn)] + [len(lrn)]:
            for i in top_indices(lrn, args.top, n):
                progs[("learned", i)] = lrn[i].steps
        got = remeasure(wl, progs, args.rounds)
        target = max(g for (kind, _), g in got.items() if kind == "random")
        reached = sorted(i + 1 for (kind, i), g in got.items()
                         if kind == "learned" and g >= target * 0.999)
        need = reached[0] if reached else None
        lrn_best = max(g for (kind, _), g in got.items() if kind == "learned")
        rows.append((seed, target, need))
        print(f"seed {seed}: random search, {len(rnd)} trials: best {target:.1f} GFLOP/s "
              f"re-measured (logged {logged_best(rnd, flops):.1f}); learned, {len(lrn)} trials: best "
              f"{lrn_best:.1f} re-measured (logged {logged_best(lrn, flops):.1f}); the learned search "
              f"measured a program as fast at trial "
              f"{need if need else '>' + str(len(lrn))} ({(need or args.trials) / args.trials:.2f}"
              f" of {args.trials})", flush=True)
        for (kind, i), g in sorted(got.items(), key=lambda kv: -kv[1])[:8]:
            recs = rnd if kind == "random" else lrn
            print(f"    {kind:8s} trial {i + 1:4d} {recs[i].decisions.get('sketch', '?'):24s} "
                  f"logged {logged_best(recs[i:i + 1], flops):6.1f}  re-measured {g:6.1f}")
    fr = [(n or args.trials) / args.trials for _, _, n in rows]
    print(f"\nmean share of the random search's {args.trials} trials the learned search needed: "
          f"{sum(fr) / len(fr):.2f} (goal <= 0.33; a seed that did not reach it counts as 1)")


if __name__ == "__main__":
    main()
