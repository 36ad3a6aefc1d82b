"""The CPU sketch rules: the high-level structures of a program (tiling, fusion, caching,
inlining, rfactor), with the tile sizes left as holes for annotation to fill.

A rule looks at one stage of a partial sketch and says SKIP, APPLY (try the later rules too, which
gives alternatives) or APPLY_AND_SKIP_REST; applying returns successor sketches and the stage to
look at next (:func:`tecomp.search.sketch_rule.enumerate_sketches`). The tiling both rule sets use
is :mod:`tecomp.search.tiling`; which rules a target uses, :mod:`tecomp.search.target_search`.
"""
from __future__ import annotations

from ..ir.expr import IterKind, Select
from ..ir.loop import Scope
from ..ir.traverse import walk
from ..lowering.stride_phase import is_zero_insertion
from ..schedule.compute_steps import CacheWriteStep, ComputeAtStep, ComputeInlineStep
from ..schedule.rfactor import RfactorStep
from ..schedule.state import ComputeLocation
from ..schedule.steps import FuseStep, ReorderStep, SplitStep
from . import analysis as an
from .factor_sketch import FactorReduction
from .reduction_lanes import lane_run, lanes_across_reduction, lanes_belong_to_reduction
from .sketch_rule import RuleResult, SketchRule, SkipStage, TileHole
from .sparse_sketch import SPARSE_RULES
from .tiling import follow_tiling, multi_level_tile, phase_split

__all__ = ["CPU_RULES", "AlwaysInline", "InlineZeroInsertion", "LanesAcrossReduction",
           "AddRfactor", "AddCacheWrite", "MultiLevelTiling", "MultiLevelTilingWithFusion",
           "TileTranspose", "SplitForVector", "MAX_VECTOR"]

#: the longest loop annotation vectorizes whole (tecomp.search.annotate.MAX_VECTOR: the sketch
#: rules may not import the annotator, which imports them)
MAX_VECTOR = 64

# ----------------------------------------------------------------------------- rules

class AlwaysInline(SketchRule):
    """A strictly inlineable stage is inlined. A layout change (an NCHW -> NHWC copy,
    :func:`analysis.transposing_stages`) may also stay a pass of its own: inlined, a
    channels-last convolution reads its input across the channel planes, at root it reads each
    pixel's channels contiguously; which is faster depends on the layer."""
    name = "inline"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        if not an.strictly_inlineable(p.state, sid):
            return RuleResult.SKIP
        return RuleResult.APPLY if sid in an.transposing_stages(p.state) \
            else RuleResult.APPLY_AND_SKIP_REST

    def apply(self, p, sid, task):
        p.apply(ComputeInlineStep(sid))
        return [(p, sid - 1)]


class InlineZeroInsertion(SketchRule):
    """A stage that inserts zeros by a stride (``Select(e % s == 0 & ..., x, 0)``: the dilated
    input of a transposed convolution) is inlined into its readers: only there can lowering's
    stride-phase pass (:mod:`tecomp.lowering.stride_phase`) skip the reduction taps that read
    the zeros; at root or computed at a reader, they would be multiplied like real data."""
    name = "inline_zeros"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.location is not ComputeLocation.ROOT or s.op.is_ragged \
                or an.is_output(p.state, sid) or s.op.reduce_axes:
            return RuleResult.SKIP
        return RuleResult.APPLY_AND_SKIP_REST if is_zero_insertion(s.op.body) \
            else RuleResult.SKIP

    def apply(self, p, sid, task):
        p.apply(ComputeInlineStep(sid))
        p.tag("inline_zeros")
        return [(p, sid - 1)]


class LanesAcrossReduction(SketchRule):
    """A reduction over an outer axis of its input (:func:`lanes_across_reduction`):
    split the last spatial loop, its inner part (a vector hole) innermost, below every reduction
    loop, so each vector accumulates a run of contiguous elements row after row. Measured on the
    Zen 4 host: column sums of a 4096 x 1024 matrix ran 13.6 ms with the reduction innermost or
    rfactored along it (lanes a row apart), against torch's 0.77. With enough spatial work for
    the cores the other structures are dropped; otherwise rfactor (parallel partials) stays."""
    name = "rlanes"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or an.needs_multi_level_tiling(p.state, sid) \
                or an.has_data_dependent_loops(p.state, sid):
            return RuleResult.SKIP
        if lanes_across_reduction(p.state, sid) is None:
            return RuleResult.SKIP
        cores = task.hardware.num_cores
        enough = an.spatial_size(p.state, sid) >= 4 * cores * an.VECTOR_POINTS
        return RuleResult.APPLY_AND_SKIP_REST if enough else RuleResult.APPLY

    def apply(self, p, sid, task):
        name = lanes_across_reduction(p.state, sid)
        pos = p.state.iter_index(sid, name)
        ext = p.state.stages[sid].iters[pos].const_extent
        p.apply(SplitStep(sid, pos, (1,), True), lambda i: TileHole(i, ext, 2, vector=True))
        its = p.state.stages[sid].iters
        lane = p.state.iter_index(sid, f"{name}.1")
        order = [k for k, it in enumerate(its) if it.kind is IterKind.SPATIAL and k != lane]
        order += [k for k, it in enumerate(its) if it.kind is IterKind.REDUCE] + [lane]
        p.apply(ReorderStep(sid, tuple(order)))
        p.tag("rlanes")
        return [(p, sid - 1)]


