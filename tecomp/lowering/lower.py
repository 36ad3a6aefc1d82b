"""Lowering: a schedule State becomes one loop-IR function.

Each stage at root becomes a loop nest at the top level; a stage computed at another stage's loop
becomes a loop nest (over its inferred region, in a buffer of that region's size) inside that loop;
inlined stages are substituted into their readers. Guards of non-divisible splits are placed just
inside the innermost loop they depend on, except that a GPU tail guard that reads a threadIdx
variable, above a shared-memory stage computed inside it, wraps only the stage's own statements
(every thread must reach the barriers and take its part of a cooperative fetch). The default
schedule is the State with no steps.
"""
from __future__ import annotations

from ..ir import dtype as dt
from ..ir.arith import simplify_index
from ..ir.dag import ComputeDAG
from ..ir.expr import BinOpKind, Const, IterKind, Load, Reduce, TensorRead, Var, binary
from ..ir.loop import Allocate, Buffer, For, ForKind, IfThenElse, PrimFunc, Scope, Store, seq
from ..ir.traverse import free_vars, substitute, transform, walk
from ..schedule.bounds import loop_ranges
from ..schedule.compute_steps import aligned_strides
from ..schedule.state import Annotation, ComputeLocation, State
from .gpu_passes import GPUScheduleError
from .pad_guards import harmless, spatial_bound
from .stride_phase import stride_phase
from .zero_trim import zero_trim

__all__ = ["lower_state", "lower_default"]

_THREAD_AXES = (Annotation.THREAD_X, Annotation.THREAD_Y, Annotation.THREAD_Z)
_KIND = {Annotation.NONE: ForKind.SERIAL, Annotation.UNROLL: ForKind.UNROLLED,
         Annotation.VECTORIZE: ForKind.VECTORIZED, Annotation.PARALLEL: ForKind.PARALLEL}


def lower_default(dag: ComputeDAG, name: str | None = None) -> PrimFunc:
    """Every stage at root in topological order, natural loop order."""
    return lower_state(State(dag), name)


def lower_state(state: State, name: str | None = None) -> PrimFunc:
    return _Lowering(state).run(name)


