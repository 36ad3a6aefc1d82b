"""Vector lanes for the CPU vector emitter (:mod:`.llvm_vector`): LLVM intrinsic name suffixes of
vector types, the IRBuilder wrapper through which the scalar emitter's operation methods build
lane-wise code, and the counted loop the vector emitter runs chunks and inner loops in."""
from __future__ import annotations

import llvmlite.ir as ir

__all__ = ["intrinsic_suffix", "LaneBuilder", "counted"]


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
