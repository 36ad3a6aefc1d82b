"""Re-ranking a log's best records alone, interleaved over rounds, before a build picks one.

Why: the search measures each candidate once, as ``repeat`` back-to-back batches in a worker, and
ranks by their mean. On a shared or noisy machine a candidate measured in a quiet 0.1 s keeps a
cost it does not have: a ResNet-50 layer's best record measured 82.6 GFLOP/s in tuning on a Zen 1
whose FMA peak reads 77-79, and ran 1.244 against 1.552 ms beside the peers. The best of a few
hundred noisy draws is biased low, so the record a build picks is often a lucky one, not the
fastest.

How: for each task, its ``candidates`` best distinct records (the search's order) and the winner of
the previous re-ranking, if it is not among them, are built as the search builds them (the task's
constants bound at build time) and timed with the comparison protocol of :mod:`tecomp.bench`:
warm-up, calibrated batches, rounds in a fresh shuffled order, each round's fastest batch, the
median over rounds. The least median of several noisy candidates is biased low too, so the
selection's winner and the search's best then run again head to head for twice the rounds (with
the previous re-ranking's winner), and only these timings are appended to the log: records with
the context :data:`~tecomp.schedule.log_schedule.RERANK_CONTEXT`, one timestamp per task.
``tc.build(dag, log=...)`` ranks a workload's latest re-ranking first (by median), unless the
search found a schedule after it that its own measurements put ahead of the re-ranked ones
(:func:`~tecomp.schedule.log_schedule.select_from_log`). The search never reads these records.
"""
from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass

from ..bench.protocol import TECOMP, Config, compare
from ..codegen.memory import aligned_copy
from ..schedule.log_schedule import RERANK_CONTEXT, ranked_context_records
from ..schedule.records import MeasureResult, Record, append_records, load_records, ranked_records
from ..target import TargetKind
from .measure_worker import MeasureFailure, build_candidate, raw_call, task_arrays
from .measure_worker import compare as compare_outputs

__all__ = ["RerankResult", "rerank", "rerank_table"]


@dataclass
class RerankResult:
    """The re-ranking of one task: its ``name``, the number of ``candidates`` timed, the seconds
    per call (median of the head-to-head rounds) of the search's best (``searched_s``) and of the
    one chosen (``chosen_s``), and the latter's rank in the search's order (0: the search's best
    stays)."""
    name: str
    workload_key: str
    candidates: int
    searched_s: float
    chosen_s: float
    chosen_rank: int


def _positive_int(name: str, v) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be an int >= 1, got {v!r}")


def rerank(tasks, log, candidates: int = 4, rounds: int = 5, names=None,
           min_batch_s: float = 0.02, seed: int = 0, progress=None) -> list:
    """Time each task's best ``candidates`` records of ``log`` alone, interleaved over rounds,
    and append the head-to-head timings to ``log`` (see the module docstring).

    Parameters
    ----------
    tasks : list of SearchTask
        The tasks whose records to re-rank (those of ``log`` tuned for their target).
    log : str or path
        The tuning log; read, then appended to.
    candidates : int
        Distinct records per task, by the search's cost; a task with fewer than two is skipped.
    rounds : int
        Rounds of the selection; the head-to-head runs twice as many.
    names : list of str, optional
        A name per task for the results (default: the workload key's first 16 characters).
    min_batch_s : float
        Each timed batch runs as many calls as last this long.
    seed : int
        Seed of the round orders.
    progress : callable, optional
        Called with a line of text after each task.

    Returns
    -------
    list of RerankResult
        One per task re-ranked, in the order of ``tasks``.
    """
    _positive_int("candidates", candidates)
    _positive_int("rounds", rounds)
    for t in tasks:
        if t.target.kind is not TargetKind.LLVM:
            raise ValueError(f"rerank times kernels on this CPU; task {t.workload_key[:16]} is "
                             f"for {str(t.target)!r}")
    say = progress or (lambda line: None)
    every = load_records(log, contexts=True)
    plain = [r for r in every if not r.context]
    names = list(names) if names is not None else [t.workload_key[:16] for t in tasks]
    out = []
    for n, (task, name) in enumerate(zip(tasks, names)):
        res, new = _rerank_task(task, name, plain, every, candidates, rounds, min_batch_s,
                                seed + n)
        if res is None:
            say(f"rerank {n + 1}/{len(tasks)} {name}: fewer than two records to compare")
            continue
        append_records(log, new)  # task by task: an interrupted run keeps what it timed
        out.append(res)
        say(f"rerank {n + 1}/{len(tasks)} {name}: {res.candidates} candidates; search's best "
            f"{res.searched_s * 1e3:.4f} ms, chosen #{res.chosen_rank} "
            f"{res.chosen_s * 1e3:.4f} ms")
    return out


