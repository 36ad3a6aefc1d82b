"""GPU annotation: a GPU sketch (:mod:`tecomp.search.gpu_sketch`) plus decisions becomes a concrete
schedule, through the same decision tables (:class:`~tecomp.search.decisions.Decisions`) as
:mod:`tecomp.search.annotate`:

- ``tile``: split step index -> inner lengths, sampled jointly per tiled stage so that the threads
  of a block stay within ``max_threads_per_block`` (a multiple of the warp size preferred) and
  the vthreads within ``max_vthread``;
- ``vec``: shared stage name -> vector length of its cooperative fetch (1, 2 or 4 elements, at
  most 16 bytes);
- ``unroll``: stage name -> ``auto_unroll_max_step`` (Ansor's GPU choices, up to 1024).

A candidate is rejected (None) before anything is built when its estimated shared memory or
registers exceed the hardware's, or when the GPU validity check of the lowered program
(:func:`tecomp.lowering.gpu_passes.check_gpu_program`) fails.
"""
from __future__ import annotations

import math

from ..ir.loop import Scope
from ..schedule.state import Annotation, ComputeLocation, ScheduleError, State
from ..schedule.steps import AnnotationStep
from .annotate import Candidate, annotate_unroll, apply_step, factorizations
from .decisions import Decisions, MutationKind
from .gpu_sketch import CoopHole, GPUTileHole, HoleRole
from .sketch_rule import FollowHole, Sketch, TileHole

__all__ = ["materialize_gpu", "GPU_UNROLL_CHOICES", "VECTOR_CHOICES", "gpu_usage", "GPUUsage",
           "GPU_TABLES"]

GPU_UNROLL_CHOICES = (0, 16, 64, 512, 1024)
VECTOR_CHOICES = (1, 2, 4)
_TRIES = 64
#: share of the samples whose thread count is not a multiple of the warp size that are kept
_ODD_THREADS_KEEP = 0.25
#: the decision tables of a GPU candidate
GPU_TABLES = (MutationKind.TILE, MutationKind.VEC, MutationKind.UNROLL)


def _sample(rng, h: TileHole, hw) -> list:
    """Inner lengths of one hole: a uniform exact factorization (thread parts up to a block's
    threads, serial innermost parts up to 64); a thread-only hole may also take a power-of-two
    thread count that does not divide its extent (the tail is guarded)."""
    roles = getattr(h, "roles", ())
    thread_inner = bool(roles) and roles[-1] is HoleRole.THREAD
    limit = hw.max_threads_per_block if thread_inner else 64
    if thread_inner and h.parts == 2 and rng.random() < 0.3:
        cands = [t for t in (32, 64, 128, 256, 512, 1024) if t <= min(h.extent, limit)]
        if cands:
            return [int(rng.choice(cands))]
    opts = factorizations(max(h.extent, 1), h.parts, limit)
    return list(opts[int(rng.integers(len(opts)))])


def _counts(holes: dict, tiles: dict) -> tuple:
    """(threads, vthreads) of one group of holes under ``tiles``."""
    threads = vthreads = 1
    for idx, h in holes.items():
        for role, x in zip(getattr(h, "roles", ()), tiles[idx]):
            if role is HoleRole.THREAD:
                threads *= x
            elif role is HoleRole.VTHREAD:
                vthreads *= x
    return threads, vthreads


def _group_ok(holes: dict, tiles: dict, hw, rng=None) -> bool:
    threads, vthreads = _counts(holes, tiles)
    if threads > hw.max_threads_per_block or vthreads > hw.max_vthread:
        return False
    if rng is not None and threads % hw.warp_size and rng.random() > _ODD_THREADS_KEEP:
        # prefer whole warps, unless the group's thread extents cannot make one
        full = math.prod(min(h.extent, hw.max_threads_per_block) for h in holes.values()
                         if HoleRole.THREAD in getattr(h, "roles", ()))
        return full < hw.warp_size
    return True


def _valid(v, h: TileHole) -> bool:
    if not isinstance(v, (list, tuple)) or len(v) != h.parts - 1:
        return False
    if not all(isinstance(x, int) and x >= 1 for x in v):
        return False
    return math.prod(v) <= max(h.extent, 1)


def _fill_tiles(sketch: Sketch, table: dict, rng, hw) -> dict | None:
    """Lengths of every TileHole (keeping valid decisions of ``table``, which gets the result);
    None when a group cannot be made valid."""
    groups: dict = {}
    for idx, h in sketch.holes.items():
        if isinstance(h, TileHole):
            groups.setdefault(getattr(h, "group", ""), {})[idx] = h
    tiles = {}
    for holes in groups.values():
        cur = {i: tuple(table[i]) for i, h in holes.items() if _valid(table.get(i), h)}
        for i, h in holes.items():
            if i not in cur:
                cur[i] = tuple(_sample(rng, h, hw))
        fresh = len([i for i in holes if i not in table]) == len(holes)
        ok = _group_ok(holes, cur, hw, rng if fresh else None)
        for _ in range(_TRIES if not ok else 0):
            cur = {i: tuple(_sample(rng, h, hw)) for i, h in holes.items()}
            if _group_ok(holes, cur, hw, rng):
                ok = True
                break
        if not ok:
            return None
        tiles.update(cur)
    table.update(tiles)
    return tiles


