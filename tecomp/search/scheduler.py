"""``tc.tune_tasks``: tune several tasks (a network's layers) under one trial budget.

The budget goes, round by round, to the task whose next round is expected to cut the weighted
total latency ``sum(weight_i * best_latency_i)`` the most (Ansor's gradient scheme): the expected
gain mixes the recent slope of the task's best latency (backward) with an optimistic forward
estimate: its latency shrinking like 1/trials, or, when that is lower, the latency it would have at
1/BETA of the best throughput a similar task (same compute tag) reaches, so a layer far behind
its siblings (a strided conv at 20 GFLOP/s beside 3x3 convs at 160) is expected to catch up.
Every task without a valid record in the log first gets one round (warm-up); an epsilon share of
rounds goes to a random task.

Before a task's round, the best programs of the tasks that share its sketches (the same fused
operator at other shapes: a network's 3x3 convolutions) are handed to its search, which replays
their decisions on its own sketches beside its own elites. A network gives most layers 16-32
trials; a layer then starts from the tiles its siblings found instead of from random ones.

The objective is either that weighted latency (the network's run time) or the weighted sum of
log latencies (``geomean``): every task's *relative* gain then counts alike, so a small layer far
from its potential is not starved by the big ones, which is what a per-layer comparison (the
geometric mean of speedups, no layer left behind) asks for.

Tasks may be *alternatives*: two ways to compute one layer (a convolution direct or by
Winograd), of which the network runs the faster. Such a set counts once in the objective, by
its fastest member, and a round on one member is worth only what it can take off that minimum.
"""
from __future__ import annotations

import enum
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..schedule import load_records
from .evolution import sketch_signature
from .measure import LocalMeasurer
from .task import TuningOptions
from .tune import TaskTuner, default_cost_model, log_lock

__all__ = ["tune_tasks", "TuneTasksResult", "SchedulerStrategy", "SchedulerObjective",
           "task_kind"]

ALPHA = 0.2   # weight of the backward (observed) slope against the forward estimate
BETA = 2.0    # a lagging task is expected to reach 1/BETA of its best similar task's FLOP rate
WINDOW = 3    # rounds over which the backward slope is taken
TRANSFER_TASKS = 4     # similar tasks whose best programs seed a task's search
TRANSFER_PER_TASK = 2  # best programs taken from each


