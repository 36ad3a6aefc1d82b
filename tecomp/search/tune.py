"""``tc.tune``: the tuning loop of one task (ask, measure, append records, tell).

:class:`TaskTuner` is one task's search state and its rounds; :func:`tune` runs rounds of one task,
the task scheduler (:func:`tecomp.search.scheduler.tune_tasks`) interleaves rounds of several.
"""
from __future__ import annotations

import contextlib
import math
import os
import resource
import time
import warnings
from dataclasses import dataclass, field

from ..schedule import Schedule
from ..schedule.record_family import family_key
from ..schedule.records import Record, append_records, load_records
from ..schedule.target_match import TargetMatch, match_target, same_target
from .cost_model import RandomModel
from .decisions import Decisions
from .evolution import EvolutionarySearch
from .log_lock import LogLock
from .measure import LocalMeasurer, MeasureInput
from .target_search import target_search
from .task import SearchTask, TuningOptions

__all__ = ["tune", "TuneResult", "TaskTuner", "default_cost_model", "learned_cost_model",
           "log_lock"]

#: at most this many of a task's best records from other targets train the model
_OTHER_TARGET_SAMPLES = 128


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


def learned_cost_model(task, options: TuningOptions):
    """The XGBoost model of ``task`` (a task or a list of tasks of one target kind), starting
    from the target's shipped prior unless ``options.model_prior`` is False; ``ImportError``
    without xgboost."""
    from .xgb_model import XGBModel  # the learned model (needs the `tune` extra: xgboost)
    model = XGBModel(task, seed=options.seed)
    first = (task[0] if task else None) if isinstance(task, (list, tuple)) else task
    prior_of = target_search(first.target).prior if first is not None else None
    if options.model_prior and prior_of is not None:
        prior = prior_of(first.hardware)
        if prior is not None:
            model.add_prior(prior)
    return model


def default_cost_model(task, options: TuningOptions):
    """The learned model (:func:`learned_cost_model`) when it is available, else the random
    model (said once)."""
    try:
        return learned_cost_model(task, options)
    except ImportError:
        if options.verbose:
            print("tecomp: xgboost not available, using the random cost model")
        return RandomModel(options.seed)


