"""Predicates of the sketch rules, computed on the stages of a schedule State (whose ops cache
steps may have rewritten), after Ansor's access analysis."""
from __future__ import annotations

import math

from ..ir.arith import to_linear
from ..ir.expr import BinOp, BinOpKind, Const, IterKind, Reduce, Select, TensorRead, UnOp, Var
from ..ir.loop import Scope
from ..ir.traverse import substitute, walk
from ..lowering.stride_phase import is_zero_insertion, phase_conjuncts
from ..schedule.compute_steps import ComputeAtStep, attach_loop_on
from ..schedule.inline import effective_readers, expand_inline
from ..schedule.state import ComputeLocation, ScheduleError, State
from .transposes import transpose_axes, transposing_stages, writes_across_rows

__all__ = ["is_output", "strictly_inlineable", "needs_multi_level_tiling", "fusible_consumer",
           "fusion_target", "shared_loops", "is_tiled", "spatial_size", "reduce_size", "small_reduction",
           "has_data_dependent_loops", "inner_axis_alternatives", "recomputed_at", "phase_axes",
           "constant_stages", "transposing_stages", "transpose_axes", "row_fusion",
           "fused_rows", "writes_across_rows"]


def is_output(state: State, sid: int) -> bool:
    t = state.stages[sid].tensor
    return any(t is o for o in state.dag.outputs)


def constant_stages(state: State, constants) -> set:
    """Indices of the compute stages whose values depend only on the inputs named in
    ``constants`` (a task's build-time constants): at root, such a stage runs once at build time
    (a Winograd weight transform, a packed weight); computed inside another stage it would run on
    every call, as often as that stage's loops say."""
    names = set(constants or ())
    known, out = set(), set()
    if not names:
        return out
    for sid, s in enumerate(state.stages):
        if s.is_placeholder:
            if s.tensor.name in names:
                known.add(id(s.tensor))
        elif s.op.inputs and all(id(t) in known for t in s.op.inputs):
            known.add(id(s.tensor))
            out.add(sid)
    return out


def _simple_index(e, axes_ids) -> bool:
    """An axis variable plus an optional constant shift."""
    if isinstance(e, Var):
        return id(e) in axes_ids
    if isinstance(e, BinOp) and e.op in (BinOpKind.ADD, BinOpKind.SUB):
        return isinstance(e.b, Const) and isinstance(e.a, Var) and id(e.a) in axes_ids
    return False


def strictly_inlineable(state: State, sid: int) -> bool:
    """Elementwise, no branch, no expensive intrinsic, every read a simple access in axis order:
    inlining it can only remove work."""
    s = state.stages[sid]
    if s.is_placeholder or s.op.is_ragged or is_output(state, sid):
        return False
    body = s.op.body
    if isinstance(body, Reduce):
        return False
    axes_ids = [id(a) for a in s.op.axes]
    for x in walk(body):
        if isinstance(x, Select) or isinstance(x, UnOp) and x.op.is_math:
            return False
        if isinstance(x, TensorRead):
            idx = x.indices
            if not all(_simple_index(i, set(axes_ids)) for i in idx):
                return False
            used = [id(i if isinstance(i, Var) else i.a) for i in idx]
            if used != sorted(used, key=axes_ids.index) or len(set(used)) != len(used):
                return False
    return True


def needs_multi_level_tiling(state: State, sid: int) -> bool:
    """Data reuse: at least two inputs (or one, in a reduction) miss some spatial axis of extent > 1
    in all their indices."""
    s = state.stages[sid]
    if s.is_placeholder or s.op.is_ragged:
        return False
    op = s.op
    axes = [a for a in op.axes if (a.const_extent or 0) > 1]
    reads: dict = {}
    exprs = [op.body] + [b for a in op.reduce_axes for b in (a.begin, a.end)]
    for e in exprs:
        for x in walk(e):
            if isinstance(x, TensorRead):
                reads.setdefault(id(x.tensor), []).append(x)
    count = 0
    for rs in reads.values():
        used = {id(v) for r in rs for i in r.indices for v in walk(i) if isinstance(v, Var)}
        if any(id(a) not in used for a in axes):
            count += 1
    return count >= 2 or (count >= 1 and isinstance(op.body, Reduce))