def _rerank_task(task, name, plain, every, candidates, rounds, min_batch_s, seed):
    key, target = task.workload_key, str(task.target)
    ranked, exact = ranked_records(plain, key, target)
    if not exact:
        return None, []
    cands = list(ranked[:candidates])
    prev = ranked_context_records(every, key, target, RERANK_CONTEXT)
    have = {r.key for r in cands}
    if prev and prev[0].key not in have:  # the last re-ranking's winner defends its place
        cands += [r for r in ranked if r.key == prev[0].key][:1]
    inputs, outputs = task_arrays(task)
    runs, reference = [], None
    out_names = [t.name for t in task.dag.outputs]
    for rank, rec in enumerate(cands):
        call, outs = _prepared(task, rec, inputs, outputs)
        if call is None:
            continue
        call()
        if reference is None:
            reference = [o.copy() for o in outs]
        else:
            bad = compare_outputs(outs, reference, out_names)
            if bad:  # measured right in tuning: this version computes it otherwise
                warnings.warn(f"rerank {name}: record #{rank} disagrees with #{runs[0][0]} "
                              f"({bad}); left out", UserWarning, stacklevel=3)
                continue
        runs.append((rank, rec, call))
    if len(runs) < 2:
        return None, []
    sel = _timed(runs, rounds, min_batch_s, seed)
    winner = min(sel, key=lambda i: statistics.median(sel[i]))
    defender = [i for i, (_, rec, _) in enumerate(runs) if prev and rec.key == prev[0].key]
    finalists = list(dict.fromkeys([0, winner] + defender))
    fresh = _timed([runs[i] for i in finalists], 2 * rounds, min_batch_s, seed + 1)
    med = {finalists[i]: statistics.median(v) for i, v in fresh.items()}
    chosen = min(med, key=med.get)  # the search's best (first) keeps a tie
    now = time.time()
    new = [Record(rec.workload_key, rec.target, rec.steps, rec.decisions,
                  MeasureResult(costs=tuple(fresh[j]), timestamp=now), rec.data_hash,
                  rec.flop_count, family=rec.family, context=RERANK_CONTEXT)
           for j, (_, rec, _) in enumerate(runs[i] for i in finalists)]
    return RerankResult(name, key, len(runs), med[0], med[chosen], runs[chosen][0]), new


def _prepared(task, rec, inputs, outputs):
    """``(call, outputs)``: the zero-argument raw call of ``rec``'s kernel on the task's arrays,
    as the search's worker runs it; ``(None, None)`` when it no longer builds."""
    try:
        kernel = build_candidate(task, rec.steps, inputs)
    except MeasureFailure:
        return None, None
    outs = [aligned_copy(o) for o in outputs]  # as the search's: a model's buffers are aligned
    return raw_call(kernel, inputs, outs), outs


def _timed(runs, rounds, min_batch_s, seed) -> dict:
    """``{index into runs: [seconds per call, one per round]}`` by the comparison protocol."""
    configs = [Config(TECOMP, f"#{rank}", 0, call) for rank, _, call in runs]
    res = compare(configs, rounds=rounds, min_batch_s=min_batch_s, seed=seed)
    return {i: list(t.per_round) for i, t in enumerate(res.timings)}


def rerank_table(rows: list) -> str:
    """The result of :func:`rerank` as a text table."""
    lines = [f"{'task':<40} {'cands':>5} {'searched ms':>11} {'chosen ms':>9} {'rank':>4} "
             f"{'gain':>6}"]
    for t in rows:
        lines.append(f"{t.name[:40]:<40} {t.candidates:>5} {t.searched_s * 1e3:>11.4f} "
                     f"{t.chosen_s * 1e3:>9.4f} {t.chosen_rank:>4} "
                     f"{t.searched_s / t.chosen_s:>5.3f}x")
    return "\n".join(lines)
