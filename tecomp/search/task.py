"""Search tasks and tuning options."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ..ir.dag import ComputeDAG
from ..target import Target

__all__ = ["SearchTask", "HardwareParams", "TuningOptions"]


@dataclass(frozen=True)
class HardwareParams:
    """What the search needs to know of the target machine."""
    num_cores: int
    vector_bytes: int = 64
    cache_line_bytes: int = 64
    #: architectural vector registers (x86: 16 with AVX2, 32 with AVX-512): the register tile's
    #: accumulators, operands and broadcast must fit in them
    vector_registers: int = 16
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
        """The parameters of ``target``'s kind (:class:`~.target_search.TargetSearch`
        ``hardware``): :meth:`for_cpu` or :meth:`for_cuda`."""
        from .target_search import target_search  # it names these functions: imported when used
        return target_search(target).hardware(target)

    @staticmethod
    def for_cuda(target: Target) -> "HardwareParams":
        """An NVIDIA GPU's limits (sm_70 .. sm_90 share them)."""
        return HardwareParams(num_cores=132, vector_bytes=16, cache_line_bytes=128)

    @staticmethod
    def for_cpu(target: Target) -> "HardwareParams":
        """This host's cores (those the process may run on) and ``target``'s vector width."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        feats = target.features or ""
        vec = 64 if "+avx512f" in feats else 32 if "+avx2" in feats or "+avx" in feats else 16
        regs = 32 if "+avx512f" in feats or "+neon" in feats else 16
        return HardwareParams(num_cores=max(1, cores or 1), vector_bytes=vec,
                              vector_registers=regs)


class SearchTask:
    """A DAG to tune for a target.

    Parameters
    ----------
    dag : ComputeDAG
    target : str or Target
    inputs : dict, optional
        Real data for some inputs, by placeholder name (sparse index arrays: ``indptr``,
        ``indices``); measurement uses it, and the records carry its hash.
    constants : iterable of str, optional
        Inputs that are constants where the kernel runs (a model's weights, built with
        ``tc.build(..., constants=...)``): candidates are measured built the same way, so the
        stages that depend only on them (a weight packed into the tile layout) run once at build
        time and are not timed, as in the deployed kernel.
    """

    def __init__(self, dag: ComputeDAG, target="llvm", inputs: dict | None = None,
                 hardware: HardwareParams | None = None, constants=None):
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
        self._check_index_data()
        self.hardware = hardware or HardwareParams.for_target(self.target)
        self.constants = tuple(constants or ())
        unknown = [c for c in self.constants if c not in names or c in self.inputs]
        if unknown:
            raise ValueError(f"SearchTask: constants names {unknown}, which are not inputs of the "
                             f"DAG without real data (inputs: {', '.join(names)})")

    def _check_index_data(self) -> None:
        """A DAG with CSR structures (sparse ops) is tuned on real index data: data its kernels
        reject is an error here; without it (``missing_index_data``), the task can be sketched
        but not measured."""
        self.missing_index_data = ()
        if not self.dag.checks:
            return
        from ..ir.validate import IndexValidator
        v = IndexValidator(self.dag)
        ins = list(self.dag.inputs)
        need = {t.name for c in self.dag.checks for t in (c.indptr, c.indices) if t is not None}
        need |= {ins[p].name for p in v.needed}
        self.missing_index_data = tuple(sorted(need - set(self.inputs)))
        if self.missing_index_data:
            return  # sketches and features assume uniform rows; tune() refuses to measure
        try:
            v.check([self.inputs.get(t.name) for t in ins])
        except ValueError as e:
            raise ValueError(f"SearchTask: the index data in inputs= is invalid: {e}") from None

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
    """Options of :func:`tecomp.tune`. The measurements behind the defaults are in
    docs/search_notes.md.

    Attributes
    ----------
    population : int
        Candidates per generation of the evolutionary search.
    generations : int
        Generations per round.
    measures_per_round : int
        Candidates measured per round (16, not Ansor's 64: the model retrains between rounds,
        and smaller rounds let it steer sooner).
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
        Seed of every random choice of the search (sketch sampling, mutation, eps-greedy picks).
    verbose : bool
        Print a line per round.
    mutation_prob : float
        Probability that a child of the evolution is a mutant of its parent (else the parent).
    slow_cutoff : float
        A candidate whose first call is this many times slower than the best so far is not timed
        in full (its one call is its cost).
    init_measured_ratio : float
        The best measured programs, up to this share of ``population``, join each round's
        initial population of fresh random samples.
    max_per_register_tile : int
        At most this many candidates of one register tile (sketch, innermost tile lengths and
        vectorization) per round before the rest of the ranking fills up (0: no limit).
    per_sketch_picks : int
        Of each round's model picks, this many go to the best candidates of each sketch before
        the global ranking fills the rest (0: none), so that one sketch cannot take every trial.
    sketch_warmup : int
        A sketch with fewer valid measured programs than this gets an equal share of each
        round's model picks (with ``per_sketch_picks`` > 0).
    sketch_share : float
        Of each generation's slots, this share per sketch present goes to children of that
        sketch's own members (0: parents from the whole population by score alone).
    diverse_picks : int
        Of each round's model picks, this many (after the per-sketch picks) go to the
        best-scored candidates of distinct tile structures (0, the default: the ranking alone).
    fresh_picks : int
        Of each round's model picks, this many (after the per-sketch picks) go to the
        best-scored of the round's fresh random samples, so that a run whose first elite is
        mediocre does not stall among its near-copies.
    cross_target_seeds : int
        A log that holds this task's records from another CPU of the same kind (a log carried
        to a new machine) seeds the search with that CPU's this many best programs: the first
        rounds measure them here, and the learned model trains on that CPU's records (ranked
        among themselves) from the start (0: ignore them).
    model_prior : bool
        The learned cost model starts from the shipped prior of this CPU's vector width (other
        operators' programs measured on such a CPU, :mod:`tecomp.search.model_prior`): it ranks
        the first round's candidates instead of drawing them at random. False: it learns from
        this task's measurements alone.
    panel_seeds : int
        Per sketch with a multi-level-tiled stage, the programs of this many register shapes in
        a BLAS kernel's structure (:mod:`tecomp.search.panel_seeds`) are measured first and
        join every round's population (0: none; targets without such seeds ignore it).
    """
    population: int = 256
    generations: int = 3
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
    slow_cutoff: float = 10.0
    init_measured_ratio: float = 0.2
    max_per_register_tile: int = 0
    per_sketch_picks: int = 1
    sketch_warmup: int = 16
    sketch_share: float = 0.1
    diverse_picks: int = 0  # off: no gain measured (docs/search_notes.md)
    fresh_picks: int = 8
    cross_target_seeds: int = 8
    model_prior: bool = True
    panel_seeds: int = 2

    def __post_init__(self):
        """Impossible options raise here, not after a round of silent no-ops (``population=0``
        ran 0 trials; ``repeat=0`` logged results without costs as measured)."""
        ints = {"population": 1, "generations": 0, "measures_per_round": 1, "repeat": 1,
                "min_repeat_ms": 0, "n_workers": 1, "max_per_register_tile": 0,
                "per_sketch_picks": 0, "sketch_warmup": 0, "diverse_picks": 0, "fresh_picks": 0,
                "cross_target_seeds": 0, "panel_seeds": 0}
        for name, low in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"TuningOptions.{name} must be an integer >= {low}, got {v!r}")
        shares = ("eps_greedy", "mutation_prob", "init_measured_ratio", "sketch_share")
        positive = ("build_timeout", "run_timeout", "slow_cutoff")  # slow_cutoff may be inf
        for name in shares + positive:
            v = getattr(self, name)
            top = float("inf") if name == "slow_cutoff" else 1e9
            ok = isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and (
                0 <= v <= 1 if name in shares else 0 < v <= top)
            if not ok:
                want = "in [0, 1]" if name in shares else f"a positive number up to {top:g}"
                raise ValueError(f"TuningOptions.{name} must be {want}, got {v!r}")
        if not isinstance(self.model_prior, (bool, np.bool_)):
            raise ValueError(f"TuningOptions.model_prior must be True or False, "
                             f"got {self.model_prior!r}")