class _Choice(str, enum.Enum):
    """A string-valued choice that prints as its value (``f"{strategy}"``, on every Python)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class SchedulerStrategy(_Choice):
    """How the task scheduler picks the next task (the values are what the CLI and callers pass)."""
    GRADIENT = "gradient"         # the task with the largest expected gain per trial
    ROUND_ROBIN = "round-robin"   # every task in turn


class SchedulerObjective(_Choice):
    """What the gradient strategy minimizes."""
    LATENCY = "latency"   # sum(w_i * best_i): the network's latency
    GEOMEAN = "geomean"   # sum(w_i * log best_i): relative gains count alike


def _member(cls, value, what: str):
    """``value`` (a member or its string value) as a member of ``cls``; ``ValueError`` naming the
    choices otherwise."""
    try:
        return cls(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; expected "
                         f"{' or '.join(repr(m.value) for m in cls)}") from None


@dataclass
class TuneTasksResult:
    """Per-task results and the weighted latency ``sum(w_i * best_i)`` after each round."""
    results: list
    weights: list
    history: list = field(default_factory=list)  # (total trials, weighted latency seconds)
    allocation: list = field(default_factory=list)  # trials per task
    #: tc.tune_model(in_place=K): the InPlaceTask rows of the ranking in the compiled model
    in_place: list = field(default_factory=list)
    #: sets of task indices that are alternatives (one layer, computed one way or another: only
    #: the fastest runs); a task in none counts alone
    alternatives: list = field(default_factory=list)

    @property
    def weighted_latency(self) -> float:
        """``sum(w_i * best_i)``, an alternative set counted once, by its fastest member."""
        total, seen = 0.0, set()
        for alt in self.alternatives:
            alt = [i for i in alt if i < len(self.results)]
            if alt:
                k = min(alt, key=lambda i: self.results[i].best_cost)
                total += self.weights[k] * self.results[k].best_cost
                seen.update(alt)
        return total + sum(w * r.best_cost for i, (w, r) in
                           enumerate(zip(self.weights, self.results)) if i not in seen)


def tune_tasks(tasks, trials: int, log=None, weights=None, options: TuningOptions | None = None,
               strategy: SchedulerStrategy | str = SchedulerStrategy.GRADIENT,
               cost_model_factory=None, measurer=None, progress=None,
               objective: SchedulerObjective | str = SchedulerObjective.LATENCY,
               alternatives=None) -> TuneTasksResult:
    """Tune ``tasks`` with ``trials`` measurements in all, allocated round by round.

    Parameters
    ----------
    tasks : list of SearchTask
    trials : int
        Total new measurements across tasks.
    log : str or path, optional
        One JSON-lines log for all tasks (resumed; appended every round; checked writable and
        locked against a second tuning before anything is measured, as in :func:`tecomp.tune`).
    weights : list of float, optional
        How often each task runs in the network (default 1 each).
    strategy : SchedulerStrategy or its value, "gradient" or "round-robin"
    objective : SchedulerObjective or its value, "latency" or "geomean"
        What the gradient strategy minimizes: ``sum(w_i * best_i)`` or ``sum(w_i * log best_i)``.
    cost_model_factory : callable, optional
        ``factory(task) -> CostModel``; default: ONE learned model (when available, else random)
        shared by all tasks, as Ansor does: it trains on every task's measurements (labels are
        normalized per task), so a layer with few trials is still ranked by a trained model.
    progress : callable, optional
        Called with the :class:`TuneTasksResult` so far after every round.
    alternatives : list of lists of int, optional
        Disjoint sets of task indices that compute the same layer in different ways (the network
        runs the fastest of each set): a set counts once in the objective, by its fastest member.
    """
    if not tasks:
        raise ValueError("tune_tasks needs at least one task")
    alternatives = _check_alternatives(alternatives, len(tasks))
    weights = [1.0] * len(tasks) if weights is None else [float(w) for w in weights]
    if len(weights) != len(tasks):
        raise ValueError(f"{len(weights)} weights for {len(tasks)} tasks")
    if not all(math.isfinite(w) and w >= 0 for w in weights):
        raise ValueError(f"task weights must be finite and >= 0, got {weights}")
    strategy = _member(SchedulerStrategy, strategy, "strategy")
    objective = _member(SchedulerObjective, objective, "objective")
    opt = options or TuningOptions()
    rng = np.random.default_rng(opt.seed)
    if cost_model_factory is None:
        shared = default_cost_model(list(tasks), opt)
        cost_model_factory = lambda t: shared  # noqa: E731
    with log_lock(log):  # before anything is measured: writable, and no other writer
        logged = load_records(log) if log is not None and os.path.exists(log) else []
        tuners = [TaskTuner(t, opt, cost_model_factory(t), log, logged) for t in tasks]
        out = TuneTasksResult([tu.result for tu in tuners], weights, alternatives=alternatives)
        out.allocation = [0] * len(tasks)
        # best latency after each of the task's rounds; a task resumed from the log with a valid
        # record starts warmed up (its log is its first round)
        best_hist = [[tu.result.best_cost] if tu.resumed and math.isfinite(tu.result.best_cost)
                     else [] for tu in tuners]
        signatures = [sketch_signature(tu.search) for tu in tuners]
        own = measurer is None
        measurer = measurer or LocalMeasurer(opt)
        t0 = time.perf_counter()
        used, turn = 0, 0
        try:
            while used < trials:
                alive = [i for i, tu in enumerate(tuners) if not tu.exhausted]
                if not alive:
                    break
                i = _pick(strategy, tuners, weights, best_hist, alive, turn, rng, opt.eps_greedy,
                          objective, opt.measures_per_round, alternatives)
                turn += 1
                tuners[i].search.transfer = _transfer(tuners, signatures, i)
                n = tuners[i].round(measurer, min(opt.measures_per_round, trials - used))
                used += n
                out.allocation[i] += n
                best_hist[i].append(tuners[i].result.best_cost)
                out.history.append((used, out.weighted_latency))
                if progress is not None:
                    progress(out)
                if opt.verbose:
                    print(f"tecomp: {used:5d}/{trials} trials, task {i} ({tasks[i]}) best "
                          f"{tuners[i].result.best_gflops:7.1f} GFLOP/s, weighted latency "
                          f"{out.weighted_latency * 1e3:9.3f} ms ({time.perf_counter() - t0:6.1f} s)",
                          flush=True)
        finally:
            if own:
                measurer.close()
        wall = time.perf_counter() - t0
        for tu in tuners:
            tu.finish(wall)
        return out


def _transfer(tuners, signatures, i) -> list:
    """Decisions of the best programs of the tasks that share task ``i``'s sketches (the same
    operator at other shapes), fastest tasks first: :data:`TRANSFER_TASKS` tasks, their
    :data:`TRANSFER_PER_TASK` best each."""
    similar = [j for j, tu in enumerate(tuners)
               if j != i and signatures[j] == signatures[i] and tu.search.elites]
    similar.sort(key=lambda j: -tuners[j].result.best_gflops)
    return [dec for j in similar[:TRANSFER_TASKS]
            for _, _, dec in tuners[j].search.elites[:TRANSFER_PER_TASK]]


def _check_alternatives(alternatives, n: int) -> list:
    """``alternatives`` as a list of lists of task indices, checked (disjoint, in range)."""
    out, seen = [], set()
    for alt in alternatives or ():
        alt = [int(i) for i in alt]
        if any(i < 0 or i >= n for i in alt) or seen & set(alt) or len(set(alt)) != len(alt):
            raise ValueError(f"alternatives must be disjoint sets of task indices in [0, {n}), "
                             f"got {alternatives!r}")
        seen.update(alt)
        if len(alt) > 1:
            out.append(alt)
    return out


def _pick(strategy, tuners, weights, best_hist, alive, turn, rng, eps, objective,
          per_round, alternatives=()) -> int:
    unwarmed = [i for i in alive if not best_hist[i]]
    if strategy is SchedulerStrategy.ROUND_ROBIN:
        return alive[turn % len(alive)]
    if unwarmed:
        return unwarmed[0]
    if rng.random() < eps:
        return int(rng.choice(alive))
    grads = {i: _gradient(i, tuners, weights, best_hist, objective, per_round) for i in alive}
    for alt in alternatives:
        _through_minimum(grads, alt, tuners, weights, objective, per_round)
    return min(grads, key=lambda i: grads[i])  # the most negative expected change


def _through_minimum(grads: dict, alt: list, tuners, weights, objective, per_round) -> None:
    """Turn the gradients of the alternatives ``alt`` into what a round on each takes off the
    set's fastest latency: a member only counts by how far below its rivals' best it may go."""
    best = {i: tuners[i].result.best_cost for i in alt}
    geomean = SchedulerObjective(objective) is SchedulerObjective.GEOMEAN
    for i in alt:
        if i not in grads or not math.isfinite(grads[i]) or not math.isfinite(best[i]):
            continue
        rival = min((best[j] for j in alt if j != i), default=math.inf)
        g = best[i]
        per = max(per_round, 1)
        # the gradient back in seconds of this task's latency per trial
        dg = grads[i] * (g if geomean else 1.0) / max(weights[i], 1e-12)
        new = g + dg * per
        gain = min(new, rival) - min(g, rival)
        d = weights[i] * gain / per
        grads[i] = d / min(g, rival) if geomean else d


def task_kind(dag) -> tuple:
    """What a task computes, for comparing FLOP rates: the tags of its reduction stages, each with
    its number of reduction axes longer than 1, else its output's tag.

    A fused group's output is often its elementwise epilogue, so the output's tag alone would rank
    a softmax ending in a ``where`` beside a matmul ending in an ``add``; and a depthwise conv,
    which reduces over no channel, is memory-bound beside a dense one of the same tag."""
    tags = tuple(sorted({(s.op.tag, sum(a.const_extent != 1 for a in s.reduce_axes))
                         for s in dag.compute_stages if s.reduce_axes}))
    return tags or (dag.outputs[0].op.tag,)


def _stale_rounds(hist) -> int:
    """Rounds at the end of ``hist`` (a task's best cost after each of its rounds) that did not
    improve on the round before."""
    n = 0
    while n + 1 < len(hist) and not hist[-1 - n] < hist[-2 - n]:
        n += 1
    return n


def _gradient(i, tuners, weights, best_hist, objective=SchedulerObjective.LATENCY,
              per_round: int = 16) -> float:
    """Expected change of the objective per trial spent on task ``i`` (negative: gain), for a
    round of ``per_round`` trials.

    The slopes are per round, turned into per-trial ones by the round's size, which is the same
    for every task. (Taking it as the task's trials over its rounds so far counted a resumed
    log's records as one round: a resumed task that was not picked yet then looked hundreds of
    times slower to improve than the one picked last, and a whole resumed tuning went to one
    task: 400 of 400 BERT trials to a projection already at 177 GFLOP/s, none to the 149 GFLOP/s
    layer with four times its latency.)"""
    res = tuners[i].result
    g = res.best_cost
    if not math.isfinite(g):
        return -math.inf  # nothing valid yet: any success is an unbounded gain
    hist = best_hist[i]
    trials = max(res.trials + getattr(tuners[i], "resumed", 0), 1)  # the log's records count
    per_round = max(per_round, 1)
    if len(hist) > WINDOW and math.isfinite(hist[-1 - WINDOW]):
        backward = (hist[-1] - hist[-1 - WINDOW]) / (WINDOW * per_round)
    else:
        backward = 0.0
    # forward: latency shrinking like 1/trials, or reaching 1/BETA of the best FLOP rate a task
    # of the same kind reaches, whichever is lower (Ansor's min(g_next_1, g_next_2))
    flops = tuners[i].flops
    kind = task_kind(tuners[i].task.dag)
    similar = [tu.flops / tu.result.best_cost for tu in tuners
               if math.isfinite(tu.result.best_cost) and task_kind(tu.task.dag) == kind]
    g_next = g - g / trials
    if similar:
        # the similar tasks' rate is trusted less the more rounds this task has had without
        # reaching it: Ansor's estimate expects it in the next round, for ever, and three 3x3
        # stride-2 depthwise convs (0.02-0.07 ms, held to the stride-1 ones' FLOP rate) drew
        # 368 of a resumed MobileNet-V2 NCHW tuning's 620 trials, the 0.79 ms stem none
        rounds = max(trials // per_round - 1, 0)
        target = BETA * flops / max(similar)
        g_next = min(g_next, g + (target - g) * 0.5 ** (rounds // WINDOW))
    # a task whose best has not moved for WINDOW rounds is less likely to reach the similar
    # tasks' rate than the estimate says: halve the forward slope for every WINDOW stale rounds
    # (without it one stuck layer drew 336 of 930 trials: a 3x3 stride-2 depthwise conv in NCHW,
    # measured against the dense ones' FLOP rate, never moved from 28.6 GFLOP/s)
    forward = (g_next - g) / per_round * 0.5 ** (_stale_rounds(hist) // WINDOW)
    grad = weights[i] * (ALPHA * backward + (1 - ALPHA) * forward)
    # d(log g) = dg / g: the same slopes, relative to the task's own latency
    return grad / g if SchedulerObjective(objective) is SchedulerObjective.GEOMEAN else grad
