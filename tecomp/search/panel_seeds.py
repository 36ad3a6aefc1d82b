"""Panel seeds: the first programs a CPU search measures for a tiled reduction, laid out the way a
BLAS kernel is, before the evolution and the cost model take over.

A multi-level-tiled stage (matmul, batch matmul, conv) runs near the FMA peak in few
structures: a register tile that fills the vector register file (:mod:`.register_tile`), the
columns split into panels of that tile's width, the row tiles swept inside the loop over panels,
and either

- *panel* (rows at the second tile level, a reduction step of 4): each row tile runs the whole
  reduction over a panel of the operand its lanes load, packed per panel (one per thread, in
  its own cache: :mod:`.layout_rewrite`), and over the next panels of an L2-sized block before
  the next row tile (where the panels do not all fit); or
- *blocked* (rows at the third level, a reduction block of 64): all the row tiles run one block
  of the reduction before the next, so that a block of both operands stays in the caches
  (GotoBLAS's loop order), nothing packed inside the timed kernel.

The random annotation reaches either conjunction rarely: the register draw (40% of samples)
times a shape that fills the registers, times the right pack (a quarter) or none, times the
levels. Intel AVX-512, 2 threads, interleaved: a 1024^3 matmul's panel programs ran 5.2-6.4 ms
(24 of 32 fills of the undecided tables), its blocked ones 8.6-9.4, the 64-trial search 6.5-8.0
and torch 5.6-5.8; A^T.B (1024 x 512 x 512) the other way round, blocked 1.9-2.1 ms, panel 2.3,
the search 1.6-1.8. Measurements in ``docs/search_notes.md``.

:func:`panel_seeds` gives, per sketch with such a stage, both structures with the best-scoring
register shapes (FMAs per operand load, the waste of a non-divisible tile cubed), their other
decisions (parallel loops, unrolling, locations) drawn with a fixed seed and the fill the cost
model ranks first kept, every stage vectorized. The tuner measures them in its first rounds
(``TuningOptions.panel_seeds``) and they join the population of every round after, as a log
carried from another CPU does.
"""
from __future__ import annotations

import math

import numpy as np

from ..schedule.replay_cache import REPLAY_CACHE
from .annotate import materialize_cpu
from .decisions import Decisions, MutationKind
from .layout_rewrite import PANEL_SUFFIX, pack_candidates
from .register_tile import SPATIAL_PARTS, register_shapes, row_candidates
from .sketch_rule import TileHole

__all__ = ["panel_seeds", "seed_shapes", "FILLS", "MAX_SEEDS"]

#: random fills of a seed's undecided tables, of which the cost model keeps one
FILLS = 4
#: the innermost reduction step of a seed, where it divides the reduction
_REDUCE_STEP = 4
#: reduction blocks of a blocked seed, longest first
_BLOCKS = (64, 32, 16)
#: at most this many seeds a task (the tuner measures them in its first rounds, half of each)
MAX_SEEDS = 6
#: the power of the padded vectors' share in a shape's score (see :func:`seed_shapes`)
_VEC_PAD_POWER = 20
#: the bytes of the lane operand's panels a panel seed's row tile sweeps before the next row
#: tile: half of the smallest L2 of the hosts measured (512 KB), so the row tile's operand rows
#: stay in L1 across the panels and the panels in L2
_PANEL_BLOCK_BYTES = 256 * 1024