def fusible_consumer(state: State, sid: int) -> int | None:
    """The single consumer that reads this stage elementwise (same shape, indices exactly its axes),
    when there is one and not both are reductions."""
    readers = effective_readers(state, sid)
    if len(readers) != 1:
        return None
    (cid,) = readers
    s, c = state.stages[sid], state.stages[cid]
    if c.op.is_ragged or c.tensor.shape != s.tensor.shape or c.scope is Scope.SHARED:
        return None
    if isinstance(s.op.body, Reduce) and isinstance(c.op.body, Reduce):
        return None
    # through inlined elementwise stages (a conv's bias, a residual add before the relu): the
    # composed indices are the consumer's own axes exactly when every link is elementwise
    reads = [x for x in walk(expand_inline(state, c.op.body))
             if isinstance(x, TensorRead) and x.tensor is s.tensor]
    if not reads:
        return None
    for r in reads:
        if len(r.indices) != len(c.op.axes) or any(i is not a for i, a in zip(r.indices, c.op.axes)):
            return None
    return cid


def fusion_target(state: State, sid: int) -> int | None:
    """The stage a tiled ``sid`` will be computed at once the elementwise stages between them
    are inlined (the rules visit stages from the output back, so when the output's rule runs,
    a conv's bias and residual add are not inlined yet): its fusible consumer, followed
    through consumers that :func:`strictly_inlineable` will inline."""
    seen, c = set(), fusible_consumer(state, sid)
    while c is not None and c not in seen and strictly_inlineable(state, c) \
            and state.stages[c].location is ComputeLocation.ROOT:
        seen.add(c)
        c = fusible_consumer(state, c)
    return c


def is_tiled(state: State, sid: int) -> bool:
    return any(getattr(r, "code", "") == "SP" for r in state.stages[sid].relations)


def spatial_size(state: State, sid: int) -> int:
    n = 1
    for a in state.stages[sid].op.axes:
        n *= a.const_extent or 1
    return n


def reduce_size(state: State, sid: int) -> int:
    n = 1
    for a in state.stages[sid].op.reduce_axes:
        n *= a.const_extent or 1
    return n


#: reductions of at most this many points are tiled whole (depthwise conv: a 3x3 window)
SMALL_REDUCTION = 16


def small_reduction(state: State, sid: int) -> bool:
    """A constant reduction of at most :data:`SMALL_REDUCTION` points (a depthwise conv's KHxKW
    window): multi-level tiling leaves it unsplit."""
    axes = state.stages[sid].op.reduce_axes
    return bool(axes) and all(a.const_extent for a in axes) \
        and reduce_size(state, sid) <= SMALL_REDUCTION


def batch_axes(state: State, sid: int) -> set:
    """Names of the stage's spatial axes that index every tensor its body reads, when it reads
    two or more (a batched matmul's batch and head axes, ``h`` of ``P[b, h, i, k] * V[b, k, h,
    d]``): a register tile's rows along such an axis reuse no load, since each row needs its own
    vector operand and its own broadcast."""
    op = state.stages[sid].op
    reads = [x for x in walk(op.body) if isinstance(x, TensorRead)]
    if len({id(r.tensor) for r in reads}) < 2:
        return set()
    # an axis indexes a read when it is a term of an index (``o // 32``, a grouped conv's group,
    # is coarser: the rows of one group share the input)
    used = [{id(atom) for i in r.indices for atom, c in to_linear(i).terms.values()
             if isinstance(atom, Var) and c} for r in reads]
    return {a.name for a in op.axes if all(id(a) in u for u in used)}


#: a row loop shorter than this is fused with the loop outside it (:func:`row_fusion`)
SHORT_ROW = 16


def row_fusion(state: State, sid: int, vector: str | None = None) -> tuple | None:
    """Positions of two adjacent spatial loops worth fusing into one before the stage is tiled,
    or None: the last two spatial loops other than the vector axis (``vector``, else the last
    one), each of more than one point, the inner one short (under :data:`SHORT_ROW`: a conv's 7-
    or 14-pixel output rows, in NHWC, or in NCHW with the vector along the output channels), the
    vector axis at least :data:`VECTOR_POINTS` long. A register tile then spans rows: 7 pixels
    are one 4-row tile and a 3-row tail, 49 fused pixels eight 6-row tiles and one pixel.
    Unsplit constant loops of a root stage only."""
    s = state.stages[sid]
    if s.relations or s.op.is_ragged or has_data_dependent_loops(state, sid):
        return None
    sp = [k for k, it in enumerate(s.iters) if it.kind is IterKind.SPATIAL]
    vec = sp[-1] if vector is None else next((k for k in sp if s.iters[k].name == vector), None)
    rest = [k for k in sp if k != vec]
    if vec is None or len(rest) < 2 or (s.iters[vec].const_extent or 0) < VECTOR_POINTS:
        return None
    a, b = rest[-2], rest[-1]
    ea, eb = s.iters[a].const_extent or 0, s.iters[b].const_extent or 0
    if b != a + 1 or ea < 2 or not 2 <= eb < SHORT_ROW or not _index_one_input(s, a, b):
        return None
    return (a, b)


