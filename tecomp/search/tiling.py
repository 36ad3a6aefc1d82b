"""Multi-level tiling of a stage in a partial sketch, shared by the CPU and GPU sketch rules: split
every loop into the levels of a structure string (``"SSRSRS"`` on the CPU, ``"SSSRRSRS"`` on the
GPU) with the lengths left as holes, and tile a consumer like its producer."""
from __future__ import annotations

import dataclasses

from ..ir.expr import IterKind
from ..schedule.steps import ReorderStep, SplitStep
from . import analysis as an
from .sketch_rule import FollowHole, PartialSketch, TileHole

__all__ = ["TILING_CPU", "multi_level_tile", "follow_tiling", "phase_split"]

TILING_CPU = "SSRSRS"


def phase_split(p: PartialSketch, sid: int, axes: list) -> tuple:
    """Split each ``(loop name, stride)`` of ``axes`` (:func:`analysis.phase_axes`) by its
    stride: ``y`` becomes ``y.0`` (the rows of one phase) and ``y.1`` (the phase). Returns the
    phase loops' names, which :func:`multi_level_tile` keeps whole at the outermost level, and
    ``{row loop: stride}``, the ``scale`` with which a consumer's tiles follow (every phase)."""
    whole, scale = set(), {}
    for name, stride in axes:
        p.apply(SplitStep(sid, p.state.iter_index(sid, name), (stride,), True))
        whole.add(f"{name}.1")
        scale[f"{name}.0"] = stride
    return whole, scale


def multi_level_tile(p: PartialSketch, sid: int, structure: str = TILING_CPU,
                     inner_last: str | None = None, whole: set = frozenset(),
                     covered: set = frozenset()) -> dict:
    """Split every constant-extent loop of the stage into the levels of ``structure`` (S: spatial,
    R: reduction) and order the parts level by level. Returns {root loop name: [split step
    index or None, part names]}. ``inner_last`` names a spatial axis whose innermost part goes
    last in the innermost level (the vector axis), instead of the stage's last axis.

    A tiny reduction (:func:`analysis.small_reduction`: a depthwise conv's KHxKW window) is not
    split: its loops sit whole at the last R level, just outside the innermost (register) tile,
    which is what a depthwise kernel wants; splitting 3 into 2 levels only adds holes.

    The loops named in ``whole`` (stride phases, :func:`phase_split`) are not split either:
    they sit in the outermost level. The holes of the loops named in ``covered`` are
    :class:`TileHole` ``covers``: one tile at the outermost level."""
    n_s, n_r = structure.count("S"), structure.count("R")
    stage = p.state.stages[sid]
    small_r = an.small_reduction(p.state, sid)
    batch = an.batch_axes(p.state, sid)
    parts = {}
    for it in list(stage.iters):
        n = n_s if it.kind is IterKind.SPATIAL else 1 if small_r else n_r
        pos = p.state.iter_index(sid, it.name)
        if it.const_extent is None or n == 1 or it.name in whole:
            parts[it.name] = (None, [it.name], it.kind)
            continue
        ext = it.const_extent
        idx = p.apply(SplitStep(sid, pos, (1,) * (n - 1), True),
                      lambda i, ext=ext, n=n, c=it.name in covered, b=it.name in batch:
                      TileHole(i, ext, n, covers=c, batch=b))
        parts[it.name] = (idx, [f"{it.name}.{k}" for k in range(n)], it.kind)
    order, level, this = [], {IterKind.SPATIAL: 0, IterKind.REDUCE: 0}, []
    dynamic = {nm for src, names, _ in parts.values() if src is None for nm in names
               if p.state.stages[sid].iters[p.state.iter_index(sid, nm)].const_extent is None}
    for ch in structure:
        kind = IterKind.SPATIAL if ch == "S" else IterKind.REDUCE
        lv = level[kind]
        level[kind] += 1
        this = []
        for root, (_, names, k) in parts.items():
            at = lv - (n_r - 1) if small_r and k is IterKind.REDUCE else lv  # last R level
            if k is kind and 0 <= at < len(names) and names[at] not in dynamic:
                this.append((root == inner_last and at == len(names) - 1, names[at]))
        order += [nm for _, nm in sorted(this, key=lambda t: t[0])]  # stable: inner_last last
    if structure.endswith("S") and this:
        _mark_vector(p, parts, order[-1])
    # unsplit loops of kinds the structure lacks, then data-dependent loops (sparse rows), which
    # must sit inside every loop their extent depends on
    for _, names, _k in parts.values():
        order += [nm for nm in names if nm not in order and nm not in dynamic]
    order += sorted(dynamic, key=lambda nm: p.state.iter_index(sid, nm))
    p.apply(ReorderStep(sid, tuple(p.state.iter_index(sid, nm) for nm in order)))
    return parts


def _mark_vector(p: PartialSketch, parts: dict, innermost: str) -> None:
    """Mark the hole whose innermost part is the tile's innermost loop (the vector axis)."""
    for src, names, _k in parts.values():
        if src is not None and names[-1] == innermost:
            h = p.sketch.holes[src]
            if type(h) is TileHole:
                p.sketch.holes[src] = dataclasses.replace(h, vector=True)


def follow_tiling(p: PartialSketch, cid: int, parts: dict, producer_axes: list, level: int,
                  scale: dict | None = None) -> str:
    """Split the consumer's spatial loops like the producer's first ``level`` tile levels, order
    them level by level; returns the name of the last loop of level ``level - 1``. ``scale``
    (producer axis -> factor) widens a consumer tile: the producer's axis counts the rows of one
    stride phase (:func:`phase_split`), the consumer's rows hold every phase."""
    consumer = p.state.stages[cid]
    names = [it.name for it in consumer.iters if it.kind is IterKind.SPATIAL]
    groups_names = []
    for cname, pname in zip(names, producer_axes):
        src, pnames, _ = parts[pname]
        pos = p.state.iter_index(cid, cname)
        if src is None:
            groups_names.append([cname])
            continue
        n_inner = len(pnames) - 1
        groups = tuple((k - 1, k) for k in range(1, level)) + ((level - 1, n_inner),)
        widen = (scale or {}).get(pname, 1)
        p.apply(SplitStep(cid, pos, (1,) * len(groups), True),
                lambda i, src=src, groups=groups, w=widen: FollowHole(i, src, groups, w))
        groups_names.append([f"{cname}.{k}" for k in range(len(groups) + 1)])
    order = []
    depth = max(len(g) for g in groups_names)
    for lv in range(depth):
        order += [g[lv] for g in groups_names if lv < len(g)]
    rest = [it.name for it in p.state.stages[cid].iters if it.name not in order]
    p.apply(ReorderStep(cid, tuple(p.state.iter_index(cid, nm) for nm in order + rest)))
    level_loops = [g[min(level - 1, len(g) - 1)] for g in groups_names]
    return level_loops[-1]
