"""Offline evaluation of the learned cost model on tuning logs.

Records are rebuilt into candidates (the DAG comes from a workload spec), kept in log order (the
order of tuning rounds), split into the first ``train_frac`` for training and the rest for testing,
and the model trained on the first part is scored on the second::

    python -m tecomp.search.model_eval tuning_logs/matmul_random.jsonl \\
        --workload matmul --shape 1024 1024 1024

``--train-log`` adds other runs' logs of the same workload to the training data (a model that
has seen earlier tuning runs, as a resumed or repeated tuning has); programs of the held-out rounds
are removed from them, so the test set stays unseen. ``--other-log SPEC=LOG`` adds a log of
another workload (``SPEC``: the workload name, then its shape values and ``NAME=VALUE``
parameters, space-separated, e.g. ``"conv2d_nchw"`` or ``"matmul 512 512 512"``), labelled
within its own workload: the shared model of a network's tuning, or one that has seen other
tunings on this machine, learns what makes programs fast across workloads.
``--seeds N`` averages the figures over N model seeds.

Reported: pairwise ranking accuracy (the share of test pairs with different measured throughput
that the model orders the same way; failed runs have throughput 0) and top-k recall (how many of
the k fastest test programs are among the model's k best), beside the feature extraction speed
and the training time.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from .record_candidates import candidates_from_records

__all__ = ["pairwise_accuracy", "top_k_recall", "evaluate", "task_and_log", "main"]


def pairwise_accuracy(pred, truth) -> float:
    """Share of pairs with ``truth[i] != truth[j]`` that ``pred`` orders the same way (ties in
    ``pred`` count one half); NaN when there is no such pair.

    Parameters
    ----------
    pred, truth : array_like
        Scores, higher is better (e.g. predicted and measured throughput).
    """
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    p = np.where(np.isfinite(p), p, -1e300)
    agree = total = 0.0
    for s in range(0, len(p), 512):  # blocks of rows keep memory at 512 x n
        dp = np.sign(p[s:s + 512, None] - p[None, :])
        dt = np.sign(t[s:s + 512, None] - t[None, :])
        m = dt != 0
        total += m.sum()
        agree += (dp[m] == dt[m]).sum() + 0.5 * (dp[m] == 0).sum()
    return float(agree / total) if total else math.nan


def top_k_recall(pred, truth, k: int = 32) -> float:
    """``|top-k by pred  ∩  top-k by truth| / k`` (k capped at the number of programs)."""
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    k = min(k, len(p))
    if k == 0:
        return math.nan
    p = np.where(np.isfinite(p), p, -1e300)
    return len(set(np.argsort(-p, kind="stable")[:k]) & set(np.argsort(-t, kind="stable")[:k])) / k


def evaluate(task, records, train_frac: float = 0.7, k: int = 32, extra_records=(),
             other=(), **model_kw) -> dict:
    """Train an :class:`~tecomp.search.xgb_model.XGBModel` on the first ``train_frac`` of the
    records of ``task`` (log order) and score it on the rest.

    ``extra_records`` (other runs of the same workload) are added to the training data, less
    the programs of the held-out part. ``other`` is a list of ``(SearchTask, records)`` of other
    workloads, added to the training data in their own label groups.

    Returns
    -------
    dict
        ``n_train``, ``n_test``, ``pairwise_accuracy``, ``top_k_recall``, ``k``,
        ``train_pairwise_accuracy``, ``extract_per_s`` (lowering + features),
        ``train_seconds``, ``skipped``, ``n_extra`` (extra training programs used),
        ``n_other`` (programs of other workloads used).
    """
    from .features import FeatureExtractor
    from .xgb_model import XGBModel
    cands, costs, skipped = candidates_from_records(task.dag, records)
    n_train = int(round(train_frac * len(cands)))
    if n_train < 2 or len(cands) - n_train < 2:
        raise ValueError(f"too few records of this workload to split ({len(cands)})")
    test_keys = {c.key for c in cands[n_train:]}
    extra, extra_costs, _ = candidates_from_records(task.dag, extra_records)
    keep = [i for i, c in enumerate(extra) if c.key not in test_keys]
    extra, extra_costs = [extra[i] for i in keep], extra_costs[keep]
    fx = FeatureExtractor(task)
    t0 = time.perf_counter()
    feats = fx.extract(cands)
    t_ext = time.perf_counter() - t0
    extra_feats = fx.extract(extra)
    model_kw.setdefault("warmup_samples", 0)
    model = XGBModel(task, **model_kw)
    group = task.dag.workload_key
    for c, f, cost in zip(extra + cands[:n_train], list(extra_feats) + list(feats[:n_train]),
                          list(extra_costs) + list(costs[:n_train])):
        model.add_sample(c.key, f, cost, group)
    n_other = 0
    for otask, orecords in other:
        if otask.dag.workload_key == group:
            raise ValueError("an --other-log workload is the evaluated workload itself; give its "
                             "log with --train-log")
        n_other += model.add_records(otask, orecords)
    model.train()
    thr = np.where(np.isfinite(costs), 1.0 / np.where(np.isfinite(costs), costs, 1.0), 0.0)
    pred = model.predict_features(feats[n_train:])
    pred_tr = model.predict_features(feats[:n_train])
    return {"n_train": n_train, "n_test": len(cands) - n_train, "skipped": skipped, "k": k,
            "n_extra": len(extra), "n_other": n_other,
            "pairwise_accuracy": pairwise_accuracy(pred, thr[n_train:]),
            "top_k_recall": top_k_recall(pred, thr[n_train:], k),
            "train_pairwise_accuracy": pairwise_accuracy(pred_tr, thr[:n_train]),
            "extract_per_s": len(cands) / max(t_ext, 1e-9),
            "train_seconds": model.train_seconds}


def _spec_task(name: str, shape, params) -> tuple:
    """``(Workload, SearchTask)`` of a workload spec (``params``: ``NAME=VALUE`` strings)."""
    from ..workloads import parse_value, workload_from_spec
    from .task import SearchTask
    kw = {k: parse_value(v) for k, v in (p.split("=", 1) for p in params)}
    wl = workload_from_spec(name, shape, kw)
    return wl, SearchTask(wl.dag, inputs=wl.index_data or None)


def task_and_log(item: str) -> tuple:
    """``(SearchTask, log path)`` of ``"SPEC=LOG"``, where SPEC is a workload name, then its shape
    values and ``NAME=VALUE`` parameters, space-separated (``"matmul 512 512 512=m.jsonl"``);
    raises ``ValueError`` naming the problem."""
    spec, sep, path = item.rpartition("=")
    words = spec.split()
    if not sep or not words or not path:
        raise ValueError(f"expected SPEC=LOG (e.g. \"matmul 512 512 512=m.jsonl\"), got {item!r}")
    try:
        shape = [int(w) for w in words[1:] if "=" not in w]
    except ValueError:
        raise ValueError(f"shape values must be integers in {spec!r}") from None
    return _spec_task(words[0], shape, [w for w in words[1:] if "=" in w])[1], path


def _mean_of(n: int) -> str:
    return f", mean of {n} model seeds" if n > 1 else ""


def main(argv=None) -> int:
    """Command line: ``python -m tecomp.search.model_eval LOG... --workload W --shape ...``."""
    ap = argparse.ArgumentParser(prog="python -m tecomp.search.model_eval", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="tuning logs (JSON lines)")
    ap.add_argument("--workload", required=True, help="workload name (tecomp.workloads)")
    ap.add_argument("--shape", type=int, nargs="*", default=[],
                    help="the builder's leading integer arguments, e.g. M N K")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="other builder arguments, e.g. layout=NHWC method=implicit_gemm")
    ap.add_argument("--train-frac", type=float, default=0.7)
    ap.add_argument("--train-log", action="append", default=[], metavar="LOG",
                    help="another run's log of the workload, added to the training data")
    ap.add_argument("--other-log", action="append", default=[], metavar="SPEC=LOG",
                    help='a log of another workload, added to the training data, e.g. '
                         '"conv2d_nchw=tuning_logs/conv2d_nchw_random.jsonl"')
    ap.add_argument("--seeds", type=int, default=1, help="average over this many model seeds")
    ap.add_argument("-k", type=int, default=32, help="k of top-k recall")
    ap.add_argument("--min-weight", type=float, default=None)
    ap.add_argument("--objective", choices=("rank", "regression"), default=None,
                    help="the model's training objective (default: the model's default)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    from ..schedule.records import load_records
    try:
        wl, task = _spec_task(args.workload, args.shape, args.param)
    except ValueError as e:
        raise SystemExit(f"model_eval: {e}") from None
    other = []
    for item in args.other_log:
        try:
            otask, path = task_and_log(item)
        except ValueError as e:
            raise SystemExit(f"model_eval: --other-log: {e}") from None
        other.append((otask, load_records(path)))
    records = [r for log in args.logs for r in load_records(log)]
    kw = {} if args.min_weight is None else {"min_weight": args.min_weight}
    if args.objective is not None:
        kw["objective"] = args.objective
    try:
        extra = [r for log in args.train_log for r in load_records(log)]
        runs = [evaluate(task, records, args.train_frac, args.k, extra_records=extra,
                         other=other, seed=s, **kw) for s in range(max(args.seeds, 1))]
    except ValueError as e:
        print(f"model_eval: {e}", file=sys.stderr)
        return 1
    res = dict(runs[0])
    for key in ("pairwise_accuracy", "top_k_recall", "train_pairwise_accuracy", "train_seconds"):
        res[key] = float(np.mean([r[key] for r in runs]))
    res["seeds"] = len(runs)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{wl!r}: {res['n_train']} train / {res['n_test']} test records "
              f"({res['skipped']} skipped, {res['n_extra']} from other runs, {res['n_other']} of "
              f"other workloads)\n"
              f"  pairwise ranking accuracy {res['pairwise_accuracy']:.3f} "
              f"(train {res['train_pairwise_accuracy']:.3f}){_mean_of(len(runs))}\n"
              f"  top-{res['k']} recall {res['top_k_recall']:.3f}\n"
              f"  features {res['extract_per_s']:.0f} programs/s, training "
              f"{res['train_seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