class _Lowering:
    def __init__(self, state: State):
        self.state = state
        self.by_tensor = {id(s.tensor): s for s in state.stages}
        dag = state.dag
        self.args = {id(t) for t in dag.tensors}
        self.buffers, self.offsets, used = {}, {}, {}
        self.attached: dict = {}
        for sid, s in enumerate(state.stages):
            if s.location is ComputeLocation.INLINE:
                continue
            name = s.name
            used[name] = used.get(name, -1) + 1
            if used[name]:
                name = f"{name}_{used[name]}"
            shape = s.tensor.shape
            if s.location is ComputeLocation.AT:
                shape = tuple(r[1] for r in s.region)
                self.offsets[id(s.tensor)] = [r[0] for r in s.region]
                self.attached.setdefault(s.attach, []).append(sid)
            scope = Scope.GLOBAL if id(s.tensor) in self.args else s.scope
            if scope is Scope.GLOBAL and s.location is ComputeLocation.AT \
                    and _under_threads(state, s):
                scope = Scope.LOCAL  # computed per thread (TVM's rule): in registers
            strides = aligned_strides(shape, s.align)
            if strides is None and s.location is ComputeLocation.AT and s.scope is Scope.LOCAL:
                strides = loop_order_strides(s, shape)
            self.buffers[id(s.tensor)] = Buffer(name, shape, s.tensor.dtype, scope, strides)
        lowered = [s for s in state.stages
                   if not s.is_placeholder and s.location is not ComputeLocation.INLINE]
        for s in lowered:
            _check_binds(s)
        # ids of the loop variables bound to threadIdx (their guards differ within a block)
        self.thread_vars = {id(it.var) for s in lowered for it in s.iters
                            if it.annotation in _THREAD_AXES}

    def run(self, name):
        st, dag = self.state, self.state.dag
        body = seq(*[self.stage_nest(sid) for sid, s in enumerate(st.stages)
                     if not s.is_placeholder and s.location is ComputeLocation.ROOT])
        for s in reversed(st.stages):
            if not s.is_placeholder and s.location is ComputeLocation.ROOT \
                    and id(s.tensor) not in self.args:
                body = Allocate(self.buffers[id(s.tensor)], body)
        # (unrolling sees the phase-split and trimmed extents)
        body = _auto_unroll(zero_trim(stride_phase(body)))
        params = [self.buffers[id(t)] for t in dag.tensors]
        return PrimFunc(name or f"tecomp_{dag.workload_key[:12]}", params, body,
                        n_outputs=len(dag.outputs))

    # ------------------------------------------------------------------ expressions
    def convert(self, e, values: dict, ranges: dict):
        """Inline, substitute root axes by loop expressions, and turn reads into buffer loads, in
        one pass (this runs for every candidate the search scores); nodes rebuilt on the way are
        constant-folded by their constructors."""
        by_tensor = self.by_tensor
        done: dict = {}  # root axis -> its converted loop expression (which may load: sparse rows)

        def fn(x):
            if isinstance(x, Var):
                v = values.get(x)
                if v is None:
                    return None
                if x not in done:
                    done[x] = transform(v, fn)
                return done[x]
            if isinstance(x, TensorRead):
                idx = [transform(i, fn) for i in x.indices]
                s = by_tensor.get(id(x.tensor))
                if s is not None and s.location is ComputeLocation.INLINE:
                    return transform(substitute(s.op.body, dict(zip(s.op.axes, idx))), fn)
                idx = self.shift(x.tensor, [simplify_index(i, ranges) for i in idx], ranges)
                return Load(self.buffers[id(x.tensor)], tuple(idx))
            return None
        return transform(e, fn)

    def shift(self, tensor, idx, ranges):
        """Indices into an attached stage's region buffer: minus the region's start (whose
        data-dependent parts are converted to loads too)."""
        off = self.offsets.get(id(tensor))
        if off is None:
            return idx
        return [simplify_index(i - self.convert(o, {}, ranges), ranges) for i, o in zip(idx, off)]

    # ------------------------------------------------------------------ one stage
    def stage_nest(self, sid: int):
        s = self.state.stages[sid]
        op, nest = s.op, s.nest()
        ranges = loop_ranges(self.state, sid)
        values = nest.root_values
        buf = self.buffers[id(s.tensor)]
        idx = [self.convert(i, values, ranges) for i in op.out_index]
        idx = tuple(self.shift(s.tensor, idx, ranges))
        if isinstance(op.body, Reduce):
            value = self.convert(op.body.source, values, ranges)
            stmt = Store(buf, idx, binary(op.body.kind.combiner, Load(buf, idx), value))
            init = Store(buf, idx, op.body.identity)
        else:
            stmt, init = Store(buf, idx, self.convert(op.body, values, ranges)), None
        iters = nest.iters
        pos = {it.var: n for n, it in enumerate(iters)}
        guards: dict = {}
        for g in nest.guards:
            g = self.convert(g, values, ranges)
            p = max((pos[v] for v in free_vars(g) if v in pos), default=-1)
            guards.setdefault(p, []).append(g)
        first_red = next((n for n, it in enumerate(iters) if it.kind is IterKind.REDUCE), None)
        sunk = self.sink_thread_guards(sid, guards)
        # a private tile computes its padded lanes rather than masking them (pad_guards.py);
        # a guard on a scalar loop stays: its branch skips the padded rows' work
        pad = buf.scope is Scope.LOCAL and s.location is ComputeLocation.AT \
            and not op.is_ragged and not self.thread_vars
        if first_red is None and init is not None:  # a reduction over an empty set of axes
            stmt = seq(init, stmt)
        stmt = _guard(sunk, stmt)
        for p in reversed(range(len(iters))):
            # producers computed here run under this loop's guards: an iteration the guards skip
            # (a non-divisible tail, past a sparse row's end) must not compute their region either
            # (but for the thread-dependent guards sunk to the stage's own statements, above)
            for pid in reversed(self.attached.get((sid, p), [])):
                ps = self.state.stages[pid]
                stmt = Allocate(self.buffers[id(ps.tensor)], seq(self.stage_nest(pid), stmt))
            if pad and guards.get(p) and iters[p].annotation is Annotation.VECTORIZE:
                _drop_padding(guards, p, iters, stmt, ranges)  # a lane guard: it masks
            stmt = _guard(guards.get(p), stmt)
            it = iters[p]
            ext = self.convert(it.extent, values, ranges)
            stmt = _loop(it, ext, stmt)
            if p == first_red and init is not None:
                stmt = seq(self.init_nest(iters, p, init, guards, values, ranges, sunk), stmt)
        return _guard(guards.get(-1), stmt)

    def init_nest(self, iters, first_red, init, guards, values, ranges, sunk=()):
        """The reduction's initialization for the spatial loops inside the first reduction loop
        (under the guards sunk to the stage's own statements too)."""
        inner = [it for it in iters[first_red:] if it.kind is not IterKind.REDUCE]
        fresh = {it.var: Var(it.name) for it in inner}
        reduce_vars = {it.var for it in iters if it.kind is IterKind.REDUCE}
        conds = [g for p, gs in guards.items() if p >= first_red for g in gs] + list(sunk)
        conds = [g for g in conds if not any(v in reduce_vars for v in free_vars(g))]
        stmt = _guard([substitute(c, fresh) for c in conds], substitute_stmt(init, fresh))
        for it in reversed(inner):
            ext = self.convert(it.extent, values, ranges)
            kind = ForKind.VECTORIZED if it.annotation is Annotation.VECTORIZE else ForKind.SERIAL
            stmt = For(fresh[it.var], Const(0, dt.INDEX), ext, kind, stmt)
        return stmt

    # ------------------------------------------------------------------ GPU tail guards
    def sink_thread_guards(self, sid: int, guards: dict) -> list:
        """The guards of stage ``sid`` that must wrap only its own statements, removed from
        ``guards`` (position -> conditions): a tail guard that differs between the threads of a
        block (it reads a threadIdx-bound loop variable) around a loop whose body synchronizes
        the block, a shared-memory stage computed inside it (a cooperative fetch, with its own
        guards) or the stage's own reduction into shared memory. There every thread must reach
        the barriers and take its part of the fetch; the guard goes around the stage's stores."""
        if not self.thread_vars:
            return []
        s = self.state.stages[sid]
        own = self.buffers[id(s.tensor)].scope is Scope.SHARED
        iters = s.nest().iters
        out = []
        for p in sorted(guards):
            if not (any(self.has_shared(pid) for (a, q), pids in self.attached.items()
                        if a == sid and q >= p for pid in pids)
                    or own and any(it.kind is IterKind.REDUCE for it in iters[p + 1:])):
                continue
            keep = []
            for g in guards[p]:
                data = any(isinstance(x, Load) for x in walk(g))  # a sparse row's end: left alone
                if not data and any(id(v) in self.thread_vars for v in free_vars(g)):
                    out.append(g)
                else:
                    keep.append(g)
            guards[p] = keep
        return out

    def has_shared(self, sid: int) -> bool:
        """Whether stage ``sid`` or a stage computed inside it is in shared memory."""
        if self.buffers[id(self.state.stages[sid].tensor)].scope is Scope.SHARED:
            return True
        return any(self.has_shared(pid) for (a, _), pids in self.attached.items() if a == sid
                   for pid in pids)


