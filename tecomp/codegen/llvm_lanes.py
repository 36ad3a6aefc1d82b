"""Vector lanes for the CPU vector emitter (:mod:`.llvm_vector`): LLVM intrinsic name suffixes of
vector types, the IRBuilder wrapper through which the scalar emitter's operation methods build
lane-wise code, the counted loop the vector emitter runs chunks and inner loops in, and strided
lanes loaded as the span they cover."""
from __future__ import annotations

import llvmlite.ir as ir

__all__ = ["intrinsic_suffix", "LaneBuilder", "counted", "span_load"]


def intrinsic_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        el = t.element
        return f"v{t.count}" + ("p0" if isinstance(el, ir.PointerType) else el.intrinsic_name)
    return t.intrinsic_name


class LaneBuilder:
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
                    typ = ir.VectorType(typ, v.type.count)
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


def span_load(b: ir.IRBuilder, ptr: ir.Value, vt: ir.VectorType, st: int, align: int,
              piece: int = 0) -> ir.Value:
    """The ``n`` lanes of ``vt``, ``st`` elements apart from ``ptr`` on, as plain ``n``-element
    loads of the span from lane 0's element to the last lane's (``(n - 1) * st + 1`` elements;
    the last load ends on the last lane's element, overlapping the one before) and a shuffle.
    Every element loaded lies between two that the lanes read in one flat buffer, so nothing
    outside it is touched. AVX2 has no cheap masked load: one masked load of ``n * st`` elements
    made a stride-2 read 3x slower on Zen 1 (slower than a unit-stride one of twice the bytes).

    ``piece`` (lanes, dividing ``n``; 0: none): each ``piece`` lanes from their own span,
    concatenated (the vector emitter passes :func:`.vector_plan.shuffle_bits` worth). Where the
    shuffle units are narrower than the registers (Zen 1 runs a 256-bit shuffle as two 128-bit
    halves), a stride-2 read of 8 floats is then two in-lane ``shufps`` of 128-bit loads and an
    insert instead of a 256-bit ``shufps`` and a lane-crossing ``vpermpd`` (5 of its micro-ops
    against 2 or 3)."""
    n = vt.count
    if piece and st > 1 and piece < n and n % piece == 0:
        pt = ir.VectorType(vt.element, piece)
        parts = [span_load(b, ptr if k == 0 else b.gep(
                     ptr, [ir.Constant(ir.IntType(64), k * piece * st)], inbounds=True,
                     source_etype=vt.element), pt, st, align) for k in range(n // piece)]
        return _concat(b, parts)
    span = (n - 1) * st + 1
    offsets = sorted({min(j * n, span - n) for j in range((span + n - 1) // n)})
    parts = [b.load(ptr if off == 0 else b.gep(ptr, [ir.Constant(ir.IntType(64), off)],
                                               inbounds=True, source_etype=vt.element),
                    typ=vt, align=align) for off in offsets]
    pick = []
    for i in range(n):  # element i * st sits in the last part that starts at or before it
        j = max(k for k, off in enumerate(offsets) if off <= i * st)
        pick.append(j * n + i * st - offsets[j])
    whole = _concat(b, parts)
    return b.shuffle_vector(whole, ir.Constant(whole.type, ir.Undefined),
                            ir.Constant(ir.VectorType(ir.IntType(32), n), pick))


def _concat(b: ir.IRBuilder, parts: list) -> ir.Value:
    """The equal-width vectors ``parts`` as one vector, concatenated pairwise (a shuffle takes
    two vectors of one width; an odd one out is paired with an undefined vector)."""
    i32 = ir.IntType(32)
    while len(parts) > 1:
        if len(parts) % 2:
            parts.append(ir.Constant(parts[0].type, ir.Undefined))
        both = ir.Constant(ir.VectorType(i32, 2 * parts[0].type.count),
                           list(range(2 * parts[0].type.count)))
        parts = [b.shuffle_vector(x, y, both) for x, y in zip(parts[::2], parts[1::2])]
    return parts[0]
