"""Transposing copies as register transposes: ``dst[..] = src[..]`` over two nested loops, the
source contiguous along one loop and the destination along the other.

A packed operand's copy is one: ``A.global[i // 8, k, i % 8] = A[i, k]`` (a matmul's row panels),
a conv weight's output channels moved innermost, Q.K^T's ``K[b, j, h, d]`` with ``j`` innermost.
Emitted as two scalar loops, one side of every element is strided, and LLVM's vectorizer turns
the strided stores into scatters or the loads into gathers (or keeps them scalar): on the Zen 4
host the copy of a 256 x 512 matrix into panels of 8 rows ran 59 us with the source's rows
innermost and 17 us with the panel's lanes innermost, and 60 us either way for panels of 16.

Here the two loops run in blocks of ``n`` x ``n`` elements (``n`` a power of two, at most a
register's lanes): ``n`` vector loads along the source's contiguous loop, a transpose in
``log2(n)`` rounds of two-input shuffles, ``n`` vector stores along the destination's. The
elements outside whole blocks run as the loops they were. Only exact copies qualify (no
condition, no arithmetic, distinct buffers, no element written twice), so the order of the
copies does not matter.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir.expr import Const, Load
from ..ir.loop import For, ForKind, Store
from ..ir.traverse import substitute
from .llvm_expr import I1, I32, mem_type, reg_type
from .llvm_lanes import counted, intrinsic_suffix
from .vector_plan import access_form, register_bits

__all__ = ["transpose_plan", "transpose_masks", "emit_transpose_copy", "MIN_BLOCK", "MAX_BLOCK"]

#: the smallest block transposed in registers (smaller ones stay the loops they are), and the
#: largest (a block's vectors and their shuffles live in registers: 16 x 16 floats fill AVX-512's)
MIN_BLOCK, MAX_BLOCK = 4, 16
_OUTER = (ForKind.SERIAL, ForKind.UNROLLED)
_INNER = (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED)


def _const_loop(s, kinds) -> bool:
    return (isinstance(s, For) and s.kind in kinds and isinstance(s.begin, Const)
            and isinstance(s.extent, Const) and s.thread is None)


def copy_nest(s: For) -> For:
    """``s`` as the copy nest :func:`transpose_plan` can match, when ``s`` is a chain of constant
    loops, each the only statement of the one above, down to one copy ``dst[..] = src[..]``:
    without its loops of one iteration (their variables replaced by their first value), and with
    the loop along which the source is contiguous moved in next to the one along which the
    destination is, when the destination's elements are all distinct (the copies may then run in
    any order). Else ``s`` itself. A tile's write-back ``for o { for y { for x {..} } }`` (an
    NCHW conv's output from a tile vectorized along ``o``) becomes ``for y { for o { for x } }``,
    whose inner two loops are a transposing copy."""
    chain, body = [], s
    while isinstance(body, For):
        if not _const_loop(body, tuple(ForKind)):
            return s
        chain.append(body)
        body = body.body
    if not isinstance(body, Store) or not isinstance(body.value, Load):
        return s
    unit = {x.var: x.begin for x in chain if int(x.extent.value) == 1}
    keep = [x for x in chain if int(x.extent.value) != 1]
    if len(keep) < 2:
        return s
    st = Store(body.buffer, tuple(substitute(i, unit) for i in body.indices),
               substitute(body.value, unit))
    order = _contiguous_inner(keep, st) if len(keep) > 2 else keep
    if not unit and order == keep:
        return s
    out = st
    for x in reversed(order):
        out = For(x.var, x.begin, x.extent, x.kind, out, x.thread, x.pragmas)
    return out


def _contiguous_inner(loops: list, st: Store) -> list:
    """``loops`` reordered so that the one along which ``st``'s source is contiguous sits just
    outside the one along which its destination is (the others outside both, in their order);
    ``loops`` as they are when there is no such pair, when a loop other than those two is not
    serial, or when two iterations could write one destination element."""
    ld = st.value
    dst = [access_form(st.buffer, st.indices, x.var)[1] for x in loops]
    src = [access_form(ld.buffer, ld.indices, x.var)[1] for x in loops]
    if any(d is None or r is None for d, r in zip(dst, src)):
        return loops
    q = next((k for k in range(len(loops) - 1, -1, -1) if dst[k] == 1 and src[k] != 0), None)
    p = next((k for k in range(len(loops) - 1, -1, -1) if src[k] == 1 and dst[k] != 1), None)
    if p is None or q is None:
        return loops
    rest = [x for k, x in enumerate(loops) if k not in (p, q)]
    if any(x.kind not in _OUTER for x in rest):
        return loops
    # distinct destination elements: each stride passes the span of the smaller ones
    span = 0
    for d, n in sorted((abs(d), int(x.extent.value)) for d, x in zip(dst, loops)):
        if d <= span:
            return loops
        span += d * (n - 1)
    return rest + [loops[min(p, q)], loops[max(p, q)]]


def transpose_plan(s: For, reg_bits: int):
    """``(p, q, store, n)`` when the loop nest ``s`` is a transposing copy: ``p`` the loop (``s``
    or the one directly inside it) along which the source is contiguous, ``q`` the one along
    which the destination is, ``n`` the block (registers of ``reg_bits`` bits; wider than
    ``q``'s extent when that is below a register's lanes and not a power of two); else None."""
    if not _const_loop(s, _OUTER) or not _const_loop(s.body, _INNER):
        return None
    t, st = s.body, s.body.body
    if not isinstance(st, Store) or not isinstance(st.value, Load):
        return None
    ld = st.value
    if ld.buffer is st.buffer or ld.dtype is not st.buffer.dtype or st.buffer.dtype.is_bool:
        return None
    lanes = min(MAX_BLOCK, reg_bits // (8 * st.buffer.dtype.itemsize))
    strides = {}
    for loop in (s, t):
        _, d = access_form(st.buffer, st.indices, loop.var)
        _, r = access_form(ld.buffer, ld.indices, loop.var)
        if d is None or r is None:
            return None  # not affine in the loop (a data-dependent or divided index)
        strides[loop] = (d, r)
    p = next((x for x in (s, t) if strides[x][1] == 1 and strides[x][0] != 1), None)
    q = t if p is s else s
    if p is None or strides[q][0] != 1 or strides[q][1] == 0:
        return None
    ep, eq = int(p.extent.value), int(q.extent.value)
    if q is t and eq < 2 * MIN_BLOCK:
        return None  # a panel under 8 wide written innermost: LLVM's interleaved stores do it
    # no destination element written twice: the copies may then run in any order
    if abs(strides[p][0]) < eq:
        return None
    n = 1
    while 2 * n <= min(lanes, ep, eq):
        n *= 2
    if n < eq < lanes and 2 * n <= ep:
        n *= 2  # one block wider than the copy along q (a panel of 6 rows), stored under a mask
    if n < MIN_BLOCK:
        return None
    return p, q, st, n


def transpose_masks(n: int) -> list:
    """The rounds of a transpose of ``n`` vectors of ``n`` lanes: per round, ``[(i, j, mask_i,
    mask_j)]``, the new vectors ``i`` and ``j`` being the shuffles of the old ``i`` and ``j``
    (lanes ``0..n-1`` of ``i``, ``n..2n-1`` of ``j``) by the masks. Row ``r`` lane ``c`` ends in
    vector ``c`` lane ``r``."""
    rounds, half = [], n // 2
    while half >= 1:
        pairs = []
        for i in range(n):
            if (i // half) % 2 == 0:
                lo = [c if (c // half) % 2 == 0 else n + c - half for c in range(n)]
                hi = [c + half if (c // half) % 2 == 0 else n + c for c in range(n)]
                pairs.append((i, i + half, lo, hi))
        rounds.append(pairs)
        half //= 2
    return rounds


def emit_transpose_copy(em, s: For) -> bool:
    """Emit the loop nest ``s`` as blocked register transposes when it is a transposing copy
    (True), else nothing (False). ``em`` is the CPU statement emitter."""
    sq = copy_nest(s)
    plan = transpose_plan(sq, register_bits())
    if plan is None:
        if sq is s:
            return False
        em.stmt(sq)  # reordered: its inner two loops are matched when they are emitted
        return True
    s = sq
    p, q, st, n = plan
    outer, inner = s, s.body
    blocks = {x: (int(x.extent.value) // n) * n for x in (outer, inner)}
    rows = min(n, int(q.extent.value))  # of the source per block: fewer in a wide block
    if rows < n:
        blocks[q] = int(q.extent.value)

    def block(values: dict) -> None:
        _block(em, p.var, q.var, values[p], values[q], st, n, rows)

    _loops(em, [(outer, -(-blocks[outer] // n)), (inner, -(-blocks[inner] // n))], n, block, {})
    # the elements outside whole blocks, as the loops they were (inner remainder, then outer)
    ob, ib = blocks[outer], blocks[inner]
    o0, i0 = int(outer.begin.value), int(inner.begin.value)
    rest = []
    if ib < int(inner.extent.value):
        rest.append(_nest(outer, o0, ob, inner, i0 + ib, int(inner.extent.value) - ib))
    if ob < int(outer.extent.value):
        rest.append(_nest(outer, o0 + ob, int(outer.extent.value) - ob, inner, i0,
                          int(inner.extent.value)))
    for r in rest:
        if int(r.extent.value) > 0 and int(r.body.extent.value) > 0:
            em.stmt(r)
    return True


def _nest(outer: For, ob: int, oe: int, inner: For, ib: int, ie: int) -> For:
    def c(v, like):
        return Const(v, like.dtype)
    body = For(inner.var, c(ib, inner.begin), c(ie, inner.extent), inner.kind, inner.body,
               inner.thread, inner.pragmas)
    return For(outer.var, c(ob, outer.begin), c(oe, outer.extent), outer.kind, body,
               outer.thread, outer.pragmas)


def _loops(em, loops: list, n: int, body, values: dict) -> None:
    """Counted loops over the blocks of ``loops`` (``[(For, block count)]``, outermost first),
    ``body(values)`` innermost with ``values`` {For: LLVM value of its variable at the block}."""
    if not loops:
        body(values)
        return
    (loop, count), rest = loops[0], loops[1:]
    b, vt = em.b, reg_type(loop.var.dtype)

    def step(k):
        start = b.add(vt(int(loop.begin.value)), b.mul(k, vt(n), flags=["nsw"]), flags=["nsw"])
        _loops(em, rest, n, body, {**values, loop: start})
    counted(b, vt(0), vt(count), "tr", step)


def _at(em, var, base, offset: int):
    vt = reg_type(var.dtype)
    return base if offset == 0 else em.b.add(base, vt(offset), flags=["nsw"])


def _block(em, pv, qv, p0, q0, st: Store, n: int, m: int) -> None:
    """One ``n`` x ``n`` block at ``p = p0``, ``q = q0``: rows along ``p`` loaded for each of the
    block's first ``m`` values of ``q``, transposed, stored along ``q`` for each ``p`` (the first
    ``m`` lanes of each: a masked store when ``m < n``)."""
    b, ld, t = em.b, st.value, st.buffer.dtype
    vt = ir.VectorType(mem_type(t), n)
    bound = (id(pv) in em.vars, id(qv) in em.vars)
    rows = []
    em.vars[id(pv)] = p0
    for j in range(n):
        if j >= m:
            rows.append(ir.Constant(vt, ir.Undefined))  # lanes that no store keeps
            continue
        em.vars[id(qv)] = _at(em, qv, q0, j)
        em.cache = {}
        rows.append(b.load(em.address(ld.buffer, ld.indices), typ=vt, align=t.itemsize))
    for pairs in transpose_masks(n):
        new = list(rows)
        for i, j, lo, hi in pairs:
            new[i] = b.shuffle_vector(rows[i], rows[j], ir.Constant(ir.VectorType(I32, n), lo))
            new[j] = b.shuffle_vector(rows[i], rows[j], ir.Constant(ir.VectorType(I32, n), hi))
        rows = new
    em.vars[id(qv)] = q0
    mask = ir.Constant(ir.VectorType(I1, n), [int(j < m) for j in range(n)])
    for i in range(n):
        em.vars[id(pv)] = _at(em, pv, p0, i)
        em.cache = {}
        ptr = em.address(st.buffer, st.indices)
        if m == n:
            b.store(rows[i], ptr, align=t.itemsize)
        else:
            fn = em.declare(f"llvm.masked.store.{intrinsic_suffix(vt)}.p0", ir.VoidType(),
                            [vt, ptr.type, I32, mask.type])
            b.call(fn, [rows[i], ptr, I32(t.itemsize), mask])
    em.cache = {}
    for v, was in zip((pv, qv), bound):
        if not was:
            del em.vars[id(v)]