class AddRfactor(SketchRule):
    """A reduction with little spatial parallelism and a long reduction: factor the reduction's
    inner part into a spatial (vectorizable) axis of a partials stage.

    Over several reduction axes (a norm over (i, j), a reduction to a scalar) the innermost axis
    gives the vector lanes, read contiguously; when it is shorter than a vector the axes are
    fused first (Ansor's rule). With too little spatial work for the cores, a second sketch also
    factors the outermost reduction piece into a parallel axis: partials[outer, lane], each
    thread reducing a contiguous block with vector lanes, then two short reductions."""
    name = "rfactor"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or not s.op.reduce_axes or s.relations or an.has_data_dependent_loops(
                p.state, sid) or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        if not any(st.op is s.op for st in p.state.dag.stages):  # only the DAG's own reductions
            return RuleResult.SKIP
        if any(a.const_extent is None for a in s.op.reduce_axes):
            return RuleResult.SKIP
        sp, red = an.spatial_size(p.state, sid), an.reduce_size(p.state, sid)
        cores = task.hardware.num_cores
        if an.needs_multi_level_tiling(p.state, sid):
            # Ansor's rule (too little spatial work for the cores), or lanes that would gather
            # along every spatial axis while the reduction runs along rows
            ok = sp <= red and (sp <= 16 * cores or lanes_belong_to_reduction(p.state, sid))
        else:
            ok = red > cores
        return RuleResult.APPLY if ok else RuleResult.SKIP

    def apply(self, p, sid, task):
        s = p.state.stages[sid]
        cores = task.hardware.num_cores
        parallel = [False]
        if not s.op.is_ragged and an.spatial_size(p.state, sid) < 16 * cores \
                and an.reduce_size(p.state, sid) >= 16 * cores * an.VECTOR_POINTS:
            parallel.append(True)
        out = []
        for par in parallel:
            q = p.copy()
            _factor_reduction(q, sid, par)
            q.tag("rfactor" + ("+par" if par else ""))
            # the partials stage(s) were inserted at sid; the stage itself (now reducing the
            # partials) needs nothing more
            out.append((q, sid))
        return out


def _factor_reduction(p, sid, parallel: bool) -> None:
    """The steps of one :class:`AddRfactor` sketch (see there)."""
    st = p.state.stages[sid]
    n_sp = len(st.op.axes)
    reds = [i for i, it in enumerate(st.iters) if it.kind is IterKind.REDUCE]
    if len(reds) > 1 and st.iters[reds[-1]].const_extent < an.VECTOR_POINTS:
        p.apply(FuseStep(sid, tuple(reds)))
        reds = reds[:1]
    outer = p.state.stages[sid].iters[reds[0]].name
    inner = reds[-1]
    ext = p.state.stages[sid].iters[inner].const_extent
    one_axis = len(reds) == 1
    parts = 3 if parallel and one_axis else 2
    if an.needs_multi_level_tiling(p.state, sid) and not parallel:
        # the partials stage is tiled next, its holes sized by the extents the sketch has now:
        # behind a lane hole (a placeholder 1) every draw tiled a 1-long lane axis and no lane
        # was ever vectorized; a fixed lane run leaves its register tiling to those holes
        p.apply(SplitStep(sid, inner, (lane_run(ext),), True))
    else:
        p.apply(SplitStep(sid, inner, (1,) * (parts - 1), True),
                lambda i: TileHole(i, ext, parts))
    nest_order = [it.name for it in p.state.stages[sid].iters if it.kind is IterKind.REDUCE]
    p.apply(RfactorStep(sid, inner + parts - 1, n_sp))
    # the partials stage (at sid): spatial axes, the lane axis (last), then the reduction loops
    rf = p.state.stages[sid]
    lane = rf.iters[n_sp].name
    if not parallel:
        if not an.needs_multi_level_tiling(p.state, sid):  # (tiling puts the lanes inside)
            _lanes_innermost(p, sid, lane, nest_order)
        return
    if one_axis:
        piece = p.state.iter_index(sid, f"{outer}.0")
    else:  # split the outermost axis here: its outer piece becomes the parallel axis
        pos = p.state.iter_index(sid, outer)
        e = rf.iters[pos].const_extent
        p.apply(SplitStep(sid, pos, (1,), True), lambda i: TileHole(i, e, 2))
        piece = p.state.iter_index(sid, f"{outer}.0")
    p.apply(RfactorStep(sid, piece, n_sp))
    _lanes_innermost(p, sid, lane, nest_order)  # partials[spatial..., outer.f, lane]