def _under_threads(state, s) -> bool:
    """Whether stage ``s`` is computed inside a loop bound to a thread (or virtual thread)."""
    seen = set()
    while s.location is ComputeLocation.AT and id(s) not in seen:
        seen.add(id(s))
        t, k = s.attach
        s = state.stages[t]
        if any(it.annotation in _THREAD_AXES or it.annotation is Annotation.VTHREAD
               for it in s.iters[:k + 1]):
            return True
    return False


def _check_binds(stage) -> None:
    """Two loops of one stage bound to one block or thread axis (not vthread) would be one loop,
    nested in itself: an error naming the axis and both loops."""
    seen: dict = {}
    for it in stage.iters:
        axis = it.annotation.thread
        if axis is None or it.annotation is Annotation.VTHREAD:
            continue
        if axis in seen:
            raise GPUScheduleError(f"stage '{stage.name}': loops '{seen[axis]}' and '{it.name}' are "
                                   f"both bound to {axis.value}; one loop nest cannot bind a GPU "
                                   f"axis twice (bind the other loop to another axis, or fuse them)")
        seen[axis] = it.name


def substitute_stmt(s: Store, m: dict) -> Store:
    return Store(s.buffer, tuple(substitute(i, m) for i in s.indices), substitute(s.value, m))


