"""Search tasks and tuning options."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ..ir.dag import ComputeDAG
from ..target import Target, TargetKind

__all__ = ["SearchTask", "HardwareParams", "TuningOptions"]


@dataclass(frozen=True)
class HardwareParams:
    """What the search needs to know of the target machine."""
    num_cores: int
    vector_bytes: int = 64
    cache_line_bytes: int = 64
    # GPU limits (used for target "cuda"): per block threads, static shared memory and 32-bit
    # registers, threads per warp, and the largest vthread extent a candidate may have
    max_threads_per_block: int = 1024
    max_shared_bytes: int = 48 * 1024
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    warp_size: int = 32
    max_vthread: int = 8

    @staticmethod
    def for_target(target: Target) -> "HardwareParams":
        if target.kind is TargetKind.CUDA:  # sm_70 .. sm_90 share these limits
            return HardwareParams(num_cores=132, vector_bytes=16, cache_line_bytes=128)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        feats = target.features or ""
        vec = 64 if "+avx512f" in feats else 32 if "+avx2" in feats or "+avx" in feats else 16
        return HardwareParams(num_cores=max(1, cores or 1), vector_bytes=vec)


class SearchTask:
    """A DAG to tune for a target.

    Parameters
    ----------
    dag : ComputeDAG
    target : str or Target
    inputs : dict, optional
        Real data for some inputs, by placeholder name (sparse index arrays: ``indptr``,
        ``indices``); measurement uses it, and the records carry its hash.
    """

    def __init__(self, dag: ComputeDAG, target="llvm", inputs: dict | None = None,
                 hardware: HardwareParams | None = None):
        if not isinstance(dag, ComputeDAG):
            raise TypeError(f"SearchTask expects a ComputeDAG, got {type(dag).__name__}")
        self.dag = dag
        self.target = Target.parse(target)
        names = {t.name: t for t in dag.inputs}
        self.inputs = {}
        for k, v in (inputs or {}).items():
            if k not in names:
                raise ValueError(f"SearchTask: inputs names {k!r}, which is not an input of the DAG "
                                 f"(inputs: {', '.join(names)})")
            a = np.ascontiguousarray(v)
            t = names[k]
            if a.shape != t.shape or a.dtype != t.dtype.np:
                raise ValueError(f"SearchTask: input {k!r} must be {t.dtype}{list(t.shape)}, got "
                                 f"{a.dtype}{list(a.shape)}")
            self.inputs[k] = a
        self.hardware = hardware or HardwareParams.for_target(self.target)

    @property
    def workload_key(self) -> str:
        return self.dag.workload_key

    @property
    def data_hash(self) -> str:
        """A stable hash of the real input data the task measures with ("" when there is none).

        For sparse tasks this names the index data (``indptr``/``indices``) a tuned kernel was
        tuned on; records store it (their ``"data"`` field). It covers each array's name, dtype,
        shape and bytes (so nnz and the row count), in name order, and is independent of the
        process, platform byte order and memory layout, so a log's hash can be recomputed later.
        The schedule itself is valid for any index data of the same shapes.
        """
        if not self.inputs:
            return ""
        h = hashlib.sha256(b"tecomp-data-v1")
        for k in sorted(self.inputs):
            a = self.inputs[k]
            le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
            h.update(f"|{k}|{le.dtype.str}|{'x'.join(map(str, a.shape))}|".encode())
            h.update(le.tobytes())
        return h.hexdigest()[:16]

    def flop_count(self) -> float:
        return self.dag.flop_count(inputs=self.inputs or None)

    def __repr__(self):
        return f"SearchTask({self.workload_key[:12]}, {self.target})"


@dataclass
class TuningOptions:
    """Options of :func:`tecomp.tune`.

    Attributes
    ----------
    population : int
        Candidates per generation of the evolutionary search.
    generations : int
        Generations per round.
    measures_per_round : int
        Candidates measured per round.
    eps_greedy : float
        Share of each round's measurements picked at random from the initial population.
    build_timeout, run_timeout : float
        Seconds a candidate may take to compile / to run (all repeats) before it is an error.
    repeat, min_repeat_ms : int
        Timing: median of ``repeat`` measurements, each lasting at least ``min_repeat_ms``.
    flush_cache : bool
        Overwrite the caches between repeats.
    n_workers : int
        Parallel build processes (runs are serialized so that kernels do not share cores).
    seed : int
    verbose : bool
    """
    population: int = 256
    generations: int = 3
    #: 16, not Ansor's 64: the model retrains between rounds, and smaller rounds let it steer
    #: sooner (conv2d 64x56x56 NCHW, seeds 1 and 2: best after 128 trials 181/203 GFLOP/s
    #: against 164/160 with 32 per round)
    measures_per_round: int = 16
    eps_greedy: float = 0.05
    build_timeout: float = 30.0
    run_timeout: float = 20.0
    repeat: int = 3
    min_repeat_ms: int = 40
    flush_cache: bool = False
    n_workers: int = 2
    seed: int = 0
    verbose: bool = True
    mutation_prob: float = 0.85
    #: a candidate whose first call is this many times slower than the best so far is not timed
    #: in full (its one call is its cost)
    slow_cutoff: float = 10.0
    init_measured_ratio: float = 0.2
    #: at most this many candidates of one register tile (sketch, innermost tile lengths and
    #: vectorization) per round before the rest of the ranking fills up (0: no limit); the
    #: model's top picks are otherwise mostly mutants of one elite, and the search stalls there
    max_per_register_tile: int = 0
    #: of each round's model picks, this many go to the best candidates of each sketch before
    #: the global ranking fills the rest (0: none). Without it the learned search of conv2d NCHW
    #: (seed 1) spent 414 of 448 trials on one sketch and missed the best program, which the
    #: random search found in another
    per_sketch_picks: int = 1
    #: a sketch with fewer valid measured programs than this gets an equal share of each
    #: round's model picks (with ``per_sketch_picks`` > 0)
    sketch_warmup: int = 16
    #: of each generation's slots, this share per sketch present goes to children of that
    #: sketch's own members (0: parents from the whole population by score alone)
    sketch_share: float = 0.1
    #: of each round's model picks, this many (after the per-sketch picks) go to the
    #: best-scored candidates of distinct tile structures (every tiled loop's lengths but the
    #: outermost; 0: the ranking alone). A model trained on a mediocre first elite ranks that
    #: elite's near-copies (other outer tiles, unroll depths) first, and the run stalls there.
    #: Off by default: 8 per round moved conv2d NCHW's efficiency run from 46-49 / 82-167 /
    #: >256 trials to 72 / >256 / 92 (no better), and left the simulated best the same
    #: (benchmarks/search_sim.py, 6 seeds, after 64/128/256 trials: 124/142/155 surrogate
    #: GFLOP/s against 119/144/153)
    diverse_picks: int = 0
    #: of each round's model picks, this many (after the per-sketch picks) go to the
    #: best-scored of the round's fresh random samples (not descended from measured programs).
    #: The evolved candidates descend from the measured elites, and a model trained on a
    #: mediocre first elite ranks its near-copies first: without these picks one real conv2d
    #: NCHW efficiency seed in three stalled (best 98-130 GFLOP/s re-measured after 256 trials,
    #: against 170-200 for the others); with 8, none of six did (182-203). Resumed from a
    #: stalled run's state (benchmarks/search_sim.py --start, 4 seeds), the simulated best after
    #: 128 more trials was 157 surrogate GFLOP/s with 8, 138 with 4, 109 with none
    fresh_picks: int = 8

    def __post_init__(self):
        """Impossible options raise here, not after a round of silent no-ops (``population=0``
        ran 0 trials; ``repeat=0`` logged results without costs as measured)."""
        ints = {"population": 1, "generations": 0, "measures_per_round": 1, "repeat": 1,
                "min_repeat_ms": 0, "n_workers": 1, "max_per_register_tile": 0,
                "per_sketch_picks": 0, "sketch_warmup": 0, "diverse_picks": 0, "fresh_picks": 0}
        for name, low in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"TuningOptions.{name} must be an integer >= {low}, got {v!r}")
        shares = ("eps_greedy", "mutation_prob", "init_measured_ratio", "sketch_share")
        positive = ("build_timeout", "run_timeout", "slow_cutoff")
        for name in shares + positive:
            v = getattr(self, name)
            ok = isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and (
                0 <= v <= 1 if name in shares else 0 < v < float("inf"))
            if not ok:
                want = "in [0, 1]" if name in shares else "a positive finite number"
                raise ValueError(f"TuningOptions.{name} must be {want}, got {v!r}")
