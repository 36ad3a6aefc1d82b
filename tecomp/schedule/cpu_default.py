"""The CPU schedule a DAG gets untuned: ``tc.build(dag)`` without a schedule, and every fused group
of a model whose tuning log has no record for it.

Not tuned, but not naive either (every stage at root in natural order left a 128x768x768 matmul
at 1.6 s; this default runs it in ~30-40 ms, a 64-channel 56x56 3x3 conv in ~75 ms instead of
~550 ms on the 2-core reference machine):

- an inlineable stage (bias, activations, index maps) is inlined into its readers when that
  computes it no more often than before: a copy or index map always; else only when every reader
  reads each element about once (elementwise readers, a row reduction, not a product) and it has
  one reader or calls no math function (a softmax's ``exp`` read by both the sum and the division
  stays a stage: inlined, a 1024-row softmax ran 1.5x slower). Zero padding is materialized once
  (a guarded read in the inner loop of a convolution costs more than the copy);
- a convolution or matrix product of ``tc.ops`` is tiled over its output (4 rows / channels x 32
  columns), with the reduction moved outside a register tile whose columns are vectorized, and
  the elementwise epilogue is the tile's consumer;
- any other reduction (one written in the DSL) gets the reference schedule's loop order, its
  reductions just outside the innermost spatial loop so that the inner loop walks a row (a DSL
  matmul 512^3: 330 ms in natural order, 11 ms so);
- every root stage runs its outer spatial loops on the thread pool.
"""
from __future__ import annotations

from ..ir.expr import TensorRead, UnOp
from ..ir.tensor import MAX_EXPR_DEPTH, expr_depth
from ..ir.traverse import walk
from .cpu_reference import reorder_and_parallelize
from .schedule import Schedule
from .state import ScheduleError

__all__ = ["default_cpu_schedule"]

_MIN_PARALLEL = 4     # fuse outer loops until this many parallel iterations
_TILE_COLS = 16       # vectorized columns of a register tile: 2 AVX2 vectors x 4 rows = 8 of
#                       the 16 vector registers, the rest for the operands
_TILE_ROWS = 4
_TILED_TAGS = ("matmul", "batch_matmul", "conv2d_nchw", "conv2d_nhwc")


def _parallel_outer(s: Schedule, st) -> None:
    h = s[st.tensor]
    axes = h.axes
    if not axes or st.op.is_ragged:
        return
    extents = [a.const_extent for a in st.op.axes]
    take, total = 0, 1
    # leave the innermost axis alone so that it stays a contiguous (vectorizable) loop
    while take < len(axes) - 1 and total < _MIN_PARALLEL:
        total *= extents[take] or 1
        take += 1
    if take and total > 1:
        h.parallel(h.fuse(*axes[:take]) if take > 1 else axes[0])


def _factor(extent: int, cap: int, vector: int = 8) -> int:
    """A tile length that divides ``extent`` (a guarded tail kept the inner loop from
    vectorizing: a 56-wide 1x1 conv ran 10x slower with tiles of 16): the whole extent when it is
    at most ``cap``, else the largest divisor up to ``cap``, multiples of ``vector`` first."""
    if extent <= cap:
        return extent
    divs = [d for d in range(1, cap + 1) if extent % d == 0]
    return max(divs, key=lambda d: (d % vector == 0, d))


def _tile(s: Schedule, anchor, out) -> None:
    """Register-tile ``anchor`` (a reduction) inside the loops of ``out`` (its elementwise
    consumer, or a cache stage of it)."""
    T, O = anchor, out
    axes, shape = s[O].axes, O.shape
    if len(axes) < 2:
        return
    # the tile's rows: output channels for NCHW (the weights vary along them), else the
    # second-to-last axis
    r = 1 if len(axes) == 4 and T.op.tag.startswith("conv2d_nchw") else len(axes) - 2
    rows, cols = _factor(shape[r], _TILE_ROWS), _TILE_COLS
    if rows < _TILE_ROWS and _factor(shape[r], 2 * _TILE_ROWS) > _TILE_ROWS:
        # an NHWC row of 7 or 14 (ResNet's last stages) has no divisor 4: a 1-row tile ran
        # 15x slower than NCHW's; 7 rows of one vector of columns keep 7 accumulators
        rows, cols = _factor(shape[r], 2 * _TILE_ROWS), _TILE_COLS // 2
    jo, ji = s[O].split(axes[-1], factor=_factor(shape[-1], cols))
    io, ii = s[O].split(axes[r], factor=rows)
    rest = [a for k, a in enumerate(axes[:-1]) if k != r]
    if T.op.tag.startswith("conv2d"):
        s[O].reorder(*rest[:r], io, *rest[r:], jo, ii, ji)
        at, par = jo, list(rest[:r]) + [io]
    else:  # a product: column panels outermost, so a panel of the weight stays in cache
        s[O].reorder(*rest, jo, io, ii, ji)  # while every row tile passes over it
        at, par = io, list(rest) + [jo]
    s[T].compute_at(s[O], at)
    ta, tr = s[T].axes, s[T].reduce_axes
    rows = len(ta) - len(axes) + r  # the tile's row axis among the anchor's loops
    s[T].reorder(*[a for k, a in enumerate(ta[:-1]) if k != rows], *tr, ta[rows], ta[-1])
    s[T].unroll(ta[rows])
    s[T].vectorize(ta[-1])
    s[O].vectorize(ji)
    s[O].parallel(s[O].fuse(*par) if len(par) > 1 else par[0])