def _coverage(extent: int, tile: int) -> float:
    return extent / (-(-extent // tile) * tile)


def seed_shapes(lanes: int, registers: int, rows_extent: int, vec_extent: int, n: int) -> list:
    """The ``n`` best ``(rows, nvec)`` register shapes for these extents, one-vector shapes only
    where no wider one fits (a broadcast per FMA: on Zen 1 an 8x1 tile ran a 64-channel conv 20%
    slower than 6x2 with its padded last vector). The score: FMAs per operand load,
    ``rows * nvec / (rows + nvec)``, times the share of real points in the padded rows, cubed,
    and in the padded vectors to the :data:`_VEC_PAD_POWER`: a 4x3 tile of 24 lanes over 512
    columns (3% padding) ran a 512^3 matmul 3% slower than 6x2, and where the padded lanes
    are masked rather than computed (:mod:`tecomp.lowering.pad_guards`) a 9x3 tile of 48 lanes
    over 1024 columns ran 40% slower than 6x4 (AVX-512)."""
    shapes = register_shapes(lanes, registers, rows_extent, vec_extent)
    shapes = [s for s in shapes if s[1] > 1] or shapes
    score = {s: s[0] * s[1] / (s[0] + s[1]) * _coverage(rows_extent, s[0]) ** 3
             * _coverage(vec_extent, s[1] * lanes) ** _VEC_PAD_POWER
             for s in shapes}
    return sorted(shapes, key=lambda s: -score[s])[:n]


def _tiled_groups(sketch) -> list:
    """``[(vector hole index, [spatial hole indices], [reduction hole indices])]`` of the
    sketch's multi-level-tiled stages with one vector hole and no covering hole."""
    groups: dict = {}
    for idx, h in sketch.holes.items():
        if type(h) is TileHole:
            groups.setdefault(sketch.steps[idx].stage_id, []).append((idx, h))
    out = []
    for holes in groups.values():
        spatial = [i for i, h in holes if h.parts == SPATIAL_PARTS]
        vec = [i for i in spatial if sketch.holes[i].vector]
        if len(vec) == 1 and not any(sketch.holes[i].covers for i in spatial):
            out.append((vec[0], spatial, [i for i, h in holes if h.parts == 2]))
    return out


def _axis_of(task, sketch, idx: int) -> str:
    """The root axis the split step ``idx`` of ``sketch`` splits."""
    st = sketch.steps[idx]
    state = REPLAY_CACHE.replay(task.dag, sketch.steps[:idx])
    return state.stages[st.stage_id].iters[st.iter_id].name.split(".")[0]


def _reduce_step(extent: int, blocked: bool) -> int:
    """The innermost reduction step of a seed: :data:`_REDUCE_STEP` (a panel seed), or the
    longest of :data:`_BLOCKS` that divides the reduction at least twice (a blocked one);
    1 where none divides."""
    for d in (_BLOCKS if blocked else (_REDUCE_STEP,)):
        if extent % d == 0 and extent >= 2 * d:
            return d
    return 1


def _rows_hole(holes, vi: int, spatial: list) -> int | None:
    """The spatial hole a seed's register rows run along: the longest other than the vector
    hole among :func:`~.register_tile.row_candidates` (off the batch axes), the innermost of
    equals (an NHWC conv's x before its y); None when every other loop has one iteration."""
    others = [i for i, _ in row_candidates([(i, holes[i]) for i in spatial], vi)]
    return max(others, key=lambda i: (holes[i].extent, spatial.index(i))) if others else None


def _panel_block(n_panels: int, panel_bytes: int) -> int:
    """Panels a panel seed's row tile sweeps: the most that fit :data:`_PANEL_BLOCK_BYTES` and
    divide ``n_panels`` (no tail block), at least 1; 1 where all the panels fit (they stay in the
    caches whatever the order)."""
    if n_panels * panel_bytes <= _PANEL_BLOCK_BYTES:
        return 1
    most = max(1, min(n_panels, _PANEL_BLOCK_BYTES // max(1, panel_bytes)))
    return max(d for d in range(1, most + 1) if n_panels % d == 0)


def _skeleton(sketch, group, shape, lanes, blocked: bool) -> dict | None:
    """The tile lengths of one seed of one tiled stage: the register tile innermost, the vector
    axis's outermost loop over blocks of panels, every other spatial axis outermost but the
    rows, whose row tiles are the second level (a panel seed: each row tile runs the whole
    reduction over a block of panels, :func:`_panel_block`, then the next row tile) or the
    third (a blocked seed: one panel at a time, all the row tiles run one block of the
    reduction before the next block), and the innermost reduction's step
    (:func:`_reduce_step`). On Zen 1 a 1024^3 matmul's panel program ran at 70 GFLOP/s with
    one panel a row tile (A's rows read from L3 once per panel) and at 74 with four."""
    vi, spatial, reduce = group
    holes = sketch.holes
    ri = _rows_hole(holes, vi, spatial)
    if ri is None or holes[vi].extent < lanes:
        return None
    rows, nvec = shape
    width = min(nvec * lanes, holes[vi].extent)
    block = 1 if blocked else _panel_block(
        -(-holes[vi].extent // width), width * 4 * math.prod(holes[i].extent for i in reduce))
    tiles = {vi: (block, 1, width)}
    for i in spatial:
        if i == ri:
            n = -(-holes[i].extent // rows)
            tiles[i] = (1, n, rows) if blocked else (n, 1, rows)
        elif i != vi:
            tiles[i] = (1, 1, 1)
    for i in reduce:
        tiles[i] = (_reduce_step(holes[i].extent, blocked) if i == reduce[-1] else 1,)
    return tiles


def _pack_table(task, state, vec_axes: set, blocked: bool) -> dict:
    """Pack decisions of a seed: build-time constants in the tile layout (all levels), and the
    inputs the lanes load (their own axis is a vector axis), per panel where it is offered, in
    a panel seed, or in a blocked one where unpacked lanes would gather (the axis is not the
    input's last dimension: ``B[j, k]`` of A.B^T); every other input as it is (a pack inside the
    timed kernel is a pass over the input, which a blocked seed's short panels do not repay)."""
    table = {}
    for sid, _rid, dim, axis in pack_candidates(state):
        name = state.stages[sid].name
        gathers = dim != len(state.stages[sid].tensor.shape) - 1
        if name in task.constants or axis in vec_axes and (gathers or not blocked):
            table[name] = SPATIAL_PARTS - 1
            table[name + PANEL_SUFFIX] = 1
        else:
            table[name] = 0
    return table


def panel_seeds(task, sketches, names, model, n_shapes: int, seed: int = 0) -> list:
    """Decisions (naming their sketch) of the panel seeds of ``task``: for each sketch with a
    multi-level-tiled stage, up to ``n_shapes`` register shapes (:func:`seed_shapes`); the
    undecided tables drawn :data:`FILLS` times with an rng seeded by ``seed`` (the same
    programs each time a tuning resumes) and the fill ``model`` scores best kept; at most
    :data:`MAX_SEEDS`. Empty for a task without such a stage or with ``n_shapes`` 0."""
    if n_shapes <= 0:
        return []
    lanes = max(1, task.hardware.vector_bytes // 4)
    rng = np.random.default_rng(seed)
    plans = []  # (sketch index, tiled groups, their shapes, state, vector axes)
    for si, sketch in enumerate(sketches):
        groups = _tiled_groups(sketch)
        if not groups:
            continue
        vec_axes = {_axis_of(task, sketch, g[0]) for g in groups}
        state = REPLAY_CACHE.replay(task.dag, sketch.with_lengths(
            {i: (1,) * (h.parts - 1) for i, h in sketch.holes.items() if type(h) is TileHole}))
        shapes = []
        for vi, spatial, _ in groups:
            ri = _rows_hole(sketch.holes, vi, spatial)
            rows_ext = sketch.holes[ri].extent if ri is not None else 1
            shapes.append(seed_shapes(lanes, task.hardware.vector_registers, rows_ext,
                                      sketch.holes[vi].extent, n_shapes))
        plans.append((si, groups, shapes, state, vec_axes))
    out = []
    # the best shape of every sketch first, panel then blocked, then the second shape...: a
    # task with many sketches (two matmuls in a chain: 9) gets its first shapes within the cap
    for k in range(n_shapes):
        for blocked in (False, True):
            for si, groups, shapes, state, vec_axes in plans:
                if len(out) >= MAX_SEEDS:
                    return out
                tiles = {}
                for g, sh in zip(groups, shapes):
                    if sh:
                        tiles.update(_skeleton(sketches[si], g, sh[min(k, len(sh) - 1)], lanes,
                                               blocked) or {})
                if not tiles:
                    continue
                pack = _pack_table(task, state, vec_axes, blocked)
                best = _best_fill(task, si, sketches[si], Decisions(tile=tiles, pack=pack),
                                  model, rng)
                if best is not None and best.with_sketch(names[si]) not in out:
                    out.append(best.with_sketch(names[si]))
    return out


def _best_fill(task, si, sketch, skeleton: Decisions, model, rng) -> Decisions | None:
    """The skeleton's decisions completed :data:`FILLS` times, every stage vectorizing its
    innermost loop (a tiled stage left to LLVM's vectorizer ran 2.5x slower), ranked by
    ``model``."""
    fills = []
    for _ in range(FILLS):
        c = materialize_cpu(task, si, sketch, skeleton, rng)
        if c is None:
            continue
        vec = {k: 1 for k in c.decisions.table(MutationKind.VEC)}
        c = materialize_cpu(task, si, sketch, c.decisions.with_table(MutationKind.VEC, vec),
                            rng)
        if c is not None and all(c.key != f.key for f in fills):
            fills.append(c)
    if not fills:
        return None
    scores = np.asarray(model.predict(fills), dtype=float)
    return fills[int(np.argmax(np.where(np.isfinite(scores), scores, -math.inf)))].decisions
