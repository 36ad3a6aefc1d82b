"""Ranking a model's tuned candidates in place: each layer's best few records timed inside the
compiled model, where its weights and inputs come from the caches as the previous layers left
them, not from the warm caches of a measurement alone.

Why: the search times a layer alone, repeatedly, so its weights sit in the caches. In a network
they do not: each layer's weights (BERT's 9 MB dense layers, ResNet-50's 512-channel convolutions)
come from DRAM once per call. Schedules that are close alone differ there by up to 40%: the order
in which they walk the weights decides how well the prefetchers hide the misses. The search's
ranking is kept; this adds a second opinion for the one place where it matters.

How: the model is compiled from the log's best records; each task's ``candidates`` best distinct
records, and the best record of each other sketch of the task (:func:`with_each_sketch`), are
replayed for every layer of the task. A round runs the model once per candidate rank
``c`` with every task's ``c``-th candidate in place at once (one model run serves all tasks),
and times each layer in place (:meth:`CompiledModel.profile`); the ranks run in a fresh random
order each round. Each run builds the kernels it times (their code comes from the build cache,
their weights are packed again), so memory holds one candidate set, not ``candidates`` copies of
the model's weights. A candidate's in-place cost is the per-layer mean of its task's layers, one
value per round. The least median of several noisy candidates is biased low, so the winner and
the search's best then run again, head to head, for twice as many rounds; only these timings are
appended to the log, as records with the model's context (:func:`~.compiled.model_context`),
which ``tc.compile_model`` ranks by their median. The search never reads them
(``load_records`` leaves them out).

A layer that can be computed another way (its Winograd task beside the direct one) has the
other variant's best records among its candidates, and that variant's best joins the
head-to-head, so each ranking run times every variant of the layer in the same model runs.
``compile_model`` then runs the variant fastest in place, where alone it would take the one
fastest with its weights warm: ResNet-50's C256 H14 layers ran 0.70 ms by Winograd alone and
1.02 ms directly, but in the model, where the 9.4 MB transformed weight (2.4 MB direct) comes
from memory, the model with them direct was faster in 11 of 15 rounds (1.029x).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..build import build
from ..schedule import Schedule
from ..schedule.records import MeasureResult, Record, append_records, ranked_records
from ..target import Target
from .compiled import compile_model
from .fusion import group_variants, partition
from .graph import Model

__all__ = ["InPlaceTask", "rank_in_place", "in_place_table", "with_each_sketch",
           "VARIANT_CANDIDATES"]

#: records of each other variant of a layer (its Winograd task beside the direct one, say) that
#: run in place beside the variant compile_model chose
VARIANT_CANDIDATES = 2


@dataclass
class InPlaceTask:
    """The in-place ranking of one task: its ``name``, its ``count`` of layers, the candidates
    timed, the in-place seconds (per layer, median of the head-to-head rounds) of the search's
    best (``searched_s``) and of the one chosen (``chosen_s``), and the latter's rank in the
    search's order (0: the search's best stays)."""
    name: str
    count: int
    candidates: int
    searched_s: float
    chosen_s: float
    chosen_rank: int


def rank_in_place(model: Model, log, target="llvm", candidates: int = 6, rounds: int = 3,
                  inputs=None, seed: int = 0, progress=None) -> list:
    """Time each task's best ``candidates`` records of ``log`` in place in ``model`` and append
    the timings to ``log`` (see the module docstring).

    Parameters
    ----------
    model : Model
    log : str or path
        The model's tuning log (:func:`tecomp.tune_model`); read, then appended to.
    target : str or Target
    candidates : int
        Distinct records per task (by the search's cost), and the best of each other sketch,
        up to as many again (:func:`with_each_sketch`); a task with fewer than two is skipped.
    rounds : int
        Runs of every candidate rank, in a new order each round; then twice as many rounds of
        the head-to-head.
    inputs : list of numpy arrays, optional
        The model's inputs (default: random normal floats; integers 0 and 1, valid as indices of
        any Gather).
    seed : int
        For the default inputs and the order of the ranks.
    progress : callable, optional
        Called with a line of text as the work goes on.

    Returns
    -------
    list of InPlaceTask
        One per task timed, heaviest (count x chosen time) first.
    """
    if not isinstance(candidates, int) or isinstance(candidates, bool) or candidates < 1:
        raise ValueError(f"candidates must be an int >= 1, got {candidates!r}")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    say = progress or (lambda line: None)
    target = Target.parse(target)
    from ..schedule.log_schedule import load_records_cached
    records = load_records_cached(log)
    per_key: dict = {}
    for r in records:
        per_key[r.workload_key] = per_key.get(r.workload_key, 0) + 1
    if max(per_key.values(), default=0) < 2:  # nothing to choose between: skip the compile
        say("in place: no layer has two records to choose between")
        return []
    cm = compile_model(model, target, log)
    rng = np.random.default_rng(seed)
    args = _inputs(cm, inputs, rng)
    by_key: dict = {}  # workload key -> step indices
    for i, st in enumerate(cm.steps):
        if st.schedule is not None:
            by_key.setdefault(st.schedule.dag.workload_key, []).append(i)
    # the other ways to compute a layer (Winograd beside direct): compile_model runs the one
    # fastest alone, but alone its weights are warm; their best records run in place here too
    variants = [group_variants(model, g) for g in partition(model)]  # one per step, in order
    tasks = []  # (key, steps, [(record, {step: schedule})])
    for key, idx in by_key.items():
        ranked, exact = ranked_records(records, key, target)
        if not exact:
            continue
        cands = []
        for rec in with_each_sketch(ranked, candidates):
            scheds = _candidate(cm, idx, rec)
            if scheds is not None:
                cands.append((rec, scheds))
        for j, alt in enumerate(variants[idx[0]]):
            if alt.dag.workload_key == key:
                continue
            alt_ranked, alt_exact = ranked_records(records, alt.dag.workload_key, target)
            for rec in alt_ranked[:VARIANT_CANDIDATES] if alt_exact else []:
                scheds = _candidate(cm, idx, rec, {i: variants[i][j].dag for i in idx})
                if scheds is not None:
                    cands.append((rec, scheds))
        if len(cands) >= 2:
            tasks.append((key, idx, cands))
    say(f"in place: {len(tasks)} task(s), up to {candidates} candidates each, {rounds} round(s)")
    if not tasks:
        return []
    width = max(len(c) for _, _, c in tasks)

    def run(pick: dict, into: dict) -> None:
        """One timed model run with candidate ``pick[key]`` of every task; each task's in-place
        time (per layer) is appended to ``into[key][pick[key]]``. The kernels are built for the
        run (their code comes from the build cache; their weights are packed again) and replace
        the previous run's, whose packed weights are freed: one candidate set in memory, not
        ``candidates`` copies of the model's weights."""
        for key, idx, cands in tasks:
            for i, sched in cands[pick[key]][1].items():
                st = cm.steps[i]
                cm.replace_kernel(i, build(sched.dag, cm.target, schedule=sched,
                                           constants=st.constants or None), sched)
        cm(*args)  # the swapped kernels' first call prepares them
        times = [t for _, t in cm.profile(*args, repeat=2)]
        for key, idx, _ in tasks:
            into[key].setdefault(pick[key], []).append(sum(times[i] for i in idx) / len(idx))

    seen: dict = {key: {} for key, _, _ in tasks}
    for r in range(rounds):
        for c in rng.permutation(width):
            run({key: min(int(c), len(cands) - 1) for key, _, cands in tasks}, seen)
        say(f"in place: selection round {r + 1}/{rounds} done")
    # the winner of a noisy selection looks better than it is (the least of several draws): the
    # search's best and the winner run again, head to head, and only these fresh timings rank
    # and so does the best of each other variant of the layer, so that every variant has this
    # run's timings and compile_model compares like with like (_choose_variant)
    finalists = {key: _finalists(seen[key], cands) for key, _, cands in tasks}
    width = max(len(f) for f in finalists.values())
    fresh: dict = {key: {} for key, _, _ in tasks}
    for r in range(2 * rounds):  # 2-3 candidates, not 6-8: twice the rounds cost less
        for p in rng.permutation(width):
            run({key: f[min(int(p), len(f) - 1)] for key, f in finalists.items()}, fresh)
    say("in place: head-to-head rounds done")
    out, new = [], []
    now = time.time()
    for key, idx, cands in tasks:
        med = {c: float(np.median(v)) for c, v in sorted(fresh[key].items())}
        chosen = min(med, key=med.get)  # the search's best (0) first: it keeps a tie
        for c, v in sorted(fresh[key].items()):  # and so does compile_model's stable sort
            rec = cands[c][0]
            new.append(Record(rec.workload_key, rec.target, rec.steps, rec.decisions,
                              MeasureResult(costs=tuple(v), timestamp=now), rec.data_hash,
                              rec.flop_count, family=rec.family, context=cm.context))
        out.append(InPlaceTask(cm.steps[idx[0]].name, len(idx), len(cands), med[0], med[chosen],
                               chosen))
    append_records(log, new)
    out.sort(key=lambda t: -t.count * t.chosen_s)
    return out


