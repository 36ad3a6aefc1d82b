"""Sketch generation: the high-level structures of a program (tiling, fusion, caching, inlining,
rfactor), with the tile sizes left as holes for annotation to fill.

A rule looks at one stage of a partial sketch and says SKIP, APPLY (try the later rules too, which
gives alternatives) or APPLY_AND_SKIP_REST; applying returns successor sketches and the stage to
look at next. Stages are visited from the output back to the inputs (Ansor's enumeration).
"""
from __future__ import annotations

from ..ir.expr import IterKind
from ..schedule.compute_steps import CacheWriteStep, ComputeAtStep, ComputeInlineStep
from ..schedule.rfactor import RfactorStep
from ..schedule.state import ComputeLocation, ScheduleError, State
from ..schedule.steps import ReorderStep, SplitStep
from . import analysis as an
from .sketch_rule import FollowHole, PartialSketch, RuleResult, Sketch, SketchRule, TileHole

__all__ = ["Sketch", "TileHole", "FollowHole", "RuleResult", "SketchRule", "generate_sketches",
           "CPU_RULES", "TILING_CPU"]

TILING_CPU = "SSRSRS"


# ----------------------------------------------------------------------------- tiling helpers

def multi_level_tile(p: PartialSketch, sid: int, structure: str = TILING_CPU,
                     inner_last: str | None = None) -> dict:
    """Split every constant-extent loop of the stage into the levels of ``structure`` (S: spatial,
    R: reduction) and order the parts level by level. Returns {root loop name: [split step
    index or None, part names]}. ``inner_last`` names a spatial axis whose innermost part goes
    last in the innermost level (the vector axis), instead of the stage's last axis.

    A tiny reduction (:func:`analysis.small_reduction`: a depthwise conv's KHxKW window) is not
    split: its loops sit whole at the last R level, just outside the innermost (register) tile,
    which is what a depthwise kernel wants; splitting 3 into 2 levels only adds holes."""
    n_s, n_r = structure.count("S"), structure.count("R")
    stage = p.state.stages[sid]
    small_r = an.small_reduction(p.state, sid)
    parts = {}
    for it in list(stage.iters):
        n = n_s if it.kind is IterKind.SPATIAL else 1 if small_r else n_r
        pos = p.state.iter_index(sid, it.name)
        if it.const_extent is None or n == 1:
            parts[it.name] = (None, [it.name], it.kind)
            continue
        ext = it.const_extent
        idx = p.apply(SplitStep(sid, pos, (1,) * (n - 1), True),
                      lambda i, ext=ext, n=n: TileHole(i, ext, n))
        parts[it.name] = (idx, [f"{it.name}.{k}" for k in range(n)], it.kind)
    order, level = [], {IterKind.SPATIAL: 0, IterKind.REDUCE: 0}
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
    # unsplit loops of kinds the structure lacks, then data-dependent loops (sparse rows), which
    # must sit inside every loop their extent depends on
    for _, names, _k in parts.values():
        order += [nm for nm in names if nm not in order and nm not in dynamic]
    order += sorted(dynamic, key=lambda nm: p.state.iter_index(sid, nm))
    p.apply(ReorderStep(sid, tuple(p.state.iter_index(sid, nm) for nm in order)))
    return parts


def follow_tiling(p: PartialSketch, cid: int, parts: dict, producer_axes: list, level: int) -> str:
    """Split the consumer's spatial loops like the producer's first ``level`` tile levels, order
    them level by level; returns the name of the last loop of level ``level - 1``."""
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
        p.apply(SplitStep(cid, pos, (1,) * len(groups), True),
                lambda i, src=src, groups=groups: FollowHole(i, src, groups))
        groups_names.append([f"{cname}.{k}" for k in range(len(groups) + 1)])
    order = []
    depth = max(len(g) for g in groups_names)
    for lv in range(depth):
        order += [g[lv] for g in groups_names if lv < len(g)]
    rest = [it.name for it in p.state.stages[cid].iters if it.name not in order]
    p.apply(ReorderStep(cid, tuple(p.state.iter_index(cid, nm) for nm in order + rest)))
    level_loops = [g[min(level - 1, len(g) - 1)] for g in groups_names]
    return level_loops[-1]


# ----------------------------------------------------------------------------- rules

class AlwaysInline(SketchRule):
    name = "inline"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        return RuleResult.APPLY_AND_SKIP_REST if an.strictly_inlineable(p.state, sid) \
            else RuleResult.SKIP

    def apply(self, p, sid, task):
        p.apply(ComputeInlineStep(sid))
        return [(p, sid - 1)]