def _lanes_innermost(p, sid: int, lane: str, nest_order: list) -> None:
    """Reorder a partials stage: its spatial loops, the reduction loops in the order the
    reduction had them (``nest_order``: rows outside columns, not the partials stage's natural
    order, which puts the factored axis's pieces first), then the lane axis, so the annotation
    can vectorize the lanes (it vectorizes trailing spatial loops only); the lanes read
    contiguous elements of the reduced axis."""
    def rank(name):  # a piece "i.1" of a loop "i" split after the rfactor ranks as "i"
        while name not in nest_order and "." in name:
            name = name.rsplit(".", 1)[0]
        return nest_order.index(name) if name in nest_order else len(nest_order)
    its = p.state.stages[sid].iters
    order = [k for k, it in enumerate(its) if it.kind is IterKind.SPATIAL and it.name != lane]
    order += sorted((k for k, it in enumerate(its) if it.kind is IterKind.REDUCE),
                    key=lambda k: (rank(its[k].name), k))
    order.append(p.state.iter_index(sid, lane))
    p.apply(ReorderStep(sid, tuple(order)))


class AddCacheWrite(SketchRule):
    """A tiled reduction without a fusible consumer accumulates in a local buffer."""
    name = "cache_write"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        if s.scope is not Scope.GLOBAL or not an.needs_multi_level_tiling(p.state, sid):
            return RuleResult.SKIP
        if an.has_data_dependent_loops(p.state, sid):
            return RuleResult.SKIP
        return RuleResult.SKIP if an.fusible_consumer(p.state, sid) is not None else RuleResult.APPLY

    def apply(self, p, sid, task):
        p.apply(CacheWriteStep(sid, Scope.LOCAL))
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
        cached = s.scope is Scope.LOCAL
        return RuleResult.APPLY_AND_SKIP_REST if cached else RuleResult.APPLY

    def apply(self, p, sid, task):
        cid = an.fusible_consumer(p.state, sid)
        out = []
        # a local accumulator may also carry its vector along another axis (NCHW conv: the
        # output channels) when the last one vectorizes badly
        phases = an.phase_axes(p.state, sid)
        inners = [None, *an.inner_axis_alternatives(p.state, sid)]
        alts = [(inner, level, None) for inner in inners for level in (1, 2)]
        # with short rows fused (analysis.row_fusion): computed at the outer tile only
        for inner in inners if not phases else ():
            rows = an.row_fusion(p.state, sid, inner)
            if rows is not None:
                alts.append((inner, 1, rows))
        for inner, level, rows in alts:
            q = p.copy()
            # the same rows fused in the accumulator and its consumer, one tile at the outer
            # level (every row: the accumulator's region is exact)
            covered = {_fuse_rows(q, sid, cid, rows)} if rows is not None else set()
            whole, scale = _split_phases(q, sid, phases)
            axes = [it.name for it in q.state.stages[sid].iters
                    if it.kind is IterKind.SPATIAL and it.name not in whole]
            parts = multi_level_tile(q, sid, inner_last=inner, whole=whole, covered=covered)
            target = follow_tiling(q, cid, parts, axes, level, scale)
            q.apply(ComputeAtStep(sid, cid, q.state.iter_index(cid, target)))
            q.tag(f"fuse{level}" + (f"+{inner}-inner" if inner else "")
                  + ("+rows" if rows is not None else ""))
            out.append((q, sid - 1))
        return out


def _fuse_rows(p, sid: int, cid: int, rows: tuple) -> str:
    """Fuse the loops ``rows`` of the accumulator ``sid`` and the same axes of its elementwise
    consumer ``cid`` (:func:`analysis.row_fusion`); returns the fused loop's name."""
    names = [p.state.stages[sid].iters[k].name for k in rows]
    p.apply(FuseStep(sid, rows))
    c = p.state.stages[cid]
    sp = [it.name for it in c.iters if it.kind is IterKind.SPATIAL]
    mine = [it.name for it in p.state.stages[sid].op.axes]
    p.apply(FuseStep(cid, tuple(p.state.iter_index(cid, sp[mine.index(n)]) for n in names)))
    return "@".join(names)


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