def _finalists(timed: dict, cands: list) -> list:
    """Candidate indices of the head-to-head: the search's best (0), the selection's winner (the
    least median of ``timed``), and the best timed candidate of each other variant."""
    med = {c: float(np.median(v)) for c, v in timed.items()}
    out = [0]
    for key in dict.fromkeys(cands[c][0].workload_key for c in sorted(med)):
        if key == cands[0][0].workload_key:
            best = min(med, key=med.get)
        else:
            best = min((c for c in med if cands[c][0].workload_key == key), key=med.get)
        if best not in out:
            out.append(best)
    return out


def with_each_sketch(ranked: list, candidates: int) -> list:
    """The first ``candidates`` of ``ranked`` (the search's order), then the best record of each
    sketch not among them yet, at most ``candidates`` more. A layer's time alone hides what its
    output costs in memory: a conv fused with its epilogue never writes its raw output, so it
    can lose alone and win in the model, and the top of the search's order may hold none of it
    (``docs/search_notes.md``)."""
    out = list(ranked[:candidates])
    have = {_sketch_name(r) for r in out}
    for rec in ranked[candidates:]:
        if len(out) >= 2 * candidates:
            break
        name = _sketch_name(rec)
        if name not in have:
            have.add(name)
            out.append(rec)
    return out


