"""A model's tuning tasks (its distinct fused groups, weighted by how often they run) and
``tc.tune_model``, which tunes them under one trial budget with the task scheduler.

Tasks the log already holds cost no trials: a task whose log holds at least ``min_records``
valid records (for this target) is *held*: it gets no trial of this run, and its best record is
its result. By default ``min_records`` is this run's even share, ``ceil(trials / tasks)``: a
rerun of an interrupted tuning, or the tuning of a model that shares layers with one tuned
before, spends its budget on the layers that have not had their share yet. ``min_records=0``
tunes every task (held ones start warmed up from the log, as always).
"""
from __future__ import annotations

import math
import os
import warnings

from .fusion import group_variants, partition
from .graph import Model

__all__ = ["model_tasks", "tune_model", "task_names", "task_alternatives", "held_tasks",
           "record_threshold", "merge_held", "sub_alternatives"]


def _grouped(model: Model, include_simple: bool) -> list:
    """``[(GroupDAG, count)]``: one per distinct workload key, in first-occurrence order (a
    group's variants, :func:`~.fusion.group_variants`, each a task of its own)."""
    by_key: dict = {}
    for g in partition(model):
        if not include_simple and g.anchor is None:
            continue
        for gd in group_variants(model, g):
            key = gd.dag.workload_key
            if key in by_key:
                by_key[key][1] += 1
            else:
                by_key[key] = [gd, 1]
    return [(gd, n) for gd, n in by_key.values()]


def model_tasks(model: Model, target="llvm", include_simple: bool = False) -> list:
    """``[(SearchTask, count)]`` of ``model`` (see :meth:`Model.tasks`)."""
    from ..search.task import SearchTask
    # the weights are build-time constants of the compiled model: measured the same way, the
    # packing of a weight into its tile layout is not timed (it runs once, at compile time)
    return [(SearchTask(gd.dag, target, constants=tuple(gd.constants)), n)
            for gd, n in _grouped(model, include_simple)]


def task_names(model: Model, include_simple: bool = False) -> list:
    """A readable name per task of :func:`model_tasks` (same order): the fused operators and
    the first layer's source node."""
    return [gd.name for gd, _ in _grouped(model, include_simple)]


def task_alternatives(model: Model, include_simple: bool = False) -> list:
    """Sets of indices into :func:`model_tasks` that are one layer computed in different ways
    (:func:`~.fusion.group_variants`): ``compile_model`` runs the fastest of each set, so the
    task scheduler counts a set once (``tune_tasks(alternatives=)``)."""
    by_group: dict = {}
    for i, (gd, _) in enumerate(_grouped(model, include_simple)):
        by_group.setdefault(id(gd.group), []).append(i)
    return [v for v in by_group.values() if len(v) > 1]


def sub_alternatives(alternatives: list, todo: list) -> list:
    """``alternatives`` restricted to the tasks ``todo`` and renumbered as their positions."""
    pos = {t: k for k, t in enumerate(todo)}
    return [[pos[i] for i in alt if i in pos] for alt in alternatives]


def record_threshold(trials: int, n_tasks: int, min_records=None) -> int:
    """The records a task needs in the log to be held (see the module docstring)."""
    if min_records is None:
        return max(1, math.ceil(trials / max(n_tasks, 1)))
    if isinstance(min_records, bool) or not isinstance(min_records, int) or min_records < 0:
        raise ValueError(f"min_records must be an int >= 0 or None, got {min_records!r}")
    return min_records


def held_tasks(tasks: list, log, threshold: int) -> dict:
    """``{index: TuneResult}`` of the ``tasks`` whose ``log`` holds at least ``threshold`` valid
    records (none when ``threshold`` is 0 or there is no log); each result holds the task's
    best record and no trial."""
    from ..schedule import Schedule
    from ..schedule.records import load_records
    from ..search.tune import TuneResult
    if threshold <= 0 or log is None or not os.path.exists(log):
        return {}
    with warnings.catch_warnings():  # a damaged line is reported when the tuning reads the log
        warnings.simplefilter("ignore")
        records = load_records(log)
    by_task: dict = {}
    for r in records:
        if r.result.is_valid:
            by_task.setdefault((r.workload_key, r.target), []).append(r)
    out = {}
    for i, t in enumerate(tasks):
        mine = by_task.get((t.workload_key, str(t.target)), [])
        if len(mine) < threshold:
            continue
        best = min(mine, key=lambda r: r.result.mean_cost)
        res = TuneResult(t, best_cost=best.result.mean_cost, best_steps=best.steps)
        try:
            res.best_schedule = Schedule.from_records(t.dag, best.steps)
        except Exception:  # noqa: BLE001 - a record this version cannot replay: steps only
            pass
        out[i] = res
    return out