def _drop_padding(guards: dict, p: int, iters, stmt, ranges: dict) -> None:
    """Remove from ``guards[p]`` the spatial bounds around ``stmt`` that need not hold there."""
    reduce_vars = {it.var for it in iters if it.kind is IterKind.REDUCE}
    spatial = [g for g in guards[p] if spatial_bound(g, reduce_vars)]
    if spatial and harmless(stmt, ranges):
        guards[p] = [g for g in guards[p] if not any(g is x for x in spatial)]


def _guard(conds, stmt):
    if not conds:
        return stmt
    c = conds[0]
    for x in conds[1:]:
        c = binary(BinOpKind.AND, c, x)
    return IfThenElse(c, stmt)


def _loop(it, ext, body) -> For:
    thread = it.annotation.thread
    if thread is not None:
        return For(it.var, Const(0, dt.INDEX), ext, ForKind.THREAD_BOUND, body, thread=thread,
                   pragmas=it.pragmas)
    return For(it.var, Const(0, dt.INDEX), ext, _KIND[it.annotation], body, pragmas=it.pragmas)


def _auto_unroll(stmt):
    """``auto_unroll_max_step = N`` on a loop: unroll each loop inside it whose whole nest runs at
    most N iterations (serial loops of constant extent only)."""
    from ..ir.loop import Seq
    def size(s):  # iterations of the whole nest under s, None if unknown
        if isinstance(s, For):
            inner = size(s.body)
            if inner is None or not isinstance(s.extent, Const) or s.kind is not ForKind.SERIAL \
                    and s.kind is not ForKind.UNROLLED:
                return None
            return s.extent.value * inner
        if isinstance(s, Seq):
            total = 0
            for c in s.stmts:
                n = size(c)
                if n is None:
                    return None
                total += n
            return total
        if isinstance(s, (IfThenElse, Allocate)):
            return max((size(c) or 0) for c in s.children()) if all(
                size(c) is not None for c in s.children()) else None
        return 1

    def go(s, limit):
        if isinstance(s, For):
            lim = dict(s.pragmas).get("auto_unroll_max_step", limit)
            body = go(s.body, lim)
            kind = s.kind
            if lim and kind is ForKind.SERIAL and isinstance(s.extent, Const):
                n = size(For(s.var, s.begin, s.extent, kind, body))
                if n is not None and n <= lim:
                    kind = ForKind.UNROLLED
            return For(s.var, s.begin, s.extent, kind, body, s.thread, s.pragmas)
        if isinstance(s, Seq):
            return Seq([go(c, limit) for c in s.stmts])
        if isinstance(s, IfThenElse):
            return IfThenElse(s.cond, go(s.then, limit),
                              None if s.else_ is None else go(s.else_, limit))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, go(s.body, limit))
        return s
    return go(stmt, 0)


def loop_order_strides(stage, shape) -> tuple | None:
    """Strides of a private (local) tile buffer laid out in its stage's loop order: the dimension
    whose loop is innermost gets stride 1, so a register tile vectorized along the output channels
    of an NCHW conv is contiguous rather than strided by the tile width. None: row-major already.
    """
    axes = [a.name for a in stage.op.axes]
    last = {}
    for pos, it in enumerate(stage.iters):
        if it.const_extent == 1:
            continue  # a loop of one iteration orders nothing (a tile part of length 1)
        for part in it.name.split("@"):  # fused loops: "a.3@b.3"
            root = part.split(".")[0]
            if root in axes:
                last[root] = pos
    order = sorted(range(len(axes)), key=lambda d: (last.get(axes[d], -1), d))
    if order == list(range(len(axes))) or len(order) != len(shape):
        return None
    out, acc = [0] * len(shape), 1
    for d in reversed(order):
        out[d] = acc
        acc *= shape[d]
    return tuple(out)