class AddRfactor(SketchRule):
    """A reduction with little spatial parallelism and a long reduction: factor the reduction's
    inner part into a spatial (vectorizable) axis."""
    name = "rfactor"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or not s.op.reduce_axes or s.relations or an.has_data_dependent_loops(
                p.state, sid) or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        if not any(st.op is s.op for st in p.state.dag.stages):  # only the DAG's own reductions
            return RuleResult.SKIP
        sp, red = an.spatial_size(p.state, sid), an.reduce_size(p.state, sid)
        cores = task.hardware.num_cores
        if an.needs_multi_level_tiling(p.state, sid):
            ok = sp <= red and sp <= 16 * cores
        else:
            ok = red > cores
        return RuleResult.APPLY if ok and len(s.op.reduce_axes) == 1 else RuleResult.SKIP

    def apply(self, p, sid, task):
        s = p.state.stages[sid]
        r = next(i for i, it in enumerate(s.iters) if it.kind is IterKind.REDUCE)
        ext = s.iters[r].const_extent
        p.apply(SplitStep(sid, r, (1,), True), lambda i: TileHole(i, ext, 2))
        p.apply(RfactorStep(sid, r + 1, len(s.op.axes)))
        p.tag("rfactor")
        # the partials stage was inserted at sid; the stage itself (now reducing the partials,
        # at sid + 1) needs nothing more
        return [(p, sid)]


class AddCacheWrite(SketchRule):
    """A tiled reduction without a fusible consumer accumulates in a local buffer."""
    name = "cache_write"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        if s.scope != "global" or not an.needs_multi_level_tiling(p.state, sid):
            return RuleResult.SKIP
        if an.has_data_dependent_loops(p.state, sid):
            return RuleResult.SKIP
        return RuleResult.SKIP if an.fusible_consumer(p.state, sid) is not None else RuleResult.APPLY

    def apply(self, p, sid, task):
        p.apply(CacheWriteStep(sid, "local"))
        p.tag("cache")
        return [(p, sid)]  # the new cache stage sits at sid; its consumer is the old stage


class MultiLevelTilingWithFusion(SketchRule):
    name = "tile+fuse"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or not an.needs_multi_level_tiling(p.state, sid):
            return RuleResult.SKIP
        cid = an.fusible_consumer(p.state, sid)
        if cid is None or p.state.stages[cid].relations:
            return RuleResult.SKIP
        cached = s.scope == "local"
        return RuleResult.APPLY_AND_SKIP_REST if cached else RuleResult.APPLY

    def apply(self, p, sid, task):
        cid = an.fusible_consumer(p.state, sid)
        out = []
        # a local accumulator may also carry its vector along another axis (NCHW conv: the
        # output channels) when the last one vectorizes badly
        for inner in [None, *an.inner_axis_alternatives(p.state, sid)]:
            for level in (1, 2):
                q = p.copy()
                axes = [it.name for it in q.state.stages[sid].iters
                        if it.kind is IterKind.SPATIAL]
                parts = multi_level_tile(q, sid, inner_last=inner)
                target = follow_tiling(q, cid, parts, axes, level)
                q.apply(ComputeAtStep(sid, cid, q.state.iter_index(cid, target)))
                q.tag(f"fuse{level}" + (f"+{inner}-inner" if inner else ""))
                out.append((q, sid - 1))
        return out


class MultiLevelTiling(SketchRule):
    name = "tile"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        return RuleResult.APPLY_AND_SKIP_REST if an.needs_multi_level_tiling(p.state, sid) \
            else RuleResult.SKIP

    def apply(self, p, sid, task):
        multi_level_tile(p, sid)
        p.tag("tile")
        return [(p, sid - 1)]


class SkipStage(SketchRule):
    name = "skip"

    def meet(self, p, sid, task):
        return RuleResult.APPLY

    def apply(self, p, sid, task):
        return [(p, sid - 1)]


from .sparse_sketch import SPARSE_RULES  # noqa: E402  (its rules build on the classes above)

#: The CPU rule list, tried in order for every stage (the sparse rules claim only stages with
#: data-dependent loops, which the dense tiling would order badly).
CPU_RULES = [AlwaysInline(), *SPARSE_RULES, AddRfactor(), AddCacheWrite(),
             MultiLevelTilingWithFusion(), MultiLevelTiling(), SkipStage()]


def generate_sketches(task, rules=None, max_sketches: int = 64) -> list:
    """All sketches of ``task.dag`` under ``rules`` (default: :data:`CPU_RULES`, or
    :data:`~tecomp.search.gpu_sketch.GPU_RULES` for a ``cuda`` target)."""
    if rules is None:
        from ..target import TargetKind
        from .gpu_sketch import GPU_RULES  # imports this module
        rules = GPU_RULES if task.target.kind is TargetKind.CUDA else CPU_RULES
    start = PartialSketch(State(task.dag), Sketch("", []))
    queue = [(start, len(start.state.stages) - 1)]
    done = []
    while queue:
        p, sid = queue.pop(0)
        if sid < 0:
            done.append(p.sketch)
            if len(done) >= max_sketches:
                break
            continue
        for rule in rules:
            res = rule.meet(p, sid, task)
            if res is RuleResult.SKIP:
                continue
            try:
                queue.extend(rule.apply(p.copy(), sid, task))
            except ScheduleError:
                continue  # the rule does not fit this stage after all
            if res is RuleResult.APPLY_AND_SKIP_REST:
                break
    for sk in done:
        sk.name = sk.name or "default"
    return done


