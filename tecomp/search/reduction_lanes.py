"""Vector lanes: where a reduction's lanes belong, across the reduction (a reduction over an
outer axis of its input, :func:`lanes_across_reduction`) or on the reduction itself (every
spatial axis would gather, :func:`lanes_belong_to_reduction`), which the sketch rules ``rlanes``
and ``rfactor`` ask; and how long a run of lanes a long loop is split into (:func:`lane_run`)."""
from __future__ import annotations

from ..ir.expr import IterKind, Reduce, TensorRead, Var
from ..ir.traverse import walk
from ..schedule.inline import expand_inline
from . import analysis as an

__all__ = ["lane_run", "lanes_across_reduction", "lanes_belong_to_reduction"]


def lane_run(extent: int) -> int:
    """The run of lanes a loop of ``extent`` is split into when its inner part is vectorized
    whole: 64, 32 or 16 where one divides it, else 16 (the last run masked), or the whole of a
    shorter loop. A long row computed at its reader and a tiled rfactor's lane axis take it."""
    runs = [f for f in (4 * an.VECTOR_POINTS, 2 * an.VECTOR_POINTS, an.VECTOR_POINTS)
            if extent % f == 0]
    return runs[0] if runs else min(extent, an.VECTOR_POINTS)


def lanes_across_reduction(state, sid: int) -> str | None:
    """The name of the stage's last spatial loop when its vector lanes belong across the
    reduction: a reduction over an outer axis of its input (column sums ``S[j] = sum_k A[k, j]``,
    a mean over a tensor's channels in NCHW) reads contiguously along that spatial axis and with
    a stride along every reduction axis, so lanes along the reduction (the rfactor sketch, or the
    reduction innermost) gather one element per cache line. None where that does not hold: every
    read that varies along the last spatial axis has it alone as its last index, some read does,
    and no read's last index involves a reduction axis."""
    s = state.stages[sid]
    if s.is_placeholder or s.op.is_ragged or not isinstance(s.op.body, Reduce):
        return None
    spatial = [it for it in s.iters if it.kind is IterKind.SPATIAL]
    if not spatial or (spatial[-1].const_extent or 0) < an.VECTOR_POINTS:
        return None
    axis = next((a for a in s.op.axes if a.name == spatial[-1].name), None)
    if axis is None:
        return None
    reduce_ids = {id(a) for a in s.op.reduce_axes}
    reads = [x for x in walk(expand_inline(state, s.op.body)) if isinstance(x, TensorRead)]
    along = False
    for r in reads:
        if not r.indices:
            continue
        if any(isinstance(x, Var) and id(x) in reduce_ids for x in walk(r.indices[-1])):
            return None
        uses = any(x is axis for i in r.indices for x in walk(i))
        if uses and r.indices[-1] is not axis:
            return None
        along |= uses
    return axis.name if along else None


def lanes_belong_to_reduction(state, sid: int) -> bool:
    """Whether a reduction's vector lanes belong on its reduction, not its spatial axes: every
    read that varies along the last spatial axis reads it with a stride (it is not that read's
    last index alone: lanes along it gather), and some read has the innermost reduction axis
    alone as its last index (lanes along it load whole vectors). A bilinear form ``sum_{i,j}
    x[b, i] W[i, j] y[b, j]`` is one: lanes along ``b`` gather from ``x`` and ``y``, which no
    pack of a single operand fixes, while ``j`` runs along the rows of ``W`` and ``y``."""
    s = state.stages[sid]
    if s.is_placeholder or s.op.is_ragged or not isinstance(s.op.body, Reduce) \
            or not s.op.axes or not s.op.reduce_axes:
        return False
    last, red = s.op.axes[-1], s.op.reduce_axes[-1]
    reads = [x for x in walk(s.op.body) if isinstance(x, TensorRead) and x.indices]
    along = [r for r in reads if any(v is last for i in r.indices for v in walk(i))]
    return bool(along) and all(r.indices[-1] is not last for r in along) \
        and any(r.indices[-1] is red for r in reads)
