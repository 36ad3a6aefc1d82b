"""The timing protocol every comparison of tecomp with another library uses.

A comparison is a list of :class:`Config` (one system, one variant — layout, weight packing — and
one thread count each), all in this process. :func:`compare` times them so that no configuration
is favoured by the order it runs in or the state the process is in:

1. Warm-up: every configuration is called ``warmup`` times, in a shuffled order, before anything is
   timed (page-faulted heaps, JIT caches, thread pools started, packed weights made).
2. Calibration: each configuration's batch is as many back-to-back calls as last ``min_batch_s``.
3. Rounds: each round runs every configuration, in a freshly shuffled order, ``batches`` batches
   each, after setting its thread count and waiting until the process is idle (:func:`settle`):
   the worker threads of the library that ran before keep spinning after their call returns
   (ONNX Runtime's intra-op pool for some 50 ms, OpenMP's for some 8 ms on the Zen 3 machine),
   and whoever ran next would share the cores with them. A round's figure for a configuration is
   its fastest batch.
4. The figure is the median over rounds of the per-round figures; the spread printed beside it is
   the minimum and maximum over rounds.

The baseline a ratio is taken against is the fastest configuration of the peers (every peer at both
thread counts and each of its layouts); tecomp's figure is its fastest configuration likewise.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Config", "Timing", "Comparison", "compare", "settle", "TECOMP"]

#: The system name of tecomp's own configurations.
TECOMP = "tecomp"


@dataclass
class Config:
    """One way of running the computation under comparison.

    Attributes
    ----------
    system : str
        ``"tecomp"`` or the peer library (``"numpy"``, ``"torch"``, ``"onnxruntime"``, ...).
    variant : str
        What distinguishes this configuration within its system (layout, weight packing, method).
    threads : int
        The thread count it runs at (set by ``enter`` before each of its batches).
    fn : callable
        One call of the computation (inputs and outputs prepared beforehand, outside the timing).
    enter : callable, optional
        Called before each batch to put the system at ``threads`` threads.
    output : callable, optional
        Runs the computation once more and returns its result as a numpy array in tecomp's layout,
        so that every configuration's answer can be checked.
    """
    system: str
    variant: str
    threads: int
    fn: Callable[[], Any]
    enter: Callable[[], None] | None = None
    output: Callable[[], Any] | None = None

    @property
    def label(self) -> str:
        v = f" {self.variant}" if self.variant else ""
        return f"{self.system}{v} ({self.threads}t)"


@dataclass
class Timing:
    """Seconds per call of one :class:`Config`: ``median`` over rounds of each round's fastest
    batch, with ``low``..``high`` the spread over rounds."""
    config: Config
    median: float
    low: float
    high: float
    calls_per_batch: int
    per_round: list = field(default_factory=list)


@dataclass
class Comparison:
    """The timings of one :func:`compare` run and what follows from them."""
    timings: list

    def best(self, system: str | None = None, exclude: str | None = None) -> Timing | None:
        """The fastest timing of ``system`` (all systems if None), optionally excluding one."""
        pool = [t for t in self.timings
                if (system is None or t.config.system == system)
                and (exclude is None or t.config.system != exclude)]
        return min(pool, key=lambda t: t.median) if pool else None

    @property
    def tecomp(self) -> Timing | None:
        return self.best(TECOMP)

    @property
    def peer(self) -> Timing | None:
        """The strongest peer: the fastest configuration of any other system."""
        return self.best(exclude=TECOMP)

    @property
    def ratio(self) -> float:
        """Best peer time / best tecomp time (above 1: tecomp is faster); nan without both."""
        t, p = self.tecomp, self.peer
        return p.median / t.median if t and p else math.nan


def _enter(c: Config) -> None:
    if c.enter is not None:
        c.enter()


def settle(pause_s: float = 0.01, probe_s: float = 0.005, busy: float = 0.2,
           max_s: float = 1.0) -> float:
    """Sleep until no thread of this process is spinning, and return the seconds waited.

    Sleeps ``pause_s``, then probes ``probe_s`` windows until one in which the whole process
    (every thread: the peers' worker pools included) used less than ``busy`` of a core, or until
    ``max_s`` has passed (a pool that never sleeps cannot hold the comparison up).
    """
    t0 = time.perf_counter()
    if pause_s > 0:
        time.sleep(pause_s)
    while time.perf_counter() - t0 < max_s:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(probe_s)
        if time.process_time() - c0 < busy * (time.perf_counter() - w0):
            break
    return time.perf_counter() - t0


def _batch(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0


def compare(configs, rounds: int = 7, batches: int = 3, min_batch_s: float = 0.03,
            warmup: int = 3, pause_s: float = 0.01, seed: int = 0,
            max_seconds: float | None = None) -> Comparison:
    """Time ``configs`` (a list of :class:`Config`) interleaved in this process.

    Parameters
    ----------
    configs : list of Config
    rounds : int
        Rounds; each runs every configuration once, in a shuffled order.
    batches : int
        Batches per configuration and round; the round keeps the fastest.
    min_batch_s : float
        Each batch runs as many calls as last at least this long (calibrated after warm-up).
    warmup : int
        Untimed calls of every configuration before the first timing.
    pause_s : float
        Sleep before each configuration's batches, and then wait until the previous library's
        worker threads have stopped spinning (:func:`settle`); 0 skips both.
    seed : int
        Seed of the shuffles.
    max_seconds : float, optional
        Stop after the round in which this much time has passed (at least 3 rounds run).

    Returns
    -------
    Comparison
    """
    configs = list(configs)
    if not configs:
        raise ValueError("compare() needs at least one configuration")
    if rounds < 1 or batches < 1:
        raise ValueError("rounds and batches must be >= 1")
    rng = random.Random(seed)
    order = list(range(len(configs)))
    for _ in range(max(warmup, 1)):
        rng.shuffle(order)
        for i in order:
            _enter(configs[i])
            configs[i].fn()
    counts = []
    for c in configs:
        _enter(c)
        one = min(_batch(c.fn, 1) for _ in range(3))
        counts.append(max(1, math.ceil(min_batch_s / max(one, 1e-7))))
    per_round = [[] for _ in configs]
    start = time.perf_counter()
    for r in range(rounds):
        rng.shuffle(order)
        for i in order:
            c, n = configs[i], counts[i]
            _enter(c)
            if pause_s > 0:
                settle(pause_s)
            per_round[i].append(min(_batch(c.fn, n) for _ in range(batches)) / n)
        if max_seconds is not None and r >= 2 and time.perf_counter() - start > max_seconds:
            break
    return Comparison([Timing(c, statistics.median(s), min(s), max(s), n, s)
                       for c, n, s in zip(configs, counts, per_round)])
