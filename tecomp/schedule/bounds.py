"""Bound inference: the region of a producer that one iteration of its attach loop needs.

Reads of the producer in its consumer are expressed in the consumer's loop variables; the loops
inside the attach point range over their extents, the loops outside stay symbolic. Affine indices
give exact regions (``[io*32, io*32 + 31]``); others (floordiv/mod, data-dependent reads) give
conservative but correct ones, with constant extents so that the producer's buffer is small and
its loops have fixed trip counts.
"""
from __future__ import annotations

from ..ir.arith import bound, simplify_index
from ..ir.expr import BinOpKind, Const, TensorRead, binary
from ..ir.interval import interval
from ..ir.loop import Scope
from ..ir.traverse import free_vars, structural_key, substitute, walk
from .inline import expand_inline, stage_exprs
from .state import ComputeLocation, ScheduleError, State

__all__ = ["infer_bounds", "loop_ranges"]


def loop_ranges(state: State, sid: int) -> dict:
    """Ranges ``{var: (0, extent - 1)}`` of the constant-extent loops of stage ``sid`` and of the
    loops enclosing it through its attach chain."""
    out, seen = {}, set()
    while sid is not None and sid not in seen:
        seen.add(sid)
        s = state.stages[sid]
        for it in s.iters:
            if it.const_extent is not None:
                out[it.var] = (0, it.const_extent - 1)
        sid = s.attach[0] if s.location is ComputeLocation.AT else None
    return out


def infer_bounds(state: State) -> None:
    """Set the region of every attached stage, consumers before producers.

    A region is a function of the stage's op and scope, the attach loop, the loop nests along the
    consumer's attach chain and the inlined stages' ops; when none of these objects changed since
    the stage's region was last inferred, the region is kept (the search replays thousands of
    candidates step by step, and bound inference after every step dominated)."""
    by_tensor = {id(s.tensor): s for s in state.stages}
    inlined = tuple(s.op for s in state.stages if s.location is ComputeLocation.INLINE)
    for sid in reversed(range(len(state.stages))):
        s = state.stages[sid]
        if s.location is not ComputeLocation.AT:
            if s.region is not None:
                s.region = None
                s.invalidate()
            continue
        source = _region_source(state, sid, inlined)
        memo = s.__dict__.get("_region_source")
        if s.region is not None and memo is not None and len(memo) == len(source) and all(
                x is y for x, y in zip(memo, source)):
            continue
        region = _region(state, sid, by_tensor)
        s._region_source = source
        if s.region is None or _region_key(region) != _region_key(s.region):
            s.region = region
            s.invalidate()


def _region_source(state: State, sid: int, inlined: tuple) -> tuple:
    """The objects the region of attached stage ``sid`` is computed from, compared by identity
    (expressions and ops are immutable): along the consumer's attach chain, each stage's op, its
    loop variables, extents and thread bindings, and the values of its root axes. Annotations
    other than thread bindings (parallel, vectorize, unroll) do not change a region, so they do
    not appear."""
    s = state.stages[sid]
    out = [s.op, s.scope, s.attach[1], *inlined]
    tid, seen = s.attach[0], set()
    while tid is not None and tid not in seen:
        seen.add(tid)
        t = state.stages[tid]
        nest = t.nest()
        out.append(t.op)
        for it in nest.iters:
            out += (it.var, it.extent, it.annotation.thread)
        out += nest.root_values.values()
        tid = t.attach[0] if t.location is ComputeLocation.AT else None
    return tuple(out)


def _region_key(region) -> tuple:
    return tuple((structural_key(lo, id), n, b, a) for lo, n, b, a in region)


def _region(state: State, sid: int, by_tensor: dict) -> list:
    s = state.stages[sid]
    tid, k = s.attach
    t = state.stages[tid]
    nest = t.nest()
    if k >= len(nest.iters):
        raise ScheduleError(f"compute_at: '{t.name}' no longer has loop {k}")
    ranges = loop_ranges(state, tid)
    inner = {it.var: ranges[it.var] for it in nest.iters[k + 1:] if it.var in ranges}
    if s.scope is Scope.SHARED:
        # all threads of a block share the buffer: its region covers every threadIdx value of
        # the loops around the attach point (filled cooperatively, TVM's thread relaxation)
        inner.update(_thread_ranges(state, tid, k, ranges))
    dyn_inner = {it.var for it in nest.iters[k + 1:] if it.var not in ranges}
    reads = []
    for e in stage_exprs(t):
        for x in walk(expand_inline(state, e, by_tensor)):
            if isinstance(x, TensorRead) and x.tensor is s.tensor:
                reads.append([substitute(i, nest.root_values) for i in x.indices])
    if not reads:
        raise ScheduleError(f"compute_at: '{t.name}' does not read '{s.name}'")
    region = []
    for d, axis in enumerate(s.op.axes):
        lo = hi = None
        for idx in reads:
            e = idx[d]
            if any(v in dyn_inner for v in free_vars(e)):
                raise ScheduleError(f"compute_at: the region of '{s.name}' read inside "
                                    f"data-dependent loops of '{t.name}' is unknown; attach "
                                    f"it inside those loops")
            b = bound(e, inner, ranges)
            if b is None:
                raise ScheduleError(f"compute_at: cannot bound index {e!r} of '{s.name}'")
            lo = b[0] if lo is None else _union(lo, b[0], BinOpKind.MIN, ranges)
            hi = b[1] if hi is None else _union(hi, b[1], BinOpKind.MAX, ranges)
        ext = simplify_index(hi - lo + 1, ranges)
        if not isinstance(ext, Const):
            r = interval(ext, ranges)
            if r is None:
                raise ScheduleError(f"compute_at: the region of '{s.name}' along axis "
                                    f"'{axis.name}' has no constant bound ({ext!r})")
            ext = Const(r[1], ext.dtype)
        lo = simplify_index(lo, ranges)
        n = max(0, ext.value)
        r = interval(lo, ranges)
        dom_lo, dom_hi = interval(axis.begin, {}), interval(axis.end, {})
        below = r is None or dom_lo is None or r[0] < dom_lo[0]
        above = r is None or dom_hi is None or r[1] + n > dom_hi[0]
        region.append((lo, n, below, above))
    return region


def _thread_ranges(state: State, tid: int, k: int, ranges: dict) -> dict:
    """Ranges of the threadIdx-bound loops at or outside loop ``k`` of stage ``tid`` and of the
    loops enclosing it through its attach chain."""
    out, seen = {}, set()
    while tid is not None and tid not in seen:
        seen.add(tid)
        t = state.stages[tid]
        for it in t.nest().iters[:k + 1]:
            th = it.annotation.thread
            if th is not None and th.is_thread and it.var in ranges:
                out[it.var] = ranges[it.var]
        if t.location is not ComputeLocation.AT:
            break
        tid, k = t.attach
    return out


def _union(a, b, op, ranges):
    d = simplify_index(a - b, ranges)
    if isinstance(d, Const):
        if op is BinOpKind.MIN:
            return a if d.value <= 0 else b
        return a if d.value >= 0 else b
    return simplify_index(binary(op, a, b), ranges)
