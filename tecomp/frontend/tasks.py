"""A model's tuning tasks (its distinct fused groups, weighted by how often they run) and
``tc.tune_model``, which tunes them under one trial budget with the task scheduler."""
from __future__ import annotations

from .fusion import group_dag, partition
from .graph import Model

__all__ = ["model_tasks", "tune_model", "task_names"]


def _grouped(model: Model, include_simple: bool) -> list:
    """``[(GroupDAG, count)]``: one per distinct workload key, in first-occurrence order."""
    by_key: dict = {}
    for g in partition(model):
        if not include_simple and g.anchor is None:
            continue
        gd = group_dag(model, g)
        key = gd.dag.workload_key
        if key in by_key:
            by_key[key][1] += 1
        else:
            by_key[key] = [gd, 1]
    return [(gd, n) for gd, n in by_key.values()]


def model_tasks(model: Model, target="llvm", include_simple: bool = False) -> list:
    """``[(SearchTask, count)]`` of ``model`` (see :meth:`Model.tasks`)."""
    from ..search.task import SearchTask
    return [(SearchTask(gd.dag, target), n) for gd, n in _grouped(model, include_simple)]


def task_names(model: Model, include_simple: bool = False) -> list:
    """A readable name per task of :func:`model_tasks` (same order): the fused operators and
    the first layer's source node."""
    return [gd.group.name for gd, _ in _grouped(model, include_simple)]


def tune_model(model: Model, trials: int, log, target="llvm", options=None, measurer=None,
               progress=None, objective: str = "latency", include_simple: bool = False):
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

    Returns
    -------
    TuneTasksResult
    """
    from ..search.scheduler import tune_tasks
    if not isinstance(model, Model):
        raise TypeError(f"tune_model expects a tc.Model, got {type(model).__name__}")
    if log is None:
        raise ValueError("tune_model needs a log= path: compile_model builds from it")
    pairs = model_tasks(model, target, include_simple)
    if not pairs:
        raise ValueError(f"model {model.name!r} has no task to tune (no convolution, matrix "
                         f"product or reduction)")
    tasks, weights = [t for t, _ in pairs], [float(n) for _, n in pairs]
    return tune_tasks(tasks, trials, log=log, weights=weights, options=options,
                      measurer=measurer, progress=progress, objective=objective)
