"""Bound inference: the region of a producer that one iteration of its attach loop needs.

Reads of the producer in its consumer are expressed in the consumer's loop variables; the loops
inside the attach point range over their extents, the loops outside stay symbolic. Affine indices
give exact regions (``[io*32, io*32 + 31]``); others (floordiv/mod, data-dependent reads) give
conservative but correct ones, with constant extents so that the producer's buffer is small and
its loops have fixed trip counts.
"""
from __future__ import annotations

from ..ir.arith import bound, simplify_index
from ..ir.dtype import INDEX
from ..ir.expr import BinOpKind, Const, TensorRead, binary
from ..ir.interval import interval
from ..ir.loop import Scope
from ..ir.traverse import free_vars, structural_key, substitute, walk
from .compute_steps import attach_loop_on
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
    readers = None  # stage -> the stages whose ops read it, built once when a stage is attached
    for sid in reversed(range(len(state.stages))):
        s = state.stages[sid]
        if s.location is not ComputeLocation.AT:
            if s.region is not None:
                s.region = None
                s.invalidate()
            continue
        if readers is None:
            readers = _readers(state)
        inside = _inside_readers(state, sid, readers)
        source = _region_source(state, sid, inlined, inside)
        memo = s.__dict__.get("_region_source")
        if s.region is not None and memo is not None and len(memo) == len(source) and all(
                x is y for x, y in zip(memo, source)):
            continue
        region = _region(state, sid, by_tensor, inside)
        s._region_source = source
        if s.region is None or _region_key(region) != _region_key(s.region):
            s.region = region
            s.invalidate()


def _region_source(state: State, sid: int, inlined: tuple, inside: list) -> tuple:
    """The objects the region of attached stage ``sid`` is computed from, compared by identity
    (expressions and ops are immutable): along the consumer's attach chain, each stage's op, its
    loop variables, extents and thread bindings, and the values of its root axes. Annotations
    other than thread bindings (parallel, vectorize, unroll) do not change a region, so they do
    not appear."""
    s = state.stages[sid]
    out = [s.op, s.scope, s.attach[1], *inlined]
    _chain_source(state, s.attach[0], out)
    for r in inside:  # readers computed inside the attach loop (softmax)
        out += (r, state.stages[r].attach)
        _chain_source(state, r, out)
    return tuple(out)


def _chain_source(state: State, tid, out: list) -> None:
    seen = set()
    while tid is not None and tid not in seen:
        seen.add(tid)
        t = state.stages[tid]
        nest = t.nest()
        out.append(t.op)
        for it in nest.iters:
            out += (it.var, it.extent, it.annotation.thread)
        out += nest.root_values.values()
        tid = t.attach[0] if t.location is ComputeLocation.AT else None


def _readers(state: State) -> dict:
    """Stage index -> the indices of the stages whose ops read its tensor."""
    index = {id(s.tensor): n for n, s in enumerate(state.stages)}
    out: dict = {}
    for n, s in enumerate(state.stages):
        if not s.is_placeholder:
            for x in s.op.inputs:
                if id(x) in index:
                    out.setdefault(index[id(x)], []).append(n)
    return out


def _inside_readers(state: State, sid: int, readers: dict) -> list:
    """The readers of attached stage ``sid`` other than its attach target, through inlined
    stages (from the ops' inputs: this runs for every bound inference)."""
    tid = state.stages[sid].attach[0]
    out, todo, seen = set(), [sid], set()
    while todo:
        for r in readers.get(todo.pop(), ()):
            if r not in seen:
                seen.add(r)
                if state.stages[r].location is ComputeLocation.INLINE:
                    todo.append(r)
                elif r != tid:
                    out.add(r)
    return sorted(out)


def _region_key(region) -> tuple:
    return tuple((structural_key(lo, id), n, b, a) for lo, n, b, a in region)


def _region(state: State, sid: int, by_tensor: dict, inside: list) -> list:
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
    dyn = set()  # data-dependent loops of readers attached inside loop k (see below)
    reads = [(idx, inner) for idx in _reads(state, t, s, by_tensor)]
    for r in inside:
        kr = attach_loop_on(state, r, tid)
        if kr is None or kr < k:
            raise ScheduleError(f"compute_at: '{state.stages[r].name}' reads '{s.name}' outside "
                                f"loop '{nest.iters[k].name}' of '{t.name}', where it is "
                                f"computed")
        # the loops that vary within one iteration of loop k: the target's inside it, and all
        # loops of the stages down the reader's attach chain (a superset: still a sound bound)
        r_ranges = loop_ranges(state, r)
        r_inner, x = dict(inner), r
        while x != tid:
            for it in state.stages[x].nest().iters:
                if it.var in r_ranges:
                    r_inner[it.var] = r_ranges[it.var]
                else:  # a data-dependent loop (a sparse row's nonzeros): see below
                    dyn.add(it.var)
            x = state.stages[x].attach[0]
        ranges = {**ranges, **r_ranges}
        reads += [(idx, r_inner) for idx in _reads(state, state.stages[r], s, by_tensor)]
    if not reads:
        raise ScheduleError(f"compute_at: '{t.name}' does not read '{s.name}'")
    region = []
    for d, axis in enumerate(s.op.axes):
        lo = hi = None
        dom_lo, dom_hi = interval(axis.begin, {}), interval(axis.end, {})
        for idx, inside in reads:
            e = idx[d]
            if any(v in dyn or v in dyn_inner for v in free_vars(e)):
                # read at a data-dependent place (a sparse row's column index): the region is the
                # whole axis, which holds every index the kernel's index checks let through
                if dom_lo is None or dom_hi is None:
                    raise ScheduleError(f"compute_at: '{s.name}' is read inside data-dependent "
                                        f"loops along axis '{axis.name}' of no constant extent")
                lo, hi = Const(dom_lo[0], INDEX), Const(dom_hi[0] - 1, INDEX)
                break
            b = bound(e, inside, ranges)
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
        below = r is None or dom_lo is None or r[0] < dom_lo[0]
        above = r is None or dom_hi is None or r[1] + n > dom_hi[0]
        region.append((lo, n, below, above))
    return region


def _reads(state: State, reader, s, by_tensor) -> list:
    """The indices of every read of ``s`` in ``reader``'s body (through inlined stages), in the
    reader's loop variables."""
    values = reader.nest().root_values
    out = []
    for e in stage_exprs(reader):
        for x in walk(expand_inline(state, e, by_tensor)):
            if isinstance(x, TensorRead) and x.tensor is s.tensor:
                out.append([substitute(i, values) for i in x.indices])
    return out


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
