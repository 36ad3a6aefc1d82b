"""Simulated tuning: compare search settings without the machine's measurement noise.

    benchmarks/run.sh search_sim.py [--workload conv2d_nchw] [--trials 256] [--seeds 0 1 2 3 4 5]
        [--log LOG ...] [--opt NAME=VALUE ...] [--model learned|random] [--noise 0.15]
        [--model-opt NAME=VALUE ...] [--versus-random 512 [--random-cache JSON]] [--curves JSON]
        [--start LOG:N]

On this machine one kernel's time moves by up to 2x between minutes, so a real 3-seed efficiency
run (``model_efficiency.py``, about 15 minutes) cannot tell two search settings apart unless they
differ a lot. Here the measurer is a *surrogate*: an XGBoost regressor (log-scaled labels) trained
on every program of the given real tuning logs, whose prediction stands for a program's
throughput (``best logged GFLOP/s * 2^(10 (y - 1))``), times a lognormal noise of ``--noise``. The
search under test (``TuningOptions`` overridden by ``--opt``) runs its real rounds against it:
sketches, annotation, evolution, the learned model and its retraining, everything but the kernel
runs. Printed per seed: the surrogate's throughput of the best program found after 16, 32, 64,
128, 256, ... trials (noise-free), then the mean over seeds. ``--model-opt`` sets an argument of
the learned model (``XGBModel``). ``--versus-random N`` asks the efficiency question of
``model_efficiency.py`` in the simulation: per seed, a random-model search of N trials, and the
trial at which the search under test found a program as good as its best (a random search of
512 trials takes about 4 minutes a seed, hence ``--random-cache``). ``--start LOG:N`` resumes
every seed from a real run's first N records (its real costs): does a setting get a stalled run
out of where it stalled?

It is a guide, not a verdict: the surrogate knows only what the logs measured, so a search that
wanders far from them is scored by extrapolation, and the learned model (the same features) finds
the surrogate easier to learn than the real machine. Settings that win here are to be confirmed
by ``model_efficiency.py``.
"""
import argparse
import glob
import inspect
import json
import math
import os
import tempfile
import time

import numpy as np

import tecomp as tc
from tecomp.schedule import State, step_from_record
from tecomp.schedule.records import MeasureResult, append_records, load_records
from tecomp.search.annotate import Candidate
from tecomp.search.cost_model import RandomModel
from tecomp.search.features import FeatureExtractor
from tecomp.search.tune import TaskTuner
from tecomp.search.xgb_model import XGBModel
from tecomp.testing import workloads as W

CASES = {
    "matmul": (lambda: W.matmul(1024, 1024, 1024), "tuning_logs/matmul_*.jsonl"),
    "conv2d_nhwc": (lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NHWC", "direct"),
                    "tuning_logs/conv2d_nhwc_*.jsonl"),
    "conv2d_nchw": (lambda: W.conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "NCHW", "direct"),
                    "tuning_logs/conv2d_nchw_*.jsonl tuning_logs/efficiency/conv2d_nchw_*.jsonl"),
}
CHECKPOINTS = (16, 32, 64, 128, 256, 512, 1000)
_LOG_SPAN = 10.0  # the surrogate's labels: 1 + log2(throughput / best) / 10, as XGBModel's


class Surrogate:
    """An XGBoost regressor of the real programs of ``records`` standing for their throughput."""

    def __init__(self, task, records):
        self.task = task
        self.model = XGBModel(task, seed=0, warmup_samples=0, objective="regression")
        self.n_programs = self.model.add_records(task, records)
        if self.n_programs < 2:
            raise SystemExit(f"the logs hold {self.n_programs} programs of {task}; the "
                             "surrogate needs real tuning logs of this workload")
        self.model.train()
        costs = [r.result.mean_cost for r in records
                 if r.workload_key == task.workload_key and r.result.is_valid]
        self.best_gflops = task.flop_count() / min(costs) / 1e9
        self.features = FeatureExtractor(task)

    def gflops(self, steps_records) -> tuple:
        """``(keys, GFLOP/s)`` of schedules given as step records."""
        cands = []
        for rec in steps_records:
            steps = [step_from_record(s) for s in rec]
            cands.append(Candidate(-1, {}, steps, State.replay(self.task.dag, steps)))
        y = self.model.predict_features(self.features.extract(cands))
        g = self.best_gflops * 2.0 ** ((np.minimum(y, 1.1) - 1.0) * _LOG_SPAN)
        return [c.key for c in cands], g


class SurrogateMeasurer:
    """A :class:`~tecomp.search.measure.Measurer` whose costs come from a :class:`Surrogate`,
    with lognormal noise."""

    def __init__(self, surrogate: Surrogate, noise: float, seed: int):
        self.surrogate, self.noise = surrogate, noise
        self.rng = np.random.default_rng(seed + 1000)
        self.true_gflops: dict = {}  # program key -> surrogate GFLOP/s without noise

    def measure(self, inputs: list) -> list:
        keys, g = self.surrogate.gflops([inp.steps for inp in inputs])
        flops, out = self.surrogate.task.flop_count(), []
        for key, gi in zip(keys, g):
            self.true_gflops[key] = float(gi)
            seen = gi * math.exp(self.rng.normal(0.0, self.noise))
            out.append(MeasureResult(costs=(flops / seen / 1e9,) * 3))
        return out

    def close(self) -> None:
        pass