def _split_phases(p, sid: int, phases: list) -> tuple:
    """Split a transposed conv's stride phases off the loops of its local accumulator
    (:func:`tiling.phase_split`); returns the phase loops, which stay whole and outermost in the
    tile, outside every reduction loop, so lowering's stride-phase pass cuts each tap that reads
    an inserted zero, and the register tile holds one phase (without the split the phase varied
    inside the register tile: the pass could only cut taps where that tile was one row wide).
    The consumer keeps plain loops; its tiles span every phase (``follow_tiling``'s scale,
    returned with the phase loops)."""
    if not phases:
        return set(), {}
    p.tag("phase")
    return phase_split(p, sid, phases)


class TileTranspose(SketchRule):
    """A layout change at root (an NCHW -> NHWC copy, or back; :func:`analysis.transpose_axes`)
    is tiled over the axis contiguous in what it writes and the one contiguous in what it
    reads, both inner parts innermost (the written one the vector): each tile reads and writes
    whole cache lines. Untiled, the vector loop gathered one element per cache line across the
    tensor it reads (a channels-last convolution's 3.2 MB result, read back at a stride of 1 KB,
    took longer than the convolution). The lengths are holes; the untiled alternatives stay."""
    name = "tile_transpose"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT:
            return RuleResult.SKIP
        axes = an.transpose_axes(p.state, sid)
        if axes is None or any(it.const_extent is None for it in s.iters):
            return RuleResult.SKIP
        return RuleResult.APPLY

    def apply(self, p, sid, task):
        write, read = an.transpose_axes(p.state, sid)
        for name, vector in ((read, False), (write, True)):
            pos = p.state.iter_index(sid, name)
            ext = p.state.stages[sid].iters[pos].const_extent
            p.apply(SplitStep(sid, pos, (1,), True),
                    lambda i, ext=ext, v=vector: TileHole(i, ext, 2, vector=v))
        tail = [f"{read}.0", f"{write}.0", f"{read}.1", f"{write}.1"]
        names = [it.name for it in p.state.stages[sid].iters if it.name not in tail] + tail
        p.apply(ReorderStep(sid, tuple(p.state.iter_index(sid, nm) for nm in names)))
        p.tag("ttile")
        return [(p, sid - 1)]


class SplitForVector(SketchRule):
    """An untiled stage without reduction (softmax's exp and output, a norm's scaling, a large
    padding) whose innermost loop is longer than a vector: split it, the inner length a hole,
    so that annotation can vectorize the inner part (it vectorizes whole trailing loops of at
    most MAX_VECTOR points only, so a 1024-long row ran scalar). An output takes the split only;
    an intermediate stage keeps the unsplit alternative, which may be inlined or computed at a
    consumer (a split stage stays at root). Not a stage whose producer fuses into it by tiling."""
    name = "vector_split"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or s.op.reduce_axes or s.op.is_ragged or not s.iters:
            return RuleResult.SKIP
        last = s.iters[-1]
        if last.kind is not IterKind.SPATIAL or (last.const_extent or 0) <= MAX_VECTOR:
            return RuleResult.SKIP
        if an.has_data_dependent_loops(p.state, sid) or an.needs_multi_level_tiling(p.state, sid):
            return RuleResult.SKIP
        if any(not p.state.stages[k].is_placeholder and an.needs_multi_level_tiling(p.state, k)
               and an.fusion_target(p.state, k) == sid for k in range(sid)):
            return RuleResult.SKIP
        if an.is_output(p.state, sid):
            return RuleResult.APPLY_AND_SKIP_REST
        # a padding (a branch) is better inlined or computed at its reader than split at root
        return RuleResult.SKIP if any(isinstance(x, Select) for x in walk(s.op.body)) \
            else RuleResult.APPLY

    def apply(self, p, sid, task):
        s = p.state.stages[sid]
        pos, ext = len(s.iters) - 1, s.iters[-1].const_extent
        p.apply(SplitStep(sid, pos, (1,), True), lambda i: TileHole(i, ext, 2))
        p.tag("vsplit")
        return [(p, sid - 1)]


#: The CPU rule list, tried in order for every stage (the sparse rules claim only stages with
#: data-dependent loops, which the dense tiling would order badly).
CPU_RULES = [AlwaysInline(), InlineZeroInsertion(), *SPARSE_RULES, FactorReduction(),
             LanesAcrossReduction(),
             AddRfactor(), AddCacheWrite(), MultiLevelTilingWithFusion(), MultiLevelTiling(),
             TileTranspose(), SplitForVector(), SkipStage()]