def _sketch_name(rec) -> str:
    d = rec.decisions if isinstance(rec.decisions, dict) else {}
    name = d.get("sketch", "")
    return name if isinstance(name, str) else ""


def _candidate(cm, idx: list, rec, dags: dict | None = None) -> dict | None:
    """``{step: schedule}`` of ``rec`` for the steps ``idx`` (on ``dags[step]``, another variant
    of the step's group, or the DAG the step runs); None when it does not replay or build (a
    record of an older version: the plain ranking already skips it). One step is built to
    check: the others share its code (the same DAG), only their weights differ."""
    try:
        dags = dags or {i: cm.steps[i].schedule.dag for i in idx}
        out = {i: Schedule.from_records(dags[i], rec.steps) for i in idx}
        st = cm.steps[idx[0]]
        build(dags[idx[0]], cm.target, schedule=out[idx[0]], constants=st.constants or None)
    except Exception:  # noqa: BLE001 - such a record is simply not a candidate
        return None
    return out


def _inputs(cm, inputs, rng) -> list:
    if inputs is not None:
        return list(inputs)
    out = []
    for shape, dtype in cm.input_specs:
        if dtype.kind in "iu":
            out.append(rng.integers(0, 2, shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def in_place_table(rows: list) -> str:
    """The result of :func:`rank_in_place` as a text table."""
    lines = [f"{'layer':<58} {'count':>5} {'cands':>5} {'searched ms':>11} {'chosen ms':>9} "
             f"{'rank':>4}"]
    for t in rows:
        lines.append(f"{t.name[:58]:<58} {t.count:>5} {t.candidates:>5} "
                     f"{t.searched_s * 1e3:>11.4f} {t.chosen_s * 1e3:>9.4f} {t.chosen_rank:>4}")
    saved = sum(t.count * (t.searched_s - t.chosen_s) for t in rows)
    total = sum(t.count * t.searched_s for t in rows)
    lines.append(f"in place: {saved * 1e3:.3f} ms of {total * 1e3:.3f} ms saved per call "
                 f"(layers timed in the model, median of the rounds)")
    return "\n".join(lines)
