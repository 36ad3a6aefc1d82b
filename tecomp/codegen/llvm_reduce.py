"""A serial reduction loop as vector code: ``for k: Y[idx] = op(Y[idx], e(k))`` with ``idx``
invariant in ``k`` and ``op`` a sum, min or max.

The scalar loop is one dependency chain: every iteration waits for the last one's add or min.
That is the last step of every rfactor sketch (a row's 16-64 partials reduced into one value:
softmax, layer normalization, row minima) and the whole of a reduction left innermost; measured
on the Zen 4 host, a row minimum over 4096 x 512 values ran 0.110 ms against torch's 0.070, the
64-step chain of each row's partials taking most of it. Here ``e`` is evaluated for a register's
worth of lanes at a time (:class:`.llvm_vector.VectorEmitter`, so loads are vector loads or
gathers and conditions masks), into up to :data:`ACCUMULATORS` independent vector
accumulators, and the lanes are combined by halving at the end.

Min and max give the same result in any order. A float sum is reassociated, as any vectorized
or parallel sum is (BLAS, numpy's pairwise summation); its rounding differs from the scalar
loop's in the last bits, and is usually closer to the exact sum.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir import dtype as dt
from ..ir.expr import BinOp, BinOpKind, Const, Load
from ..ir.loop import For, Store
from ..ir.traverse import structural_key, walk
from .llvm_expr import FAST, I32, ident, reg_type
from .llvm_vector import VectorEmitter, register_bits

__all__ = ["reduction_form", "emit_reduction_loop"]

#: independent vector accumulators of a long loop (hides the latency of the add or min)
ACCUMULATORS = 4
#: a loop of fewer iterations, or a register of fewer lanes, stays scalar
MIN_LANES = 4
_OPS = (BinOpKind.ADD, BinOpKind.MIN, BinOpKind.MAX)
_TYPES = (dt.float32, dt.float64, dt.int32, dt.int64)


def _key(indices) -> tuple:
    return tuple(structural_key(i, id) for i in indices)


def reduction_form(s: For):
    """``(store, op, accumulator load, operand)`` when loop ``s`` is a reduction into one
    element (see the module docstring), else None."""
    st = s.body
    if not isinstance(s.extent, Const) or s.extent.value < MIN_LANES or not isinstance(st, Store):
        return None
    v = st.value
    if not isinstance(v, BinOp) or v.op not in _OPS or v.dtype not in _TYPES \
            or st.buffer.dtype is not v.dtype:
        return None
    lane = s.var

    def uses_lane(e) -> bool:
        return any(x is lane for x in walk(e))

    if any(uses_lane(i) for i in st.indices):
        return None
    key = _key(st.indices)
    for acc, e in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, Load) and acc.buffer is st.buffer and _key(acc.indices) == key:
            break
    else:
        return None
    if not uses_lane(e) or any(isinstance(x, Load) and x.buffer is st.buffer for x in walk(e)):
        return None
    return st, v.op, acc, e


def _combine(em, op: BinOpKind, t: dt.DType, a: ir.Value, c: ir.Value) -> ir.Value:
    b = em.raw
    if t.is_float:
        if op is BinOpKind.ADD:
            return b.fadd(a, c, flags=FAST)
        return em.call_intr("llvm.minimum" if op is BinOpKind.MIN else "llvm.maximum", a, c)
    if op is BinOpKind.ADD:
        return b.add(a, c)
    return em.call_intr("llvm.smin" if op is BinOpKind.MIN else "llvm.smax", a, c)


def _halve(em, op, t, v: ir.Value) -> ir.Value:
    """The lanes of vector ``v`` combined into a scalar, by halves."""
    b = em.raw
    n = v.type.count
    odd = []
    while n > 2:
        h = n // 2
        if n % 2:
            odd.append(b.extract_element(v, I32(n - 1)))
        undef = ir.Constant(v.type, ir.Undefined)
        lo = b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, h), list(range(h))))
        hi = b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, h), list(range(h, 2 * h))))
        v = _combine(em, op, t, lo, hi)
        n = h
    r = b.extract_element(v, I32(0))
    if n == 2:
        r = _combine(em, op, t, r, b.extract_element(v, I32(1)))
    for x in odd:
        r = _combine(em, op, t, r, x)
    return r


def _chunk(em: VectorEmitter, e, n: int, base: ir.Value) -> ir.Value:
    """``e`` for lanes ``base .. base + n - 1`` as an ``n``-lane vector."""
    return em.at_lanes(n, base, lambda: em.expr(e))


def _tree(em, op, t, vals: list) -> ir.Value:
    while len(vals) > 1:
        vals = [_combine(em, op, t, vals[k], vals[k + 1]) if k + 1 < len(vals) else vals[k]
                for k in range(0, len(vals), 2)]
    return vals[0]


def _tracks_nan(op, t) -> bool:
    return t.is_float and op is not BinOpKind.ADD


def _first(em, op, t, x: ir.Value) -> list:
    """An accumulator holding chunk ``x``: ``[value]``, or ``[value, NaN lanes]`` for a float
    min or max, whose steps compare and select (:func:`_step`)."""
    if _tracks_nan(op, t):
        return [x, em.raw.fcmp_unordered("uno", x, x)]
    return [x]


def _step(em, op, t, acc: list, x: ir.Value) -> list:
    """``acc`` combined with chunk ``x``. A float min/max selects by an ordered compare (one
    vminps/vmaxps: ``llvm.minimum`` is six dependent instructions on AVX-512, its NaN and
    signed-zero rules) and collects NaN lanes on the side, folded in by :func:`_value`; the
    sign of a zero minimum may then differ from ``llvm.minimum``'s."""
    b = em.raw
    if not _tracks_nan(op, t):
        return [_combine(em, op, t, acc[0], x)]
    better = b.fcmp_ordered("<" if op is BinOpKind.MIN else ">", x, acc[0])
    return [b.select(better, x, acc[0]), b.or_(acc[1], b.fcmp_unordered("uno", x, x))]