def materialize_gpu(task, sketch_id: int, sketch: Sketch, decisions: Decisions,
                    rng) -> Candidate | None:
    """The candidate of GPU ``sketch`` under ``decisions`` (missing or invalid ones sampled with
    ``rng``; the candidate's decisions are complete); None when it is not a legal schedule or not
    a valid GPU program on ``task.hardware``."""
    hw = task.hardware
    K = MutationKind
    d = decisions.tables(GPU_TABLES)
    tiles = _fill_tiles(sketch, d[K.TILE], rng, hw)
    if tiles is None:
        return None
    itemsize = {s.op.name: s.tensor.dtype.itemsize for s in task.dag.stages}
    for idx, h in sketch.holes.items():
        if isinstance(h, CoopHole):
            group = {i: g for i, g in sketch.holes.items()
                     if isinstance(g, GPUTileHole) and g.group == h.group}
            threads, _ = _counts(group, tiles)
            src = h.stage.rsplit(".", 1)[0]
            vmax = max(1, 16 // itemsize.get(src, 4))
            v = d[K.VEC].get(h.stage)
            if v not in VECTOR_CHOICES or v > vmax:
                v = int(rng.choice([x for x in VECTOR_CHOICES if x <= vmax]))
            d[K.VEC][h.stage] = v
            tiles[idx] = (threads, v)
    for idx, h in sketch.holes.items():
        if not isinstance(h, (TileHole, CoopHole, FollowHole)):
            raise TypeError(f"GPU sketch {sketch.name!r}: unknown hole {h!r}")
    steps = sketch.with_lengths(tiles)
    try:
        state = State.replay(task.dag, steps)
        _vectorize_fetch(state, steps, d[K.VEC])
        annotate_unroll(state, steps, d[K.UNROLL], rng, GPU_UNROLL_CHOICES)
    except ScheduleError:
        return None
    if not gpu_usage(state).fits(hw) or not _passes_check(task, state):
        return None
    return Candidate(sketch_id, Decisions.from_tables(d), steps, state)


def _vectorize_fetch(state, steps, table) -> None:
    """Vectorize the innermost part of each cooperative fetch whose vector length is > 1."""
    for sid, s in enumerate(state.stages):
        v = table.get(s.name)
        if not v or v < 2 or s.scope is not Scope.SHARED or len(s.iters) < 3:
            continue
        k = len(s.iters) - 1
        if s.iters[k].const_extent and s.iters[k].const_extent > 1:
            apply_step(state, steps, AnnotationStep(sid, k, Annotation.VECTORIZE))


class GPUUsage:
    """Per-block resources of a GPU state, estimated from its stages (largest over kernels)."""

    def __init__(self):
        self.threads = 1          # threads per block (product of threadIdx extents)
        self.vthreads = 1
        self.shared_bytes = 0     # static shared memory of one block
        self.local_bytes = 0      # local (register) buffers of one thread

    def fits(self, hw) -> bool:
        regs = self.local_bytes // 4 + 16  # a few registers for indices and addresses
        return (self.threads <= hw.max_threads_per_block and self.vthreads <= hw.max_vthread
                and self.shared_bytes <= hw.max_shared_bytes
                and regs <= hw.max_registers_per_thread
                and regs * self.threads <= hw.max_registers_per_block)


def _root_of(state, sid) -> int:
    seen = set()
    while state.stages[sid].location is ComputeLocation.AT and sid not in seen:
        seen.add(sid)
        sid = state.stages[sid].attach[0]
    return sid


def gpu_usage(state: State) -> GPUUsage:
    """Threads, vthreads, shared and local bytes of the largest kernel of ``state`` (one kernel per
    root stage with the stages attached to it)."""
    per_root: dict = {}
    for sid, s in enumerate(state.stages):
        if s.is_placeholder or s.location is ComputeLocation.INLINE:
            continue
        u = per_root.setdefault(_root_of(state, sid), GPUUsage())
        axes: dict = {}
        for it in s.iters:
            th = it.annotation.thread
            if th is not None and it.const_extent:
                axes[th] = it.const_extent
        t = math.prod(x for a, x in axes.items() if a.is_thread)
        u.threads = max(u.threads, t)
        u.vthreads = max(u.vthreads, math.prod(x for a, x in axes.items() if a.name == "VTHREAD"))
        if s.location is ComputeLocation.AT and s.region is not None:
            nbytes = math.prod(r[1] for r in s.region) * s.tensor.dtype.itemsize
            if s.scope is Scope.SHARED:
                u.shared_bytes += nbytes
            elif s.scope is Scope.LOCAL:
                u.local_bytes += nbytes
    out = GPUUsage()
    for u in per_root.values():
        out.threads = max(out.threads, u.threads)
        out.vthreads = max(out.vthreads, u.vthreads)
        out.shared_bytes = max(out.shared_bytes, u.shared_bytes)
        out.local_bytes = max(out.local_bytes, u.local_bytes)
    return out


def _passes_check(task, state) -> bool:
    """The GPU validity check of the lowered program."""
    from ..lowering.gpu_passes import GPUScheduleError, check_gpu_program
    from ..lowering.lower import lower_state
    try:
        check_gpu_program(lower_state(state), task.target)
    except (GPUScheduleError, ScheduleError):
        return False
    return True