def simulate(surrogate, seed, trials, options, model_kind, noise, model_options=None,
             start=()) -> list:
    """``[(trials, best surrogate GFLOP/s)]`` after every round of one simulated tuning, which
    resumes from the real records ``start`` (their measured costs; none: a fresh tuning)."""
    task = surrogate.task
    measurer = SurrogateMeasurer(surrogate, noise, seed)
    opt = tc.TuningOptions(**{**options, "seed": seed, "verbose": False})
    model = (RandomModel(seed) if model_kind == "random"
             else XGBModel(task, seed=seed, **(model_options or {})))
    with tempfile.TemporaryDirectory() as tmp:
        log = None
        if start:
            log = os.path.join(tmp, "start.jsonl")
            append_records(log, start)
        tuner = TaskTuner(task, opt, model, log)
        best = max(surrogate.gflops([r.steps for r in start])[1], default=0.0)
        return _rounds(tuner, measurer, trials, best)


def _rounds(tuner, measurer, trials, best) -> list:
    opt = tuner.options
    curve = []
    while tuner.result.trials < trials and not tuner.exhausted:
        tuner.round(measurer, min(opt.measures_per_round, trials - tuner.result.trials))
        best = max([best, *measurer.true_gflops.values()])
        curve.append((tuner.result.trials, best))
    return curve


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="conv2d_nchw", choices=list(CASES))
    ap.add_argument("--log", nargs="*", default=None,
                    help="real tuning logs the surrogate learns (default: the workload's shipped "
                         "logs)")
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE",
                    help="a TuningOptions field of the search under test, e.g. generations=6")
    ap.add_argument("--model", choices=("learned", "random"), default="learned")
    ap.add_argument("--model-opt", action="append", default=[], metavar="NAME=VALUE",
                    help="an XGBModel argument of the learned model, e.g. ensemble=4")
    ap.add_argument("--noise", type=float, default=0.15,
                    help="lognormal sigma of the simulated measurement noise")
    ap.add_argument("--versus-random", type=int, default=0, metavar="N",
                    help="also run a random-model search of N trials per seed and print, as "
                         "model_efficiency.py does, the trial at which the search under test "
                         "found a program as fast as the random search's best")
    ap.add_argument("--random-cache", default=None, metavar="JSON",
                    help="keep the random searches' bests in this file (they depend only on "
                         "the surrogate, the seed and N)")
    ap.add_argument("--start", default=None, metavar="LOG:N",
                    help="every seed resumes from the first N records of this real log (the "
                         "state of a real run after N trials, e.g. a stalled one)")
    ap.add_argument("--curves", default=None, metavar="JSON",
                    help="write every seed's best-after-each-round curve to this file")
    args = ap.parse_args()
    build, pattern = CASES[args.workload]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    logs = args.log if args.log is not None else sorted(
        p for pat in pattern.split() for p in glob.glob(os.path.join(root, pat)))
    wl = build()
    task = tc.SearchTask(wl.dag)
    records = [r for p in logs for r in load_records(p)]
    options = name_values(args.opt, tc.TuningOptions.__dataclass_fields__, "--opt")
    model_options = name_values(args.model_opt, inspect.signature(XGBModel).parameters,
                                 "--model-opt")
    surrogate = Surrogate(task, records)
    start = []
    if args.start:
        path, _, n = args.start.rpartition(":")
        start = [r for r in load_records(path) if r.workload_key == task.workload_key][:int(n)]
    model = f"{args.model} model" + (f" {model_options}" if model_options else "")
    print(f"{args.workload}: surrogate of {surrogate.n_programs} programs from {len(logs)} logs; "
          f"search {options or 'defaults'}, {model}, noise {args.noise}", flush=True)
    at, shares, curves = {}, [], {}
    for seed in args.seeds:
        t0 = time.perf_counter()
        curve = simulate(surrogate, seed, args.trials, options, args.model, args.noise,
                         model_options, start)
        curves[seed] = curve
        if args.curves:
            with open(args.curves, "w") as f:
                json.dump(curves, f)
        marks = [(n, g) for n, g in curve if n in CHECKPOINTS or n == curve[-1][0]]
        for n, g in marks:
            at.setdefault(n, []).append(g)
        line = (f"seed {seed} ({time.perf_counter() - t0:4.0f} s): "
                + "  ".join(f"{n}:{g:5.1f}" for n, g in marks))
        if args.versus_random:
            target = _random_best(surrogate, seed, args.versus_random, args.noise,
                                  args.random_cache)
            need = next((n for n, g in curve if g >= target), None)
            shares.append((need or args.versus_random) / args.versus_random)
            line += (f"   random's best of {args.versus_random}: {target:5.1f}, reached at "
                     f"{need if need else '>' + str(curve[-1][0])}")
        print(line, flush=True)
    print("mean over seeds: " + "  ".join(f"{n}:{np.mean(v):5.1f}" for n, v in sorted(at.items())
                                          if len(v) == len(args.seeds)))
    if shares:
        print(f"mean share of the random search's {args.versus_random} trials needed: "
              f"{np.mean(shares):.2f} (a seed that did not reach it counts as 1)")


def name_values(items, names, flag) -> dict:
    """``NAME=VALUE`` items as a dict, each NAME one of ``names`` (a command-line ``flag``'s)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in names:
            raise SystemExit(f"{flag} expects NAME=VALUE with NAME one of {sorted(names)}, got "
                             f"{item!r}")
        out[name] = W.parse_value(value)
    return out


def _random_best(surrogate, seed, trials, noise, cache_path) -> float:
    """The surrogate's best program of a random-model search of ``trials`` trials."""
    key = f"{surrogate.n_programs}/{seed}/{trials}/{noise}"
    cache = {}
    if cache_path and os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    if key not in cache:
        cache[key] = simulate(surrogate, seed, trials, {}, "random", noise)[-1][1]
        if cache_path:
            with open(cache_path, "w") as f:
                json.dump(cache, f)
    return cache[key]


if __name__ == "__main__":
    main()