def tune_model(model: Model, trials: int, log, target="llvm", options=None, measurer=None,
               progress=None, objective: str = "latency", include_simple: bool = False,
               min_records: int | None = None, in_place: int | None = None):
    """Tune ``model``'s tasks with ``trials`` measurements in all (:func:`tecomp.tune_tasks`).

    Parameters
    ----------
    model : Model
    trials : int
        New measurements across all tasks; the log is resumed (a task with records in it starts
        warmed up and none of its candidates are measured again).
    log : str or path
        The JSON-lines tuning log for :func:`tecomp.compile_model`.
    target : str or Target
    options : TuningOptions, optional
    measurer : optional
        Where candidates run (default: local worker processes).
    progress : callable, optional
        Called with the :class:`~tecomp.search.scheduler.TuneTasksResult` after every round.
    objective : "latency" or "geomean"
        What the scheduler minimizes (the network's latency by default).
    include_simple : bool
        Also tune the groups without a reduction.
    min_records : int, optional
        A task whose log holds at least this many valid records gets no trial (default: this
        run's even share, ``ceil(trials / tasks)``; 0: tune every task).
    in_place : int, optional
        After tuning, time each task's ``in_place`` best records inside the compiled model on
        this machine and log those timings, which :func:`tecomp.compile_model` then ranks by
        (:func:`tecomp.frontend.in_place.rank_in_place`; 0: skip). Default: 6 when the
        candidates are measured here (no ``measurer``), else 0 (a cluster's nodes may not be
        this machine: run it there with ``trials=0``).

    Returns
    -------
    TuneTasksResult
        Every task's result, in :meth:`Model.tasks` order; a held task's is its best record,
        with no trial in ``allocation``. With ``in_place``, its ``in_place`` attribute holds
        the :class:`~tecomp.frontend.in_place.InPlaceTask` rows.
    """
    from ..search.scheduler import TuneTasksResult, tune_tasks
    if not isinstance(model, Model):
        raise TypeError(f"tune_model expects a tc.Model, got {type(model).__name__}")
    if log is None:
        raise ValueError("tune_model needs a log= path: compile_model builds from it")
    pairs = model_tasks(model, target, include_simple)
    if not pairs:
        raise ValueError(f"model {model.name!r} has no task to tune (no convolution, matrix "
                         f"product or reduction)")
    tasks, weights = [t for t, _ in pairs], [float(n) for _, n in pairs]
    alts = task_alternatives(model, include_simple)
    held = held_tasks(tasks, log, record_threshold(trials, len(tasks), min_records))
    todo = [i for i in range(len(tasks)) if i not in held]
    if not todo:
        sub = TuneTasksResult([], [], allocation=[])
    else:
        sub = tune_tasks([tasks[i] for i in todo], trials, log=log,
                         weights=[weights[i] for i in todo], options=options,
                         measurer=measurer, progress=progress, objective=objective,
                         alternatives=sub_alternatives(alts, todo))
    out = merge_held(sub, todo, held, weights, alts)
    if in_place is None:
        in_place = 6 if measurer is None else 0
    if in_place:
        from .in_place import rank_in_place
        out.in_place = rank_in_place(model, log, target, candidates=in_place)
    return out


def merge_held(sub, todo: list, held: dict, weights: list, alternatives=()):
    """One :class:`TuneTasksResult` of all tasks (``weights``: one per task; ``alternatives`` as
    :func:`task_alternatives` gives them) from ``sub``, the tuning of the tasks at indices
    ``todo``, and the ``held`` ones' results."""
    from ..search.scheduler import TuneTasksResult
    results, alloc = [None] * len(weights), [0] * len(weights)
    for k, i in enumerate(todo):
        results[i], alloc[i] = sub.results[k], sub.allocation[k]
    for i, r in held.items():
        results[i] = r
    fixed = sum(weights[i] * r.best_cost for i, r in held.items())
    return TuneTasksResult(results, list(weights), [(t, lat + fixed) for t, lat in sub.history],
                           alloc, alternatives=[list(a) for a in alternatives])
