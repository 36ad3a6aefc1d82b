"""``tc.tune``: the tuning loop of one task (ask, measure, append records, tell)."""
from __future__ import annotations

import math
import os
import resource
import time
import warnings
from dataclasses import dataclass, field

from ..schedule import Schedule
from ..schedule.records import Record, append_records, load_records
from .cost_model import RandomModel
from .evolution import EvolutionarySearch
from .measure import LocalMeasurer, MeasureInput
from .task import SearchTask, TuningOptions

__all__ = ["tune", "TuneResult", "default_cost_model"]


@dataclass
class TuneResult:
    """What a tuning run found.

    Attributes
    ----------
    best_schedule : Schedule or None
    best_cost : float
        Seconds per run of the best valid candidate (inf when none was valid).
    trials : int
        Candidates measured by this run (not counting resumed records).
    history : list of (trials, best GFLOP/s)
    search_seconds, measure_seconds, wall_seconds : float
    errors : dict
        Error kind name -> count among this run's measurements.
    peak_rss_mb : float
        The tuner's peak resident memory.
    """
    task: SearchTask
    best_schedule: Schedule | None = None
    best_cost: float = math.inf
    best_steps: list | None = None
    trials: int = 0
    history: list = field(default_factory=list)
    search_seconds: float = 0.0
    measure_seconds: float = 0.0
    wall_seconds: float = 0.0
    errors: dict = field(default_factory=dict)
    peak_rss_mb: float = 0.0

    @property
    def best_gflops(self) -> float:
        return self.task.flop_count() / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0


def default_cost_model(task, options: TuningOptions):
    """The learned model when it is available, else the random model (said once)."""
    try:
        from .xgb_model import XGBModel  # the learned model (needs the `tune` extra: xgboost)
        return XGBModel(task, seed=options.seed)
    except ImportError:
        if options.verbose:
            print("tecomp: xgboost not available, using the random cost model")
        return RandomModel(options.seed)


def tune(task: SearchTask, trials: int = 512, log=None, options: TuningOptions | None = None,
         cost_model=None, measurer=None) -> TuneResult:
    """Search schedules for ``task``, measuring ``trials`` new candidates.

    Parameters
    ----------
    task : SearchTask
    trials : int
        New measurements to make (candidates already in ``log`` are not measured again).
    log : str or path, optional
        JSON-lines tuning log: read to resume, appended after every round.
    options : TuningOptions, optional
    cost_model : CostModel, optional
        Default: the learned model when xgboost is installed, else random.
    measurer : Measurer, optional
        Default: a :class:`LocalMeasurer` (worker processes on this machine).

    Returns
    -------
    TuneResult
    """
    if not isinstance(task, SearchTask):
        raise TypeError(f"tune expects a SearchTask, got {type(task).__name__}")
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    opt = options or TuningOptions()
    model = cost_model if cost_model is not None else default_cost_model(task, opt)
    t_start = time.perf_counter()
    search = EvolutionarySearch(task, opt, model)
    result = TuneResult(task)
    target = str(task.target)
    flops = task.flop_count()
    if log is not None and os.path.exists(log):
        for r in load_records(log):
            if r.workload_key == task.workload_key and r.target == target:
                search.remember(r.key, r.result.mean_cost, r.decisions)
                if r.result.is_valid and r.result.mean_cost < result.best_cost:
                    result.best_cost, result.best_steps = r.result.mean_cost, r.steps
        if opt.verbose and search.measured:
            print(f"tecomp: resuming from {log}: {len(search.measured)} measured candidates")
    own = measurer is None
    measurer = measurer or LocalMeasurer(opt)
    try:
        empty_rounds = 0
        while result.trials < trials:
            t0 = time.perf_counter()
            batch = search.ask(min(opt.measures_per_round, trials - result.trials))
            t1 = time.perf_counter()
            result.search_seconds += t1 - t0
            if not batch:
                empty_rounds += 1
                if empty_rounds >= 2:
                    if opt.verbose:
                        print("tecomp: the search found no new candidate; stopping early")
                    break
                continue
            cutoff = opt.slow_cutoff * result.best_cost
            results = measurer.measure([MeasureInput(task, tuple(c.state.steps_records()), cutoff)
                                        for c in batch])
            t2 = time.perf_counter()
            result.measure_seconds += t2 - t1
            records = [Record(task.workload_key, target, c.state.steps_records(),
                              search.decisions_of(c), r, task.data_hash, flops)
                       for c, r in zip(batch, results)]
            if log is not None:
                append_records(log, records)
            search.tell(batch, results)
            result.search_seconds += time.perf_counter() - t2
            for rec in records:
                result.trials += 1
                res = rec.result
                if not res.is_valid:
                    result.errors[res.error.name] = result.errors.get(res.error.name, 0) + 1
                elif res.mean_cost < result.best_cost:
                    result.best_cost, result.best_steps = res.mean_cost, rec.steps
            result.history.append((result.trials, result.best_gflops))
            if opt.verbose:
                print(f"tecomp: trials {result.trials:5d}/{trials}  best {result.best_gflops:8.2f} "
                      f"GFLOP/s  errors {sum(result.errors.values())}  "
                      f"({time.perf_counter() - t_start:6.1f} s)", flush=True)
    finally:
        if own:
            measurer.close()
    result.wall_seconds = time.perf_counter() - t_start
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if result.best_steps is not None:
        try:
            result.best_schedule = Schedule.from_records(task.dag, result.best_steps)
        except Exception as e:  # a resumed record this version cannot replay
            warnings.warn(f"the best record does not replay: {e}", RuntimeWarning)
    return result
