"""Vectorized loops for the CPU emitter: a ``ForKind.VECTORIZED`` loop becomes LLVM vector code.

The loop's iterations run as lanes: chunks of the register width in elements (``register_bits()``
over the widest element the body accesses), the last chunk a smaller vector when the extent does
not divide. In the body, expressions that depend on the loop variable are ``<n x T>`` vectors,
invariant ones scalars broadcast where they meet vectors. A load or store whose flat address is
affine in the loop variable with stride 1 is a vector load/store, an invariant address a scalar load,
anything else a gather/scatter. Conditions that depend on the lane become masks (masked loads and
stores, lane-wise selects); invariant ones stay branches. Inner loops run as scalar loops of vector
values.

Per-operation semantics are those of the scalar emitter: :class:`VectorEmitter` reuses
:class:`.llvm_expr.ExprEmitter`'s methods, with a builder that lifts their scalar types and
constants to the lane count. Vector execution runs statement by statement over all lanes instead of
lane by lane, so it is exact only when lanes do not share memory that one of them writes;
:func:`vector_plan` checks that (and everything else this emitter needs) and the caller falls back
to the scalar loop otherwise.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir import dtype as dt
from ..ir.arith import to_linear
from ..ir.expr import BinOpKind, Const, Expr, Load, Var, binary, cast, walk
from ..ir.loop import For, ForKind, IfThenElse, Seq, Stmt, Store
from .llvm_expr import I1, I8, I32, I64, PTR, ExprEmitter, ident, mem_type, reg_type
from .llvm_jit import host_cpu

__all__ = ["register_bits", "vector_plan", "emit_vector_loop", "VectorEmitter"]

#: full-width chunks up to this many are emitted one after another, more as a loop
MAX_CHUNKS_UNROLLED = 4
_INNER = (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED)


def register_bits() -> int:
    """Width in bits of the host's vector registers (from LLVM's feature string)."""
    feats = set(host_cpu()[1].split(","))
    if "+avx512f" in feats:
        return 512
    if "+avx2" in feats:
        return 256
    return 128


# ----------------------------------------------------------------------------- analysis

def _uses(e: Expr, vs) -> bool:
    ids = {id(v) for v in vs}
    return any(isinstance(x, Var) and id(x) in ids for x in walk(e))


def access_form(buf, indices, lane: Var):
    """``(linear form of the flat address, lane stride)``; the stride is None when the address is not
    affine in ``lane`` (the lane occurs inside a non-linear or data-dependent part)."""
    flat = Const(0, dt.INDEX)
    for ix, st in zip(indices, buf.strides):
        flat = binary(BinOpKind.ADD, flat, binary(BinOpKind.MUL, cast(ix, dt.INDEX), st))
    lin = to_linear(flat)
    stride = 0
    for atom, coef in lin.terms.values():
        if atom is lane:
            stride = coef
        elif _uses(atom, (lane,)):
            return lin, None
    return lin, stride


class _NotVectorizable(Exception):
    pass


def vector_plan(s: For, reg_bits: int | None = None):
    """``(lanes, None)`` when loop ``s`` can be emitted as vector code of ``lanes`` lanes per chunk,
    else ``(None, reason)``."""
    if not isinstance(s.extent, Const):
        return None, "extent is not constant"
    lane, inner = s.var, set()
    accesses: dict = {}  # buffer -> [(indices, is_store)]
    try:
        _scan(s.body, lane, inner, accesses)
        for buf, acc in accesses.items():
            if any(w for _, w in acc):
                _check_private(buf, acc, lane, inner, s.extent.value)
    except _NotVectorizable as e:
        return None, str(e)
    widest = max((b.dtype.itemsize for b in accesses), default=4)
    lanes = max(1, (reg_bits or register_bits()) // (8 * widest))
    return max(1, min(lanes, s.extent.value)), None


def _scan(st: Stmt, lane, inner: set, accesses: dict) -> None:
    def see(e: Expr):
        for x in walk(e):
            if isinstance(x, Load):
                accesses.setdefault(x.buffer, []).append((x.indices, False))

    if isinstance(st, Seq):
        for c in st.stmts:
            _scan(c, lane, inner, accesses)
    elif isinstance(st, Store):
        accesses.setdefault(st.buffer, []).append((st.indices, True))
        for e in (*st.indices, st.value):
            see(e)
    elif isinstance(st, IfThenElse):
        see(st.cond)
        for c in st.children():
            _scan(c, lane, inner, m, accesses)
    elif isinstance(st, For):
        if st.kind not in _INNER:
            raise _NotVectorizable(f"a {st.kind.value} loop inside")
        for e in (st.begin, st.extent):
            if _uses(e, (lane,)):
                raise _NotVectorizable(f"bounds of loop '{st.var.name}' depend on the lane")
            see(e)
        inner.add(st.var)
        _scan(st.body, lane, inner, accesses)
    else:  # allocations (per-lane storage), barriers, anything new
        raise _NotVectorizable(f"{type(st).__name__} inside")


def _check_private(buf, acc: list, lane, inner: set, extent: int) -> None:
    """A buffer written in the loop: every access must address ``base + stride * lane`` with one
    stride != 0 and bases whose difference never maps one lane onto another's element, so that each
    element is touched by a single lane and the statement order across lanes does not matter."""
    forms = []
    for indices, _ in acc:
        lin, stride = access_form(buf, indices, lane)
        if not stride:
            raise _NotVectorizable(f"'{buf.name}' is written and accessed at a lane-invariant or "
                                   f"non-affine address")
        if any(atom is not lane and _uses(atom, inner) for atom, _ in lin.terms.values()):
            raise _NotVectorizable(f"'{buf.name}' is written at an address that moves with an "
                                   f"inner loop")
        forms.append((lin, stride))
    lin0, s0 = forms[0]
    for lin, _ in forms[1:]:
        diff = lin.add(lin0, -1)
        if not diff.is_const:
            raise _NotVectorizable(f"accesses of '{buf.name}' at unrelated addresses")
        d = diff.const
        if d and d % s0 == 0 and abs(d // s0) < extent:
            raise _NotVectorizable(f"lanes of '{buf.name}' overlap (offset {d})")


# ----------------------------------------------------------------------------- emission

def vtype(t: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(t, n)


def intrinsic_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        el = t.element
        return f"v{t.count}" + ("p0" if isinstance(el, ir.PointerType) else el.intrinsic_name)
    return t.intrinsic_name


class _LaneBuilder:
    """The IRBuilder ``b`` for :class:`ExprEmitter` methods given vector operands: a scalar target
    type of a cast becomes the vector type, scalar operands next to vector ones are broadcast."""

    _CASTS = {"trunc", "zext", "sext", "fptrunc", "fpext", "sitofp", "uitofp", "fptosi", "fptoui",
              "bitcast"}
    _OPS = {"add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "and_", "or_", "xor", "shl", "ashr",
            "lshr", "fadd", "fsub", "fmul", "fdiv", "frem", "select", "icmp_signed",
            "icmp_unsigned", "fcmp_ordered", "fcmp_unordered"}

    def __init__(self, b: ir.IRBuilder, splat):
        self._b, self._splat = b, splat

    def __getattr__(self, name):
        fn = getattr(self._b, name)
        if name in self._CASTS:
            def lifted_cast(v, typ, name=""):
                if isinstance(v.type, ir.VectorType) and not isinstance(typ, ir.VectorType):
                    typ = vtype(typ, v.type.count)
                return fn(v, typ, name)
            return lifted_cast
        if name in self._OPS:
            def lifted_op(*args, **kw):
                n = next((a.type.count for a in args if isinstance(a, ir.Value)
                          and isinstance(a.type, ir.VectorType)), None)
                if n is not None:
                    args = [self._splat(a, n) if isinstance(a, ir.Value) and not
                            isinstance(a.type, ir.VectorType) else a for a in args]
                return fn(*args, **kw)
            return lifted_op
        return fn


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
        self.b = _LaneBuilder(owner.b, self.splat)
        self.vars, self.bufs, self.strides = owner.vars, owner.bufs, owner.strides
        self.n = 1
        self.mask = None
        self.lane_vec = None
        self._varying: dict = {}
        self._forms: dict = {}

    # ------------------------------------------------------------------ helpers

    def splat(self, x: ir.Value, n: int | None = None) -> ir.Value:
        n = self.n if n is None else n
        vt = vtype(x.type, n)
        if isinstance(x, ir.Constant):
            return ir.Constant(vt, x)
        b = self.raw
        v = b.insert_element(ir.Constant(vt, ir.Undefined), x, I32(0))
        return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(vtype(I32, n), [0] * n))

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

    def and_mask(self, m: ir.Value) -> ir.Value:
        return m if self.mask is None else self.raw.and_(self.mask, m)

    def any_lane(self) -> ir.Value:
        m = self.mask
        return self.raw.call(self.declare(f"llvm.vector.reduce.or.{intrinsic_suffix(m.type)}", I1,
                                          [m.type]), [m])

    def masked(self, name: str, ret: ir.Type, args: list) -> ir.Value:
        """Call ``llvm.masked.<name>`` (alignment as an i32 argument; LLVM 22 upgrades it)."""
        vt = args[0].type if name in ("store", "scatter") else ret
        sfx = intrinsic_suffix(vt) + "." + (intrinsic_suffix(args[1 if name == "scatter" else 0].type)
                                            if name in ("gather", "scatter") else "p0")
        fn = self.declare(f"llvm.masked.{name}.{sfx}", ret, [a.type for a in args])
        return self.raw.call(fn, args)

    def all_true(self) -> ir.Value:
        return ir.Constant(vtype(I1, self.n), [1] * self.n)

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
            v = self.cache[k] = getattr(self, self._dispatch(e))(e)
        return v

    def _dispatch(self, e: Expr) -> str:
        for cls in type(e).__mro__:
            if cls in self._EXPR:
                return self._EXPR[cls]
        raise TypeError(f"cannot compile expression node {type(e).__name__} for CPU")

    def var(self, e: Var) -> ir.Value:
        if e is self.lane:
            return self.lane_vec
        return self.splat(super().var(e))

    def const(self, e: Const) -> ir.Value:
        return self.splat(super().const(e))

    def load(self, e: Load) -> ir.Value:
        t, stride = e.buffer.dtype, self.stride(e.buffer, e.indices)
        mt = mem_type(t)
        if not self.varying(e):  # invariant address under a mask: load once if any lane is active
            return self.splat(self.guarded_scalar_load(e))
        idx_loads = any(self.has_load(ix) for ix in e.indices)
        if stride == 1 and (self.mask is None or not idx_loads):
            ptr = self.owner.address(e.buffer, e.indices)  # at lane 0 of the chunk
            if self.mask is None:
                v = self.raw.load(ptr, typ=vtype(mt, self.n), align=t.itemsize)
            else:
                v = self.masked("load", vtype(mt, self.n),
                                [ptr, I32(t.itemsize), self.mask, ir.Constant(vtype(mt, self.n), 0)])
        else:
            ptrs = self.lane_address(e.buffer, e.indices)
            # zero, not poison, in inactive lanes: they may reach a division's zero guard
            v = self.masked("gather", vtype(mt, self.n),
                            [ptrs, I32(t.itemsize), self.mask or self.all_true(),
                             ir.Constant(vtype(mt, self.n), 0)])
        return self.b.icmp_unsigned("!=", v, I8(0)) if t.is_bool else v

    def guarded_scalar_load(self, e: Load) -> ir.Value:
        b, owner = self.raw, self.owner
        pre = b.block
        then, done = b.append_basic_block("ld.any"), b.append_basic_block("ld.end")
        b.cbranch(self.any_lane(), then, done)
        b.position_at_end(then)
        saved = owner.cache
        owner.cache = dict(saved)  # values made in this block do not dominate the rest
        v = ExprEmitter.load(owner, e)
        owner.cache = saved
        end = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(v.type)
        phi.add_incoming(v, end)
        phi.add_incoming(v.type(0), pre)
        return phi

    def lane_address(self, buf, indices) -> ir.Value:
        """``<n x ptr>`` to ``buf[indices]`` per lane (ExprEmitter.address on vector indices)."""
        gep = super().address(buf, indices)
        gep.type = vtype(PTR, self.n)  # llvmlite types a GEP by its base; a vector index vectorizes it
        return gep

    def select(self, e) -> ir.Value:
        loads = self.has_load(e.t) or self.has_load(e.f)
        if not self.varying(e.cond) and (self.mask is None or not self.has_load(e.cond)):
            c = self.owner.expr(e.cond)
            if not loads:
                return self.raw.select(c, self.expr(e.t), self.expr(e.f))
            return self.branch_select(c, e)
        m = self.expr(e.cond)
        if not loads:
            return self.b.select(m, self.expr(e.t), self.expr(e.f))
        # lazy per lane: each arm's loads only for the lanes that choose it
        outer = self.mask
        self.mask = self.and_mask(m)
        t = self.expr(e.t)
        self.mask = outer
        self.mask = self.and_mask(self.raw.not_(m))
        f = self.expr(e.f)
        self.mask = outer
        return self.b.select(m, t, f)

    def branch_select(self, c: ir.Value, e) -> ir.Value:
        b, owner = self.raw, self.owner
        blocks = (b.append_basic_block("vsel.t"), b.append_basic_block("vsel.f"))
        merge = b.append_basic_block("vsel.end")
        b.cbranch(c, *blocks)
        outer, oouter = self.cache, owner.cache
        incoming = []
        for block, arm in zip(blocks, (e.t, e.f)):
            b.position_at_end(block)
            self.cache, owner.cache = dict(outer), dict(oouter)
            incoming.append((self.expr(arm), b.block))
            b.branch(merge)
        self.cache, owner.cache = outer, oouter
        b.position_at_end(merge)
        phi = b.phi(incoming[0][0].type)
        for value, block in incoming:
            phi.add_incoming(value, block)
        return phi

    # ------------------------------------------------------------------ statements

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, IfThenElse):
            self.emit_if(s)
        elif isinstance(s, For):
            self.inner_loop(s)
        else:
            raise TypeError(f"cannot vectorize statement {type(s).__name__}")  # vector_plan rejects

    def store(self, s: Store) -> None:
        self.reset()
        t = s.buffer.dtype
        v = self.expr(s.value)
        if t.is_bool:
            v = self.b.zext(v, I8)
        stride = self.stride(s.buffer, s.indices)
        idx_loads = any(self.has_load(ix) for ix in s.indices)
        if stride == 1 and (self.mask is None or not idx_loads):
            ptr = self.owner.address(s.buffer, s.indices)
            if self.mask is None:
                self.raw.store(v, ptr, align=t.itemsize)
            else:
                self.masked("store", ir.VoidType(), [v, ptr, I32(t.itemsize), self.mask])
        else:  # distinct addresses per lane (vector_plan): a scatter is exact
            ptrs = self.lane_address(s.buffer, s.indices)
            self.masked("scatter", ir.VoidType(),
                        [v, ptrs, I32(t.itemsize), self.mask or self.all_true()])

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
        m = self.expr(s.cond)
        outer = self.mask
        self.mask = self.and_mask(m)
        self.stmt(s.then)
        if s.else_ is not None:
            self.mask = outer
            self.mask = self.and_mask(self.raw.not_(m))
            self.stmt(s.else_)
        self.mask = outer

    def inner_loop(self, s: For) -> None:
        """A loop inside the vectorized one: a scalar loop whose body is vector code."""
        self.reset()
        if self.mask is not None and (self.has_load(s.begin) or self.has_load(s.extent)):
            # bounds that load (sparse rows) are read only when some lane runs the loop
            with self.raw.if_then(self.any_lane()):
                self.scalar_loop(s)
            self.reset()
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

    def chunk(self, n: int, base: ir.Value) -> None:
        """The body for lanes ``base .. base + n - 1``, all active."""
        self.n, self.mask = n, None
        vt = reg_type(self.lane.dtype)
        self.lane_vec = self.raw.add(self.splat(base), ir.Constant(vtype(vt, n), list(range(n))))
        self.vars[id(self.lane)] = base  # the owner computes unit-stride addresses at lane 0
        try:
            self.stmt(self.loop.body)
        finally:
            del self.vars[id(self.lane)]
            self.reset()


def counted(b: ir.IRBuilder, begin: ir.Value, end: ir.Value, name: str, body) -> None:
    """``for iv in [begin, end)``: head/body/exit blocks; ``body(iv)`` emits the body."""
    pre = b.block
    head = b.append_basic_block(f"{name}.head")
    blk = b.append_basic_block(f"{name}.body")
    exit_ = b.append_basic_block(f"{name}.exit")
    b.branch(head)
    b.position_at_end(head)
    iv = b.phi(begin.type, name=name)
    iv.add_incoming(begin, pre)
    b.cbranch(b.icmp_signed("<", iv, end), blk, exit_)
    b.position_at_end(blk)
    body(iv)
    iv.add_incoming(b.add(iv, begin.type(1), flags=["nsw"]), b.block)
    b.branch(head)
    b.position_at_end(exit_)


def emit_vector_loop(owner, s: For) -> bool:
    """Emit the vectorized loop ``s`` as vector code at ``owner``'s position (a ``StmtEmitter``);
    False, with nothing emitted, when :func:`vector_plan` finds it cannot be done exactly."""
    lanes, _ = vector_plan(s)
    if lanes is None:
        return False
    extent = s.extent.value
    if extent <= 0:
        return True
    vt = reg_type(s.var.dtype)
    begin = owner.int_to(owner.stmt_expr(s.begin), s.begin.dtype, vt)
    em = VectorEmitter(owner, s)
    full, rest = divmod(extent, lanes)
    b = owner.b
    if full <= MAX_CHUNKS_UNROLLED:
        for c in range(full):
            em.chunk(lanes, b.add(begin, vt(c * lanes), flags=["nsw"]) if c else begin)
    else:
        counted(b, vt(0), vt(full), f"{ident(s.var.name)}.vec",
                lambda c: em.chunk(lanes, b.add(begin, b.mul(c, vt(lanes), flags=["nsw"]),
                                                 flags=["nsw"])))
    if rest:
        em.chunk(rest, b.add(begin, vt(full * lanes), flags=["nsw"]))
    owner.cache = {}
    return True