def fused_rows(stage) -> bool:
    """Whether the stage has a spatial loop fused from axes of its own op (the rows of a
    ``+rows`` sketch, ``y@x``, before or after splitting), not one an rfactor made of fused
    reduction pieces (``ry@rx.1.f``)."""
    names = {ax.name for ax in stage.op.axes}
    return any(it.kind is IterKind.SPATIAL and "@" in it.name
               and all(part.split(".")[0] in names for part in it.name.split("@"))
               for it in stage.iters)


def _index_one_input(s, a: int, b: int) -> bool:
    """Whether loops ``a`` and ``b`` of an unsplit stage both index one input (an image's rows
    and columns), not two (an NCHW conv's output channels and rows)."""
    axes = {ax.name: ax for ax in s.op.axes}
    va, vb = axes.get(s.iters[a].name), axes.get(s.iters[b].name)
    if va is None or vb is None:
        return False
    for r in walk(s.op.body):
        if isinstance(r, TensorRead):
            used = {id(v) for i in r.indices for v in walk(i) if isinstance(v, Var)}
            if id(va) in used and id(vb) in used:
                return True
    return False


def has_data_dependent_loops(state: State, sid: int) -> bool:
    s = state.stages[sid]
    return any(a.const_extent is None for a in s.root_axes)


#: an innermost loop shorter than this (16 fp32 lanes of AVX-512) fills vectors badly
VECTOR_POINTS = 16


def _scaled(e, var) -> bool:
    """``var`` appears multiplied by a constant other than 0 and 1 in ``e`` (a strided access)."""
    for x in walk(e):
        if isinstance(x, BinOp) and x.op is BinOpKind.MUL:
            for a, b in ((x.a, x.b), (x.b, x.a)):
                if a is var and isinstance(b, Const) and b.value not in (0, 1):
                    return True
    return False


def _reads_zero_insertion_along(state: State, reads: list, axis) -> bool:
    """Some read of a zero-inserting stage (a dilated input, :func:`is_zero_insertion`) is
    indexed by ``axis``: the vector lanes along it would need taps of different stride phases,
    so lowering's stride-phase pass cannot skip the zeros there (transposed convolutions)."""
    zero = {id(st.tensor) for st in state.stages
            if not st.is_placeholder and is_zero_insertion(st.op.body)}
    return any(id(r.tensor) in zero and any(x is axis for i in r.indices for x in walk(i))
               for r in reads)


def phase_axes(state: State, sid: int) -> list:
    """``[(iter name, stride)]``: the stage's spatial loops whose value decides the stride phase
    of a read of a zero-inserting stage (a transposed conv's output rows and columns:
    ``dilated[y + ry]`` is non-zero only where ``y + ry - p`` is a multiple of the stride).

    Split by the stride with the phase outermost, each phase is an ordinary convolution: the
    phase is fixed outside the reduction loops, so lowering's stride-phase pass cuts every
    reduction tap that reads a zero, at any tiling, and the inner tiles index the input with
    unit stride. Only whole loops (not yet split) whose extent the stride divides."""
    s = state.stages[sid]
    zero = {id(st.tensor): st for st in state.stages
            if not st.is_placeholder and is_zero_insertion(st.op.body)}
    if not zero:
        return []
    whole = {it.name: it for it in s.iters if it.kind is IterKind.SPATIAL}
    spatial = {id(a): whole[a.name] for a in s.op.axes if a.name in whole}
    found = {}
    for r in walk(s.op.body):
        z = zero.get(id(r.tensor)) if isinstance(r, TensorRead) else None
        if z is None:
            continue
        at = dict(zip(z.op.axes, r.indices))
        for e, stride in phase_conjuncts(z.op.body.cond):
            for atom, c in to_linear(substitute(e, at)).terms.values():
                it = spatial.get(id(atom))
                ext = it.const_extent if it is not None else None
                if ext and ext % stride == 0 and ext > stride and math.gcd(c, stride) == 1:
                    found[it.name] = stride
    return [(it.name, found[it.name]) for it in s.iters if it.name in found]