class TaskTuner:
    """One task's search: resumes from ``log``, then each :meth:`round` measures up to ``n`` new
    candidates and appends their records. ``logged``: the log's records when the caller has read
    them already (a network's tuning reads its log once for all its tasks)."""

    def __init__(self, task: SearchTask, options: TuningOptions, cost_model=None, log=None,
                 logged: list | None = None):
        if task.missing_index_data:  # every candidate would fail to run: say so before any
            raise ValueError(f"{task}: the DAG reads sparse index data from "
                             f"{', '.join(repr(m) for m in task.missing_index_data)}; tune it "
                             f"with the real arrays: SearchTask(dag, target, "
                             f"inputs={{name: array}})")
        self.task, self.options, self.log = task, options, log
        self.model = cost_model if cost_model is not None else default_cost_model(task, options)
        self.search = EvolutionarySearch(task, options, self.model)
        self.result = TuneResult(task)
        self.target = str(task.target)
        self.flops = task.flop_count()
        self.empty_rounds = 0
        self.resumed = 0  # records of this task the log held when the tuner started
        if logged is None and log is not None and os.path.exists(log):
            logged = load_records(log)
        if logged:
            res = self.result
            records = [r for r in logged if r.workload_key == task.workload_key]
            # a NODE_LOST record measured nothing: its candidate is measured again
            mine = [r for r in records if r.result.measured and same_target(r.target, self.target)]
            for r in mine:
                self.search.remember(r.key, r.result.mean_cost, r.decisions)
            # the best record this version replays (a damaged or older record's cost would set
            # the slow cutoff of every round and be reported as the best with no schedule)
            skipped, why = 0, ""
            for r in sorted((r for r in mine if r.result.is_valid),
                            key=lambda r: r.result.mean_cost):
                try:
                    Schedule.from_records(task.dag, r.steps)
                except Exception as e:  # noqa: BLE001 - any step this version rejects
                    skipped, why = skipped + 1, why or f"{type(e).__name__}: {e}"
                    continue
                res.best_cost, res.best_steps = r.result.mean_cost, r.steps
                break
            if skipped:
                warnings.warn(f"{task}: the {skipped} best record(s) in {log} do not replay "
                              f"({why}); the best that does is the starting point",
                              RuntimeWarning)
            self.resumed = len(mine)
            self._learn_from(mine)
            self._seed_from_other_targets(records)
            if options.verbose and self.search.measured:
                print(f"tecomp: resuming from {log}: {len(self.search.measured)} measured "
                      f"candidates of {task}")
        self._seed_panels()

    def _learn_from(self, records) -> None:
        """A resumed tuning's model starts from what the log measured (a random model skips it)."""
        if not records or isinstance(self.model, RandomModel):
            return
        from .record_candidates import candidates_from_records
        cands, _, _ = candidates_from_records(self.task.dag, records)
        by_key = {r.key: r.result for r in records}
        self.model.update(cands, [by_key[c.key] for c in cands])

    def _seed_from_other_targets(self, records) -> None:
        """Records of this task from another CPU of this kind (see
        ``TuningOptions.cross_target_seeds``): their best programs seed the search, and a model
        that can learn from records (``add_records``) learns their order, labelled apart from
        this machine's measurements (one group per target: costs of two machines do not mix)."""
        n = self.options.cross_target_seeds
        if not n:
            return
        # a program is valid on every CPU of the kind (each lowers it for its own), so records
        # of a CPU with features this one lacks seed it too
        kinds = (TargetMatch.OTHER, TargetMatch.MISSING_FEATURES)
        other = sorted((r for r in records if r.result.is_valid
                        and match_target(r.target, self.target) in kinds),
                       key=lambda r: r.result.mean_cost)
        if not other:
            return
        # (a damaged record's decisions name no sketch: it seeds nothing)
        self.search.seeds = [Decisions.coerce(r.decisions) for r in other[:n]]
        add = getattr(self.model, "add_records", None)
        if add is not None:
            by_target: dict = {}
            # the best half, and the rest evenly spread: the model learns the whole range
            half = _OTHER_TARGET_SAMPLES // 2
            step = max(1, -(-(len(other) - half) // half))
            for r in other[:half] + other[half::step]:
                by_target.setdefault(r.target, []).append(r)
            for target, recs in by_target.items():
                add(self.task, recs, group=f"{self.task.workload_key} @ {target}")

    def _seed_panels(self) -> None:
        """The target's first programs (``TuningOptions.panel_seeds``) after any from another
        CPU: drawn with the run's seed, so a resumed tuning finds them measured."""
        seeder = target_search(self.task.target).seeds
        if seeder is None or not self.options.panel_seeds:
            return
        s = self.search
        try:
            extra = seeder(self.task, s.sketches, s.sketch_names, self.model,
                           self.options.panel_seeds, self.options.seed)
        except Exception as e:  # noqa: BLE001 - seeds are a head start; the search goes on
            warnings.warn(f"{self.task}: no panel seeds ({type(e).__name__}: {e})",
                          RuntimeWarning)
            return
        s.seeds = s.seeds + [d for d in extra if d not in s.seeds]

    @property
    def exhausted(self) -> bool:
        """Two rounds in a row found nothing new to measure."""
        return self.empty_rounds >= 2

    def round(self, measurer, n: int) -> int:
        """Ask, measure, log and tell ``n`` candidates; returns how many were measured."""
        res, opt = self.result, self.options
        t0 = time.perf_counter()
        batch = self.search.ask(n)
        t1 = time.perf_counter()
        res.search_seconds += t1 - t0
        if not batch:
            self.empty_rounds += 1
            return 0
        self.empty_rounds = 0
        cutoff = opt.slow_cutoff * res.best_cost
        results = measurer.measure([MeasureInput(self.task, tuple(c.state.steps_records()), cutoff)
                                    for c in batch])
        t2 = time.perf_counter()
        res.measure_seconds += t2 - t1
        records = [Record(self.task.workload_key, self.target, c.state.steps_records(),
                          self.search.decisions_of(c).to_json(), r, self.task.data_hash,
                          self.flops,
                          family=family_key(self.task.dag))
                   for c, r in zip(batch, results)]
        if self.log is not None:
            append_records(self.log, records)
        # a candidate whose machine was lost (NODE_LOST) is no trial: the search may ask for it
        # again and the model learns nothing of it
        done = [(c, r) for c, r in zip(batch, results) if r.measured]
        if done:
            self.search.tell([c for c, _ in done], [r for _, r in done])
        res.search_seconds += time.perf_counter() - t2
        for rec in records:
            r = rec.result
            res.trials += r.measured
            if not r.is_valid:
                res.errors[r.error.name] = res.errors.get(r.error.name, 0) + 1
            elif r.mean_cost < res.best_cost:
                res.best_cost, res.best_steps = r.mean_cost, rec.steps
        res.history.append((res.trials, res.best_gflops))
        return len(done)

    def finish(self, wall_seconds: float) -> TuneResult:
        res = self.result
        res.wall_seconds = wall_seconds
        res.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if res.best_steps is not None:
            try:
                res.best_schedule = Schedule.from_records(self.task.dag, res.best_steps)
            except Exception as e:  # a resumed record this version cannot replay
                warnings.warn(f"the best record does not replay: {e}", RuntimeWarning)
        return res


def log_lock(log):
    """:class:`LogLock` on ``log``, or nothing to hold when there is no log."""
    return contextlib.nullcontext() if log is None else LogLock(log)


def tune(task: SearchTask, trials: int = 512, log=None, options: TuningOptions | None = None,
         cost_model=None, measurer=None, progress=None) -> TuneResult:
    """Search schedules for ``task``, measuring ``trials`` new candidates.

    Parameters
    ----------
    task : SearchTask
    trials : int
        New measurements to make (candidates already in ``log`` are not measured again).
    log : str or path, optional
        JSON-lines tuning log: read to resume, appended after every round. It is checked to be
        writable, and locked against a second tuning, before anything is measured
        (``PermissionError`` / :class:`~tecomp.search.log_lock.LogBusyError`).
    options : TuningOptions, optional
    cost_model : CostModel, optional
        Default: the learned model when xgboost is installed, else random.
    measurer : Measurer, optional
        Default: a :class:`LocalMeasurer` (worker processes on this machine).
    progress : callable, optional
        Called with the :class:`TuneResult` so far after every round.

    Returns
    -------
    TuneResult
    """
    if not isinstance(task, SearchTask):
        raise TypeError(f"tune expects a SearchTask, got {type(task).__name__}")
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    opt = options or TuningOptions()
    with log_lock(log):  # before anything is measured: writable, and no other writer
        t_start = time.perf_counter()
        tuner = TaskTuner(task, opt, cost_model, log)
        own = measurer is None
        measurer = measurer or LocalMeasurer(opt)
        res = tuner.result
        try:
            while res.trials < trials and not tuner.exhausted:
                tuner.round(measurer, min(opt.measures_per_round, trials - res.trials))
                if progress is not None:
                    progress(res)
                if opt.verbose:
                    print(f"tecomp: trials {res.trials:5d}/{trials}  best {res.best_gflops:8.2f} "
                          f"GFLOP/s  errors {sum(res.errors.values())}  "
                          f"({time.perf_counter() - t_start:6.1f} s)", flush=True)
            if tuner.exhausted and opt.verbose:
                print("tecomp: the search found no new candidate; stopping early")
        finally:
            if own:
                measurer.close()
        return tuner.finish(time.perf_counter() - t_start)