def _value(em, acc: list) -> ir.Value:
    if len(acc) == 1:
        return acc[0]
    v = acc[0]
    return em.raw.select(acc[1], ir.Constant(v.type, [float("nan")] * v.type.count), v)


def emit_reduction_loop(owner, s: For) -> bool:
    """Emit loop ``s`` as a vector reduction at ``owner``'s position (the CPU statement emitter);
    False, with nothing emitted, when it is not one (:func:`reduction_form`)."""
    form = reduction_form(s)
    if form is None:
        return False
    st, op, acc, e = form
    t = st.buffer.dtype
    widest = max([t.itemsize] + [x.dtype.itemsize for x in walk(e) if isinstance(x, Load)])
    n = s.extent.value
    lanes = min(register_bits() // (8 * widest), n)
    if lanes < MIN_LANES:
        return False
    b = owner.b
    it = reg_type(s.var.dtype)
    begin = owner.int_to(owner.stmt_expr(s.begin), s.begin.dtype, it)
    em = VectorEmitter(owner, s)
    full, rest = divmod(n, lanes)
    groups, single = divmod(full, ACCUMULATORS) if full > 2 * ACCUMULATORS else (0, full)

    def chunk_at(base, j, m=lanes):
        return _chunk(em, e, m, b.add(base, it(j * lanes), flags=["nsw"]) if j else base)

    accs = []
    if groups:  # a loop over groups of ACCUMULATORS chunks, one accumulator per chunk
        name = ident(s.var.name)
        head = b.append_basic_block(f"{name}.red.head")
        body = b.append_basic_block(f"{name}.red.body")
        exit_ = b.append_basic_block(f"{name}.red.exit")
        first = [_first(em, op, t, chunk_at(begin, j)) for j in range(ACCUMULATORS)]
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        g = b.phi(it, name=f"{name}.g")
        g.add_incoming(it(1), pre)
        phis = []
        for a in first:
            ps = []
            for v in a:
                p = b.phi(v.type)
                p.add_incoming(v, pre)
                ps.append(p)
            phis.append(ps)
        b.cbranch(b.icmp_signed("<", g, it(groups)), body, exit_)
        b.position_at_end(body)
        base = b.add(begin, b.mul(g, it(ACCUMULATORS * lanes), flags=["nsw"]), flags=["nsw"])
        nxt = [_step(em, op, t, ps, chunk_at(base, j)) for j, ps in enumerate(phis)]
        g.add_incoming(b.add(g, it(1), flags=["nsw"]), b.block)
        for ps, vs in zip(phis, nxt):
            for p, v in zip(ps, vs):
                p.add_incoming(v, b.block)
        b.branch(head)
        b.position_at_end(exit_)
        accs = [_value(em, ps) for ps in phis]
    done = groups * ACCUMULATORS
    accs += [chunk_at(begin, done + j) for j in range(single)]
    total = _halve(em, op, t, _tree(em, op, t, accs)) if accs else None
    if rest:
        r = _halve(em, op, t, chunk_at(begin, full, rest))
        total = r if total is None else _combine(em, op, t, total, r)
    owner.cache = {}
    # the element once: its value before the loop combined with the lanes' result
    value = _combine(em, op, t, owner.stmt_expr(acc), total)
    b.store(value, owner.address(st.buffer, st.indices), align=t.itemsize)
    owner.cache = {}
    return True