def inner_axis_alternatives(state: State, sid: int) -> list:
    """Names of spatial axes worth putting innermost in the register tile instead of the last one.

    When the last spatial axis vectorizes badly (fewer than :data:`VECTOR_POINTS` points, a length
    that whole vectors do not cover: a 56- or 28-wide NCHW row is 3.5 or 1.75 vectors; or an
    input is read along it with a stride: a strided NCHW conv's input rows; or through a
    zero-inserting stage: a transposed conv's dilated input), an axis of at least
    that many points that indexes one dimension of an input on its own (a conv weight's output
    channel, which the ``pack`` decision can make contiguous) can carry the vector instead, the
    other inputs' values broadcast: the NCHW conv kernel of oneDNN. Only for a stage that
    accumulates in a local buffer (the global output keeps its layout).

    The tile buffer is laid out in loop order (:func:`tecomp.lowering.lower.loop_order_strides`),
    so the vector is contiguous there too.
    """
    s = state.stages[sid]
    axes = list(s.op.axes)
    if len(axes) < 2 or s.scope is not Scope.LOCAL:
        return []
    last = axes[-1]
    reads = [x for x in walk(s.op.body) if isinstance(x, TensorRead)]
    strided = any(_scaled(i, last) for r in reads for i in r.indices) \
        or _reads_zero_insertion_along(state, reads, last)
    ext = last.const_extent or 0
    if ext >= VECTOR_POINTS and ext % VECTOR_POINTS == 0 and not strided:
        return []
    out = []
    for a in axes[:-1]:
        if (a.const_extent or 0) < VECTOR_POINTS:
            continue
        users = [r for r in reads if any(x is a for i in r.indices for x in walk(i))]
        # one input indexed by the axis alone in one dimension; every other read broadcast along
        # it (a depthwise conv reads its input along the channels too: a gather, not a broadcast)
        if len(users) == 1 and sum(1 for i in users[0].indices if i is a) == 1 \
                and all(i is a or not any(x is a for x in walk(i)) for i in users[0].indices):
            out.append(a.name)
    return out


def recomputed_at(state: State, sid: int, cid: int, k: int) -> bool:
    """Whether computing stage ``sid`` at loop ``k`` of its reader ``cid`` repeats it over an
    enclosing loop (of extent > 1) that the region it reads from ``sid`` does not depend on: a
    row reduction computed inside the loop over the row's columns runs once per column (a
    softmax's row maximum at its output's column loop: 1024 times the work, seconds per run).
    False when the reader reads ``sid`` only through an inlined stage (not analysed here)."""
    s, c = state.stages[sid], state.stages[cid]
    reads = [x for x in walk(c.op.body) if isinstance(x, TensorRead) and x.tensor is s.tensor]
    if not reads:
        return False
    used = {id(v) for r in reads for i in r.indices for v in walk(i) if isinstance(v, Var)}
    nest = c.nest()
    feeding = {id(v) for a, val in nest.root_values.items() if id(a) in used
               for v in walk(val) if isinstance(v, Var)}
    return any((it.const_extent or 2) > 1 and id(it.var) not in feeding for it in c.iters[:k + 1])


def shared_loops(state: State, sid: int, readers) -> list:
    """``[(tid, k), ...]``: the loops ``k`` of a root stage ``tid`` inside which every reader of
    stage ``sid`` runs (``tid`` itself, or computed at loop ``k`` of it or deeper), where ``sid``
    can be computed once per iteration: spatial loops before ``tid``'s first reduction, of
    extent > 1, and whose every enclosing loop of extent > 1 the region ``sid`` would then
    compute depends on (else it would be recomputed over it: a softmax's row maximum inside the
    loop over the columns). This is how a softmax's ``exp``, read by the row sum and the output,
    becomes one row of a buffer computed per output row."""
    readers = sorted(readers)
    if not readers:
        return []
    tid = readers[-1]  # the latest stage: the others' attach chains end at it
    while state.stages[tid].location is ComputeLocation.AT:
        tid = state.stages[tid].attach[0]
    inside = [attach_loop_on(state, r, tid) for r in readers if r != tid]
    if None in inside:
        return []
    limit = min(inside, default=None)
    t = state.stages[tid]
    out = []
    for k, it in enumerate(t.iters):
        if it.kind is IterKind.REDUCE or it.const_extent is None or (
                limit is not None and k > limit):
            break
        if it.const_extent <= 1:
            continue
        trial = state.copy()
        try:
            trial.apply(ComputeAtStep(sid, tid, k), atomic=False)
        except ScheduleError:
            continue
        used = {id(v) for lo, *_ in trial.stages[sid].region for v in walk(lo)
                if isinstance(v, Var)}
        if all((x.const_extent or 2) <= 1 or id(x.var) in used for x in t.iters[:k + 1]):
            out.append((tid, k))
    return out
