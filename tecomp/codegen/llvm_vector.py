"""Vectorized loops for the CPU emitter: a ``ForKind.VECTORIZED`` loop becomes LLVM vector code.

Lanes run in chunks of the register width in elements (:func:`.vector_plan.register_bits` over the
widest element accessed); a remainder is a smaller vector. Expressions that depend on the loop
variable are ``<n x T>`` vectors, invariant ones scalars broadcast where they meet vectors. Accesses
whose flat address has lane stride 1 are vector loads/stores, invariant ones scalar loads, others
gathers/scatters. Lane-dependent conditions become masks (masked loads/stores, lane-wise selects),
invariant ones stay branches; a condition whose lanes form one interval (a padding copy's bounds
check, a guarded tail: :func:`.vector_plan.interval_condition`) is first tested on a chunk's first
and last lane, and a chunk inside runs without masks. Inner loops are scalar loops of vector values.

Per-operation semantics are the scalar emitter's: :class:`VectorEmitter` reuses
:class:`.llvm_expr.ExprEmitter`'s methods with a builder that lifts scalar types and constants to
the lane count. :func:`.vector_plan.vector_plan` decides whether the loop can be run lane-parallel
exactly; if not, the caller emits the scalar loop.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir import dtype as dt
from ..ir.expr import Const, Expr, Load, Var
from ..ir.loop import For, ForKind, IfThenElse, Seq, Stmt, Store
from ..ir.traverse import walk
from .llvm_expr import I1, I8, I32, PTR, ExprEmitter, dispatch, ident, mem_type, reg_type
from .llvm_lanes import LaneBuilder, counted, intrinsic_suffix, span_load
from .vector_plan import access_form, interval_condition, register_bits, shuffle_bits, vector_plan

__all__ = ["register_bits", "vector_plan", "emit_vector_loop", "VectorEmitter"]

#: full-width chunks up to this many are emitted one after another, more as a loop
MAX_CHUNKS_UNROLLED = 4
#: loads whose lanes are up to this many elements apart are plain (or, under a mask, masked)
#: loads of the span they cover and a shuffle (:meth:`VectorEmitter.strided_load`); wider gather
MAX_WIDE_STRIDE = 4
#: chunks of fewer lanes keep masked code for interval conditions: the scalar test and branch cost
#: more than a short masked load (a 3-lane padding copy per output pixel ran 30% slower)
MIN_INTERVAL_LANES = 8


class VectorEmitter(ExprEmitter):
    """Emits the body of one vectorized loop for chunks of lanes, at the position of ``owner`` (the
    statement emitter), whose scalar machinery evaluates lane-invariant expressions and addresses.

    ``mask`` is None when every lane of the chunk is active, else an ``<n x i1>``; every load and
    store respects it, so no inactive lane touches memory.
    """

    def __init__(self, owner: ExprEmitter, loop: For):
        super().__init__(owner.func, owner.module, None)
        self.owner, self.loop, self.lane = owner, loop, loop.var
        self.raw = owner.b
        self.b = LaneBuilder(owner.b, self.splat)
        self.vars, self.bufs, self.strides = owner.vars, owner.bufs, owner.strides
        self.n = 1
        self.mask = None
        self.lane_vec = self.base = None
        self._varying: dict = {}
        self._intervals: dict = {}
        self._forms: dict = {}

    # ------------------------------------------------------------------ helpers

    def splat(self, x: ir.Value, n: int | None = None) -> ir.Value:
        n = self.n if n is None else n
        vt = ir.VectorType(x.type, n)
        if isinstance(x, ir.Constant):
            return ir.Constant(vt, x)
        b = self.raw
        v = b.insert_element(ir.Constant(vt, ir.Undefined), x, I32(0))
        return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n))

    def call_intr(self, base: str, x: ir.Value, *rest: ir.Value) -> ir.Value:
        t = x.type
        fn = self.declare(f"{base}.{intrinsic_suffix(t)}", t, [t] + [r.type for r in rest])
        return self.raw.call(fn, [x, *rest])

    def int_to(self, v: ir.Value, t: dt.DType, target: ir.IntType) -> ir.Value:
        el = v.type.element if isinstance(v.type, ir.VectorType) else v.type
        if el.width == target.width:
            return v
        if el.width > target.width:
            return self.b.trunc(v, target)
        return self.b.zext(v, target) if t.is_bool else self.b.sext(v, target)

    def varying(self, e: Expr) -> bool:
        """Whether ``e`` depends on the lane (memoized per node)."""
        k = id(e)
        r = self._varying.get(k)
        if r is None:
            r = e is self.lane or any(self.varying(c) for c in e.children())
            self._varying[k] = r
        return r

    def stride(self, buf, indices) -> int | None:
        k = (id(buf), id(indices))
        f = self._forms.get(k)
        if f is None:  # the entry keeps the indices alive, so their id stays theirs
            f = self._forms[k] = (indices, access_form(buf, indices, self.lane)[1])
        return f[1]

    def under(self, m: ir.Value, fn):
        """``fn()`` with the mask narrowed to the lanes where ``m`` holds."""
        outer = self.mask
        self.mask = m if outer is None else self.raw.and_(outer, m)
        try:
            return fn()
        finally:
            self.mask = outer

    def any_lane(self) -> ir.Value:
        m = self.mask
        return self.raw.call(self.declare(f"llvm.vector.reduce.or.{intrinsic_suffix(m.type)}", I1,
                                          [m.type]), [m])

    def masked(self, name: str, ret: ir.Type, args: list, *overloads: ir.Type) -> ir.Value:
        """Call ``llvm.masked.<name>`` (alignment as an i32 argument; LLVM 22 upgrades it)."""
        sfx = ".".join(intrinsic_suffix(t) for t in overloads)
        return self.raw.call(self.declare(f"llvm.masked.{name}.{sfx}", ret, [a.type for a in args]),
                             args)

    def all_true(self) -> ir.Value:
        return ir.Constant(ir.VectorType(I1, self.n), [1] * self.n)

    def reset(self) -> None:
        """Values are not reused across statements (a store may change what a load reads)."""
        self.cache = {}
        self.owner.cache = {}

    # ------------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> ir.Value:
        if not self.varying(e) and (self.mask is None or not self.has_load(e)):
            return self.splat(self.owner.expr(e))  # invariant: once, in scalar, then broadcast
        k = (id(e), id(self.mask))  # a value computed under one mask is not valid under another
        v = self.cache.get(k)
        if v is None:
            name = dispatch(self._EXPR, e)
            if name is None:
                raise TypeError(f"cannot compile expression node {type(e).__name__} for CPU")
            v = self.cache[k] = getattr(self, name)(e)
        return v

    def var(self, e: Var) -> ir.Value:  # only the lane: invariant nodes take the scalar path
        return self.lane_vec if e is self.lane else self.splat(super().var(e))

    def load(self, e: Load) -> ir.Value:
        t = e.buffer.dtype
        vt = ir.VectorType(mem_type(t), self.n)
        if not self.varying(e):  # invariant address under a mask: load once if any lane is active
            return self.splat(self.when_any_lane(lambda: self.owner.load(e)))
        how = self.unit_stride(e.buffer, e.indices)
        if how is not None:
            def access():
                ptr = self.owner.address(e.buffer, e.indices)  # at lane 0 of the chunk
                if self.mask is None:
                    return self.raw.load(ptr, typ=vt, align=t.itemsize)
                return self.masked("load", vt, [ptr, I32(t.itemsize), self.mask, ir.Constant(vt, 0)],
                                   vt, PTR)
            v = access() if how == "plain" else self.when_any_lane(access)
        elif (how := self.small_stride(e.buffer, e.indices)) is not None:
            v = self.strided_load(e, vt, how)
        else:
            # zero, not poison, in inactive lanes: they may reach a division's zero guard
            ptrs = self.lane_address(e.buffer, e.indices)
            v = self.masked("gather", vt, [ptrs, I32(t.itemsize), self.mask or self.all_true(),
                                           ir.Constant(vt, 0)], vt, ptrs.type)
        return self.b.icmp_unsigned("!=", v, I8(0)) if t.is_bool else v

    def unit_stride(self, buf, indices) -> str | None:
        """How a unit-stride access gets its lane-0 address from the owner: "plain", "guarded"
        (under a mask, with invariant index loads that only an active lane may run), or None
        (not unit stride, or lane-dependent index loads under a mask: gather/scatter)."""
        if self.stride(buf, indices) != 1:
            return None
        loads = [x for ix in indices for x in walk(ix) if isinstance(x, Load)]
        if self.mask is None or not loads:
            return "plain"
        return None if any(self.varying(x) for x in loads) else "guarded"

    def small_stride(self, buf, indices) -> tuple | None:
        """``(stride, how)`` for a load whose lanes are ``2 <= stride <= MAX_WIDE_STRIDE`` elements
        apart (a stride-2 convolution's input along a row), ``how`` as in :meth:`unit_stride`;
        None otherwise (a gather)."""
        st = self.stride(buf, indices)
        if not isinstance(st, int) or not 2 <= st <= MAX_WIDE_STRIDE:
            return None
        loads = [x for ix in indices for x in walk(ix) if isinstance(x, Load)]
        if self.mask is None or not loads:
            return st, "plain"
        return None if any(self.varying(x) for x in loads) else (st, "guarded")

    def strided_load(self, e: Load, vt: ir.VectorType, how: tuple) -> ir.Value:
        """Lanes ``stride`` elements apart without a gather (a gather of 16 lanes costs several
        times two loads and a permute). Every lane active: :func:`.llvm_lanes.span_load`. Under
        a mask, one masked load of ``n * stride`` contiguous elements whose mask holds exactly
        the active lanes' elements (it touches nothing that the gather would not), and a shuffle
        that keeps every ``stride``-th."""
        st, kind = how
        n, t = self.n, e.buffer.dtype
        wide = ir.VectorType(vt.element, n * st)

        def access():
            ptr = self.owner.address(e.buffer, e.indices)  # at lane 0 of the chunk
            if self.mask is None:
                return span_load(self.raw, ptr, vt, st, t.itemsize, shuffle_bits() // t.bits)
            # lane i's element is wide lane i * stride; the others stay off
            off = ir.Constant(ir.VectorType(I1, n), [0] * n)
            pick = [j // st if j % st == 0 else n for j in range(n * st)]
            wmask = self.raw.shuffle_vector(self.mask, off,
                                            ir.Constant(ir.VectorType(I32, n * st), pick))
            w = self.masked("load", wide, [ptr, I32(t.itemsize), wmask, ir.Constant(wide, 0)],
                            wide, PTR)
            return self.raw.shuffle_vector(w, ir.Constant(wide, ir.Undefined), ir.Constant(
                ir.VectorType(I32, n), [i * st for i in range(n)]))
        return access() if kind == "plain" else self.when_any_lane(access)

    def when_any_lane(self, fn):
        """``fn()`` in a block that runs only when some lane of the mask is active; its value, or
        zero when none is (None when ``fn`` returns None)."""
        b, owner = self.raw, self.owner
        pre = b.block
        then, done = b.append_basic_block("any.lane"), b.append_basic_block("any.end")
        b.cbranch(self.any_lane(), then, done)
        b.position_at_end(then)
        saved = owner.cache, self.cache
        owner.cache, self.cache = dict(saved[0]), dict(saved[1])  # made here: not dominating after
        v = fn()
        owner.cache, self.cache = saved
        end = b.block
        b.branch(done)
        b.position_at_end(done)
        if v is None:
            return None
        phi = b.phi(v.type)
        phi.add_incoming(v, end)
        phi.add_incoming(ir.Constant(v.type, 0), pre)
        return phi

    def lane_address(self, buf, indices) -> ir.Value:
        """``<n x ptr>`` to ``buf[indices]`` per lane (ExprEmitter.address on vector indices)."""
        gep = super().address(buf, indices)
        # llvmlite types a GEP by its base; a vector index vectorizes it
        gep.type = ir.VectorType(PTR, self.n)
        return gep

    def select(self, e) -> ir.Value:
        loads = self.has_load(e.t) or self.has_load(e.f)
        if not self.varying(e.cond) and (self.mask is None or not self.has_load(e.cond)):
            c = self.owner.expr(e.cond)
            if not loads:
                return self.raw.select(c, self.expr(e.t), self.expr(e.f))
            return self.branch_select(c, lambda: self.expr(e.t), lambda: self.expr(e.f))
        if loads and self.n >= MIN_INTERVAL_LANES and self.interval(e.cond):
            # a padding copy's interior: every lane takes the true arm, without masks
            return self.branch_select(self.ends_hold(e.cond), lambda: self.expr(e.t),
                                      lambda: self.masked_select(e))
        return self.masked_select(e)

    def masked_select(self, e) -> ir.Value:
        m = self.expr(e.cond)
        if not (self.has_load(e.t) or self.has_load(e.f)):
            return self.b.select(m, self.expr(e.t), self.expr(e.f))
        # lazy per lane: each arm's loads only for the lanes that choose it
        t = self.under(m, lambda: self.expr(e.t))
        f = self.under(self.raw.not_(m), lambda: self.expr(e.f))
        return self.b.select(m, t, f)

    def interval(self, cond: Expr) -> bool:
        """Whether ``cond``'s lanes form one interval (:func:`.vector_plan.interval_condition`)."""
        r = self._intervals.get(id(cond))
        if r is None:
            r = self._intervals[id(cond)] = interval_condition(cond, self.lane)
        return r

    def ends_hold(self, cond: Expr) -> ir.Value:
        """``i1``: ``cond`` (an :meth:`interval` condition) holds on the chunk's first and last
        lane, so on all of them; computed in scalar."""
        owner = self.owner
        first = owner.expr(cond)  # the owner evaluates the lane variable at the first lane
        saved, owner.cache = owner.cache, {}
        self.vars[id(self.lane)] = self.raw.add(self.base, self.base.type(self.n - 1))
        try:
            last = owner.expr(cond)
        finally:
            self.vars[id(self.lane)], owner.cache = self.base, saved
        return self.raw.and_(first, last)

    def branch_select(self, c: ir.Value, t_fn, f_fn) -> ir.Value:
        """``t_fn()`` where the scalar ``c`` holds, else ``f_fn()``, as branches and a phi."""
        b, owner = self.raw, self.owner
        blocks = (b.append_basic_block("vsel.t"), b.append_basic_block("vsel.f"))
        merge = b.append_basic_block("vsel.end")
        b.cbranch(c, *blocks)
        outer, oouter = self.cache, owner.cache
        incoming = []
        for block, arm in zip(blocks, (t_fn, f_fn)):
            b.position_at_end(block)
            self.cache, owner.cache = dict(outer), dict(oouter)
            incoming.append((arm(), b.block))
            b.branch(merge)
        self.cache, owner.cache = outer, oouter
        b.position_at_end(merge)
        phi = b.phi(incoming[0][0].type)
        for value, block in incoming:
            phi.add_incoming(value, block)
        return phi

    # ------------------------------------------------------------------ statements

    _STMT = {Seq: "emit_seq", Store: "store", IfThenElse: "emit_if", For: "inner_loop"}

    def stmt(self, s: Stmt) -> None:
        name = dispatch(self._STMT, s)
        if name is None:  # vector_plan rejects these
            raise TypeError(f"cannot vectorize statement {type(s).__name__}")
        getattr(self, name)(s)

    def emit_seq(self, s: Seq) -> None:
        for c in s.stmts:
            self.stmt(c)

    def store(self, s: Store) -> None:
        self.reset()
        t = s.buffer.dtype
        v = self.expr(s.value)
        if t.is_bool:
            v = self.b.zext(v, I8)
        how = self.unit_stride(s.buffer, s.indices)
        if how is not None:
            def access():
                ptr = self.owner.address(s.buffer, s.indices)
                if self.mask is None:
                    self.raw.store(v, ptr, align=t.itemsize)
                else:
                    self.masked("store", ir.VoidType(), [v, ptr, I32(t.itemsize), self.mask],
                                v.type, PTR)
            if how == "plain":
                access()
            else:
                self.when_any_lane(access)
        else:  # distinct addresses per lane (vector_plan): a scatter is exact
            ptrs = self.lane_address(s.buffer, s.indices)
            self.masked("scatter", ir.VoidType(), [v, ptrs, I32(t.itemsize),
                                                   self.mask or self.all_true()], v.type, ptrs.type)

    def emit_if(self, s: IfThenElse) -> None:
        self.reset()
        if not self.varying(s.cond) and (self.mask is None or not self.has_load(s.cond)):
            c = self.owner.expr(s.cond)
            if s.else_ is None:
                with self.raw.if_then(c):
                    self.stmt(s.then)
            else:
                with self.raw.if_else(c) as (then, otherwise):
                    with then:
                        self.stmt(s.then)
                    with otherwise:
                        self.stmt(s.else_)
            return
        if self.n >= MIN_INTERVAL_LANES and self.interval(s.cond):
            # a guarded tail's full chunks run without masks
            with self.raw.if_else(self.ends_hold(s.cond)) as (then, otherwise):
                with then:
                    self.stmt(s.then)
                    self.reset()
                with otherwise:
                    self.masked_if(s)
            return
        self.masked_if(s)

    def masked_if(self, s: IfThenElse) -> None:
        m = self.expr(s.cond)
        self.under(m, lambda: self.stmt(s.then))
        if s.else_ is not None:
            self.under(self.raw.not_(m), lambda: self.stmt(s.else_))
        self.reset()

    def inner_loop(self, s: For) -> None:
        """A loop inside the vectorized one: a scalar loop whose body is vector code."""
        self.reset()
        if self.mask is not None and (self.has_load(s.begin) or self.has_load(s.extent)):
            # bounds that load (sparse rows) are read only when some lane runs the loop
            self.when_any_lane(lambda: self.scalar_loop(s))
        else:
            self.scalar_loop(s)

    def scalar_loop(self, s: For) -> None:
        from .llvm_cpu import MAX_EMIT_UNROLL
        owner, vt = self.owner, reg_type(s.var.dtype)
        begin = owner.int_to(owner.expr(s.begin), s.begin.dtype, vt)
        if s.kind is ForKind.UNROLLED and isinstance(s.extent, Const) \
                and s.extent.value <= MAX_EMIT_UNROLL:
            for k in range(max(0, s.extent.value)):
                self.vars[id(s.var)] = self.raw.add(begin, vt(k), flags=["nsw"]) if k else begin
                self.stmt(s.body)
            self.vars.pop(id(s.var), None)
            return
        extent = owner.int_to(owner.expr(s.extent), s.extent.dtype, vt)

        def body(iv):
            self.vars[id(s.var)] = iv
            self.stmt(s.body)
            del self.vars[id(s.var)]
        counted(self.raw, begin, self.raw.add(begin, extent), ident(s.var.name), body)

    def at_lanes(self, n: int, base: ir.Value, emit):
        """``emit()``'s result with the loop variable at lanes ``base .. base + n - 1``."""
        self.n, self.mask = n, None
        vt = reg_type(self.lane.dtype)
        self.lane_vec = self.raw.add(self.splat(base), ir.Constant(ir.VectorType(vt, n), list(range(n))))
        self.base = base
        self.vars[id(self.lane)] = base  # the owner computes unit-stride addresses at lane 0
        try:
            return emit()
        finally:
            del self.vars[id(self.lane)]
            self.reset()


def emit_vector_loop(owner, s: For) -> bool:
    """Emit the vectorized loop ``s`` as vector code at ``owner``'s position (a ``StmtEmitter``);
    False, with nothing emitted, when :func:`vector_plan` finds it cannot be done exactly."""
    plans = owner.__dict__.setdefault("_vector_plans", {})  # unrolled loops emit a loop repeatedly
    if id(s) not in plans:
        plans[id(s)] = (s, vector_plan(s)[0])  # the entry keeps s alive, so its id stays its own
    lanes = plans[id(s)][1]
    if lanes is None:
        return False
    extent = s.extent.value
    if extent <= 0:
        return True
    vt = reg_type(s.var.dtype)
    begin = owner.int_to(owner.stmt_expr(s.begin), s.begin.dtype, vt)
    em = VectorEmitter(owner, s)
    def chunk(n, base):  # the body for lanes base .. base + n - 1
        em.at_lanes(n, base, lambda: em.stmt(s.body))
    full, rest = divmod(extent, lanes)
    b = owner.b
    if full <= MAX_CHUNKS_UNROLLED:
        for c in range(full):
            chunk(lanes, b.add(begin, vt(c * lanes), flags=["nsw"]) if c else begin)
    else:
        counted(b, vt(0), vt(full), f"{ident(s.var.name)}.vec",
                lambda c: chunk(lanes, b.add(begin, b.mul(c, vt(lanes), flags=["nsw"]),
                                                 flags=["nsw"])))
    if rest:
        chunk(rest, b.add(begin, vt(full * lanes), flags=["nsw"]))
    owner.cache = {}
    return True