def _epilogue(anchor, out, inlined: set) -> bool:
    """Whether every stage after ``anchor`` is an inlined elementwise stage up to ``out`` (a
    chain, or a diamond such as GELU's), so that ``out`` reads the anchor at its own index
    and can take the anchor's tile loops."""
    after, stack = {}, [anchor]
    while stack:
        for c in stack.pop().consumers:
            if id(c) not in after:
                after[id(c)] = c
                stack.append(c)
    if id(_stage_of(out, after)) not in after:
        return False
    inside = set(after) | {id(anchor)}
    for st in after.values():
        if st.tensor is not out and id(st) not in inlined:
            return False
        if any(id(p) in inside and not st.elementwise_matched(p.tensor) for p in st.producers):
            return False
    return True


def _stage_of(tensor, stages: dict):
    """The stage of ``tensor`` among ``stages`` (id -> stage), or None."""
    return next((st for st in stages.values() if st.tensor is tensor), None)


def default_cpu_schedule(dag) -> Schedule:
    """The untuned CPU schedule of ``dag`` (see the module docstring).

    Parameters
    ----------
    dag : ComputeDAG

    Returns
    -------
    Schedule
    """
    s, inlined = Schedule(dag), _inlined(dag)
    for st in dag.compute_stages:
        if id(st) in inlined:
            s[st.tensor].compute_inline()
    anchors = [st for st in dag.compute_stages if st.is_reduce and st.op.tag in _TILED_TAGS
               and not st.op.is_ragged]
    tiled = set()
    if len(anchors) == 1 and len(dag.outputs) == 1:
        a, out = anchors[0], dag.outputs[0]
        if a.tensor is out:
            cache = s.cache_write(out, "local")
            _tile(s, cache, out)
            tiled = {id(a.tensor)}
        elif _epilogue(a, out, inlined):
            _tile(s, a.tensor, out)
            tiled = {id(a.tensor), id(out)}
    for st in dag.compute_stages:
        if id(st) in inlined or id(st.tensor) in tiled:
            continue
        if st.is_reduce and not st.op.is_ragged:
            trial = Schedule(dag, s.steps)
            try:
                reorder_and_parallelize(trial, st.tensor)
            except ScheduleError:
                _parallel_outer(s, st)
                continue
            s = trial
        else:
            _parallel_outer(s, st)
    return s


def _inlined(dag) -> set:
    """The ids of the stages the default inlines (see the module docstring), as long as no
    expression grows past :data:`~tecomp.ir.tensor.MAX_EXPR_DEPTH`: a chain of deep stages keeps
    the deepest producers as stages, so that the default always compiles."""
    inlined, deep = set(), {}
    for st in dag.compute_stages:  # producers first
        ins = sorted((p for p in st.producers if id(p) in inlined), key=lambda p: deep[id(p)])
        own = expr_depth(st.op.body)
        while ins and own + deep[id(ins[-1])] > MAX_EXPR_DEPTH:
            inlined.discard(id(ins.pop()))
        deep[id(st)] = own + (deep[id(ins[-1])] if ins else 0)
        if _inlineable(st):
            inlined.add(id(st))
    return inlined


def _inlineable(st) -> bool:
    """A copy or index map (the body is one read) always; else a stage whose every reader reads
    each of its elements about once (elementwise readers, a row reduction: inlined into a matmul
    read ``N`` times, or a Winograd weight transform into its product, it would be computed as
    often, and a transform of a constant weight would no longer run once at build time) and
    that is computed no more often than before (one reader, or no math function)."""
    if not st.inlineable or st.op.tag == "pad":
        return False
    if isinstance(st.op.body, TensorRead):
        return True
    mine = _points(st)
    if mine is None or any(_points(c) is None or _points(c) > mine for c in st.consumers):
        return False
    return len(st.consumers) <= 1 or not any(
        isinstance(e, UnOp) and e.op.is_math for e in walk(st.op.body))


def _points(st):
    """The iterations of ``st``'s loop nest (spatial and reduction), None if not constant."""
    n = 1
    for a in st.op.axes + st.op.reduce_axes:
        e = a.const_extent
        if e is None:
            return None
        n *= e
    return n
