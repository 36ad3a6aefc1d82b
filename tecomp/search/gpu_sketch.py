"""GPU sketch rules (target ``cuda``): Ansor's GPU rule list (its sketch generation for GPUs;
docs/ARCHITECTURE.md says how rules plug in) plus rules for the sparse operators.

Unlike Ansor, thread binding is part of the sketch, not of annotation: the positions of the loops
to fuse and bind do not depend on the tile sizes, so the steps can be fixed here and annotation
only fills lengths (:mod:`tecomp.search.gpu_annotate`). The holes that decide GPU extents are
:class:`GPUTileHole` (a TileHole that says which of its parts are vthread / thread levels, so the
annotation keeps threads per block and vthreads within the hardware's limits) and
:class:`CoopHole` (the cooperative fetch of a shared stage: split by the block's thread count,
and by a vector length that annotation decides).

Sketches of a dense tiled stage ("SSSRRSRS": block / vthread / thread / serial / serial spatial
levels, two reduction levels R0 R1 around S3, R2 before S4; a register accumulator via
cache_write "local" or a fused elementwise consumer), come with and without shared-memory
cache reads of its inputs at R0: for small tiles the shared copy can cost more than it saves.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..ir.expr import IterKind, TensorRead
from ..ir.loop import Scope
from ..ir.traverse import walk
from ..schedule.compute_steps import CacheReadStep, CacheWriteStep, ComputeAtStep, ComputeInlineStep
from ..schedule.rfactor import RfactorStep
from ..schedule.state import Annotation, ComputeLocation
from ..schedule.steps import AnnotationStep, FuseStep, ReorderStep, SplitStep
from . import analysis as an
from .factor_sketch import FactorReduction
from .sketch_rule import RuleResult, SketchRule, SkipStage, TileHole
from .tiling import follow_tiling, multi_level_tile

__all__ = ["GPU_RULES", "TILING_GPU", "GPUTileHole", "CoopHole", "HoleRole", "WARP"]

TILING_GPU = "SSSRRSRS"
#: threads of a warp (cross-thread reductions split by it; thread tiles prefer its multiples)
WARP = 32


class HoleRole(enum.Enum):
    """What the loop of one inner length of a :class:`GPUTileHole` is bound to."""
    VTHREAD = "vthread"   # a virtual thread (counted against ``max_vthread``)
    THREAD = "thread"     # threadIdx (counted against ``max_threads_per_block``)
    SERIAL = "serial"     # a loop each thread runs


_THREAD = (HoleRole.THREAD,)
#: roles of the inner parts of a spatial split under TILING_GPU (the outermost part is the block)
_SPATIAL_ROLES = (HoleRole.VTHREAD, HoleRole.THREAD, HoleRole.SERIAL, HoleRole.SERIAL)


@dataclass(frozen=True)
class GPUTileHole(TileHole):
    """A TileHole whose inner parts have GPU roles (``roles[k]``, a :class:`HoleRole`, for inner
    length ``k``); holes of one ``group`` (a tiled stage) multiply into one block's thread and
    vthread counts."""
    roles: tuple = ()
    group: str = ""


@dataclass(frozen=True)
class CoopHole:
    """The split of a shared stage's fused loop into (rest, threads, vector): the thread count is
    the product of the thread-level lengths of ``group``; the vector length is the decision
    ``vec[stage]``."""
    step: int
    group: str
    stage: str


def _gpu_multi_level_tile(p, sid, group):
    """multi_level_tile with GPU roles on the holes."""
    parts = multi_level_tile(p, sid, TILING_GPU)
    for src, names, kind in parts.values():
        if src is None:
            continue
        h = p.sketch.holes[src]
        roles = _SPATIAL_ROLES if kind is IterKind.SPATIAL else (HoleRole.SERIAL,) * (h.parts - 1)
        p.sketch.holes[src] = GPUTileHole(h.step, h.extent, h.parts, roles, group)
    return parts


def _bind_levels(p, cid, levels):
    """Fuse the consumer's loops of each level (names ``x.<level>``) and bind the fused loop:
    ``levels`` is [(level suffix, Annotation), ...], outermost first, each level contiguous."""
    for suffix, ann in levels:
        its = p.state.stages[cid].iters
        pos = [k for k, it in enumerate(its) if it.name.endswith(f".{suffix}")]
        if not pos:
            continue
        if len(pos) > 1:
            p.apply(FuseStep(cid, tuple(pos)))
        p.apply(AnnotationStep(cid, pos[0], ann))


def _direct_inputs(state, sid):
    """Stage indices of the tensors the stage's op reads directly (placeholders or root stages),
    in order of first read."""
    by_tensor = {id(s.tensor): n for n, s in enumerate(state.stages)}
    out = []
    for x in walk(state.stages[sid].op.body):
        if isinstance(x, TensorRead):
            n = by_tensor.get(id(x.tensor))
            if n is not None and n not in out and state.stages[n].location is ComputeLocation.ROOT:
                out.append(n)
    return out


def _add_shared_reads(p, sid, group, threads_axis=Annotation.THREAD_X):
    """Cache every direct input of tiled stage ``sid`` into "shared", computed at the last R0 loop
    of ``sid``, fetched cooperatively. Returns the new index of the tiled stage."""
    for src in sorted(_direct_inputs(p.state, sid), reverse=True):  # inserts keep lower ids
        p.apply(CacheReadStep(src, Scope.SHARED, (sid,)))
        sh, sid = src + 1, sid + 1
        its = p.state.stages[sid].iters
        r0 = [k for k, it in enumerate(its) if it.kind is IterKind.REDUCE and it.name.endswith(".0")]
        at = r0[-1] if r0 else next(k for k, it in enumerate(its) if it.kind is IterKind.REDUCE)
        p.apply(ComputeAtStep(sh, sid, at))
        n = len(p.state.stages[sh].iters)
        if n > 1:
            p.apply(FuseStep(sh, tuple(range(n))))
        name = p.state.stages[sh].name
        p.apply(SplitStep(sh, 0, (1, 1), True), lambda i, name=name: CoopHole(i, group, name))
        p.apply(AnnotationStep(sh, 1, threads_axis))
    return sid


def _tile_for_gpu(p, sid, cid, shared):
    """SSSRRSRS tiling of ``sid``, consumer ``cid`` following its block/vthread/thread levels,
    ``sid`` computed at the consumer's thread level, the three levels bound; with ``shared``,
    the inputs cached in shared memory at R0."""
    group = p.state.stages[sid].name
    axes = [it.name for it in p.state.stages[sid].iters if it.kind is IterKind.SPATIAL]
    parts = _gpu_multi_level_tile(p, sid, group)
    target = follow_tiling(p, cid, parts, axes, 3)
    p.apply(ComputeAtStep(sid, cid, p.state.iter_index(cid, target)))
    _bind_levels(p, cid, [("0", Annotation.BLOCK_X), ("1", Annotation.VTHREAD),
                          ("2", Annotation.THREAD_X)])
    if shared:
        sid = _add_shared_reads(p, sid, group)
    p.tag("tile" + ("+shared" if shared else ""))
    return sid


# ----------------------------------------------------------------------------- dense rules

def _data_dependent(state, sid):
    s = state.stages[sid]
    return s.op.is_ragged or an.has_data_dependent_loops(state, sid)


def _gpu_inlineable(state, sid):
    """Elementwise, not an output, rectangular: on a GPU every such stage is inlined (Ansor drops
    the CPU's strictness test there: recomputing is cheaper than a round trip to global memory)."""
    s = state.stages[sid]
    return (not s.is_placeholder and s.op.reduce_axes == () and not s.op.is_ragged
            and not an.is_output(state, sid) and s.location is ComputeLocation.ROOT
            and s.scope is Scope.GLOBAL and state.readers(sid))


class GPUInline(SketchRule):
    name = "inline"

    def meet(self, p, sid, task):
        return RuleResult.APPLY_AND_SKIP_REST if _gpu_inlineable(p.state, sid) \
            else RuleResult.SKIP

    def apply(self, p, sid, task):
        p.apply(ComputeInlineStep(sid))
        return [(p, sid - 1)]


class GPUCrossThreadReduction(SketchRule):
    """A reduction whose reduction is long and spatial extent small (softmax's max and sum, a
    matrix-vector product): the reduction's inner part runs over the threads of a block
    (rfactor into a shared buffer, one block per output element, the final sum over the partials
    guarded to one thread by the GPU passes). Kept beside the plain sketch (Ansor's kApply)."""
    name = "cross_thread"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or not s.op.reduce_axes or not s.op.axes or s.relations \
                or _data_dependent(p.state, sid) or s.location is not ComputeLocation.ROOT \
                or s.scope is not Scope.GLOBAL \
                or len(s.op.reduce_axes) != 1 or not any(st.op is s.op for st in p.state.dag.stages):
            return RuleResult.SKIP
        sp, red = an.spatial_size(p.state, sid), an.reduce_size(p.state, sid)
        hw = task.hardware
        if an.needs_multi_level_tiling(p.state, sid):
            ok = sp <= hw.max_threads_per_block and sp < red
        else:
            ok = red > hw.warp_size
        return RuleResult.APPLY if ok else RuleResult.SKIP

    def apply(self, p, sid, task):
        s = p.state.stages[sid]
        r = next(i for i, it in enumerate(s.iters) if it.kind is IterKind.REDUCE)
        ext = s.iters[r].const_extent
        p.apply(SplitStep(sid, r, (1,), True),
                lambda i: GPUTileHole(i, ext, 2, _THREAD, s.name + ".rf"))
        n_sp = len(s.op.axes)
        p.apply(RfactorStep(sid, r + 1, n_sp))      # partials X.rf at sid, X at sid + 1
        p.apply(CacheWriteStep(sid, Scope.SHARED))       # X.rf.shared at sid, copy X.rf at sid + 1
        p.apply(ComputeInlineStep(sid + 1))
        rf, out = sid, sid + 2
        if n_sp > 1:
            p.apply(FuseStep(out, tuple(range(n_sp))))
        if n_sp:
            p.apply(AnnotationStep(out, 0, Annotation.BLOCK_X))
            p.apply(ComputeAtStep(rf, out, 0))
        # X.rf.shared loops: the output's axes (extent 1 at the block), the factor axis, the rest
        # of the reduction; the factor axis goes to the threads
        p.apply(AnnotationStep(rf, n_sp, Annotation.THREAD_X))
        p.tag("cross_thread")
        return [(p, rf - 1)]


class GPUTiling(SketchRule):
    """A stage with data reuse (matmul, conv): register accumulator (cache_write "local", or the
    fused elementwise consumer), SSSRRSRS tiling, binding, with and without shared memory."""
    name = "tile"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or s.scope is not Scope.GLOBAL or _data_dependent(p.state, sid) \
                or not an.needs_multi_level_tiling(p.state, sid):
            return RuleResult.SKIP
        return RuleResult.APPLY_AND_SKIP_REST

    def apply(self, p, sid, task):
        out = []
        # the shared-memory variant caches the inputs at a reduction loop: only for a reduction
        shared_too = bool(p.state.stages[sid].op.reduce_axes)
        for shared in (True, False) if shared_too else (False,):
            q = p.copy()
            cid = an.fusible_consumer(q.state, sid)
            # an output is written whole to global memory: never computed inside its consumer
            if cid is None or q.state.stages[cid].relations or an.is_output(q.state, sid):
                q.apply(CacheWriteStep(sid, Scope.LOCAL))  # the cache at sid, its copy at sid + 1
                cid = sid + 1
            new = _tile_for_gpu(q, sid, cid, shared)
            out.append((q, new - 1))  # shared stages went below it; they are attached (skipped)
        return out


class GPUSimpleBind(SketchRule):
    """Any other root stage (elementwise outputs, plain reductions): its spatial loops fused and
    split over blocks x threads; reductions run serially in each thread."""
    name = "bind"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        # a reduction whose bounds depend on the output index (a cumsum) runs serially per
        # thread as any other; only a ragged output domain cannot be fused and split
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or s.op.is_ragged or s.scope is not Scope.GLOBAL or not s.op.axes \
                or any(a.const_extent is None for a in s.op.axes):
            return RuleResult.SKIP
        if _fusion_target(p.state, sid):
            return RuleResult.SKIP  # the tiled producer binds it
        return RuleResult.APPLY_AND_SKIP_REST

    def apply(self, p, sid, task):
        _bind_flat(p, sid, len(p.state.stages[sid].op.axes))
        p.tag("bind")
        return [(p, sid - 1)]


def _fusion_target(state, sid):
    """Whether a producer that GPUTiling will tile fuses into this stage."""
    for k in range(sid):
        s = state.stages[k]
        if not s.is_placeholder and s.location is ComputeLocation.ROOT and not s.relations \
                and not _data_dependent(state, k) and an.needs_multi_level_tiling(state, k) \
                and not an.is_output(state, k) and an.fusible_consumer(state, k) == sid:
            return True
    return False


def _bind_flat(p, sid, n_sp):
    """Fuse the first ``n_sp`` (spatial, constant) loops, split by a thread count, bind."""
    if n_sp > 1:
        p.apply(FuseStep(sid, tuple(range(n_sp))))
    it = p.state.stages[sid].iters[0]
    ext = it.const_extent
    name = p.state.stages[sid].name
    p.apply(SplitStep(sid, 0, (1,), True),
            lambda i: GPUTileHole(i, ext, 2, _THREAD, name))
    p.apply(AnnotationStep(sid, 0, Annotation.BLOCK_X))
    p.apply(AnnotationStep(sid, 1, Annotation.THREAD_X))


# ----------------------------------------------------------------------------- sparse rules

def _row_axes(state, sid):
    """(row axes: the spatial axes the data-dependent extents depend on, the block factor ``c``
    when they do through ``axis // c`` (BSR block rows), column axes)."""
    from ..ir.expr import BinOp, BinOpKind, Const, Var
    from ..ir.traverse import free_vars
    s = state.stages[sid]
    dyn = [a for a in s.root_axes if a.const_extent is None]
    used = {id(v) for a in dyn for e in (a.begin, a.end) for v in free_vars(e)}
    rows = [a for a in s.op.axes if id(a) in used and a.const_extent is not None]
    cols = [a for a in s.op.axes if id(a) not in used and a.const_extent is not None]
    factor = None
    for a in dyn:
        for e in (a.begin, a.end):
            for x in walk(e):
                if isinstance(x, BinOp) and x.op is BinOpKind.FLOORDIV and isinstance(x.b, Const) \
                        and isinstance(x.a, Var) and rows and x.a is rows[-1]:
                    factor = int(x.b.value)
    return rows, factor, cols


class GPUSparseRows(SketchRule):
    """Stages with data-dependent reduction loops (CSR / BSR SpMM): rows over blocks, the dense
    columns over threads, the row's nonzeros serially per thread into a register accumulator.

    Sketches: one row per block ("row_block"); several rows per block, one per thread row, like
    one per warp ("row_warp"); for BSR, the block's rows inside one thread's tile ("bsr_tile")."""
    name = "sparse_rows"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or s.op.is_ragged or not an.has_data_dependent_loops(p.state, sid):
            return RuleResult.SKIP
        rows, _, cols = _row_axes(p.state, sid)
        ok = len(rows) == 1 and len(cols) >= 1 and len(rows) + len(cols) == len(s.op.axes)
        return RuleResult.APPLY_AND_SKIP_REST if ok else RuleResult.SKIP

    def apply(self, p, sid, task):
        rows, factor, cols = _row_axes(p.state, sid)
        out = []
        for kind in ("row_block", "row_warp") + (("bsr_tile",) if factor else ()):
            q = p.copy()
            q.apply(CacheWriteStep(sid, Scope.LOCAL))  # accumulate in a register
            c = sid + 1
            name = q.state.stages[c].name
            its = q.state.stages[c].iters
            ri = next(k for k, it in enumerate(its) if it.name == rows[0].name)
            cpos = [k for k, it in enumerate(its) if it.name in {a.name for a in cols}]
            # columns fused, split over threads
            if len(cpos) > 1:
                q.apply(ReorderStep(c, tuple([ri] + cpos)))
                q.apply(FuseStep(c, tuple(range(1, 1 + len(cpos)))))
            elif ri != 0:
                q.apply(ReorderStep(c, (ri, cpos[0])))
            cext = q.state.stages[c].iters[1].const_extent
            q.apply(SplitStep(c, 1, (1,), True),
                    lambda i: GPUTileHole(i, cext, 2, _THREAD, name))
            rext = rows[0].const_extent
            if kind == "row_block":      # r | c.1 (tx) | c.0
                q.apply(ReorderStep(c, (0, 2, 1)))
                binds = [(0, Annotation.BLOCK_X), (1, Annotation.THREAD_X)]
            elif kind == "row_warp":     # r.0 (bx) | r.1 (ty) | c.1 (tx) | c.0
                q.apply(SplitStep(c, 0, (1,), True),
                        lambda i: GPUTileHole(i, rext, 2, _THREAD, name))
                q.apply(ReorderStep(c, (0, 1, 3, 2)))
                binds = [(0, Annotation.BLOCK_X), (1, Annotation.THREAD_Y),
                         (2, Annotation.THREAD_X)]
            else:                        # r.0 (bx) | c.1 (tx) | c.0 | r.1 (the BSR block's rows)
                q.apply(SplitStep(c, 0, (factor,), True))
                q.apply(ReorderStep(c, (0, 3, 2, 1)))
                binds = [(0, Annotation.BLOCK_X), (1, Annotation.THREAD_X)]
            for pos, ann in binds:
                q.apply(AnnotationStep(c, pos, ann))
            q.apply(ComputeAtStep(sid, c, len(q.state.stages[c].iters) - 1))
            q.tag(kind)
            out.append((q, sid - 1))
        return out


class GPUSparseNonzeros(SketchRule):
    """A stage with a data-dependent *output* domain (SDDMM: one value per nonzero): rows over
    blocks, each row's nonzeros over the threads (a constant split of the data-dependent loop,
    the tail guarded), the dense reduction serially per thread."""
    name = "sparse_nnz"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or not s.op.is_ragged:
            return RuleResult.SKIP
        its = s.iters
        dyn = [k for k, it in enumerate(its) if it.const_extent is None]
        ok = (len(dyn) == 1 and its[dyn[0]].kind is IterKind.SPATIAL and dyn[0] >= 1
              and all(it.const_extent is not None for it in its[:dyn[0]])
              and its[0].kind is IterKind.SPATIAL)
        return RuleResult.APPLY_AND_SKIP_REST if ok else RuleResult.SKIP

    def apply(self, p, sid, task):
        s = p.state.stages[sid]
        d = next(k for k, it in enumerate(s.iters) if it.const_extent is None)
        if d > 1:
            p.apply(FuseStep(sid, tuple(range(d))))
            d = 1
        # a nominal extent: the hole's factorizations are the thread counts up to a block's limit
        limit = task.hardware.max_threads_per_block
        p.apply(SplitStep(sid, d, (1,), True),
                lambda i: GPUTileHole(i, limit, 2, _THREAD, s.name))
        n = len(p.state.stages[sid].iters)
        p.apply(ReorderStep(sid, (0, 2, 1) + tuple(range(3, n))))
        p.apply(AnnotationStep(sid, 0, Annotation.BLOCK_X))
        p.apply(AnnotationStep(sid, 1, Annotation.THREAD_X))
        p.tag("nnz_threads")
        return [(p, sid - 1)]


#: The GPU rule list, tried in order for every stage (stages from the output back to the inputs).
GPU_RULES = [GPUInline(), GPUSparseNonzeros(), GPUSparseRows(), FactorReduction(),
             GPUCrossThreadReduction(),
             GPUTiling(), GPUSimpleBind(), SkipStage()]
