"""Vector lanes for the CPU vector emitter (:mod:`.llvm_vector`): LLVM intrinsic name suffixes of
vector types, and the IRBuilder wrapper through which the scalar emitter's operation methods build
lane-wise code."""
from __future__ import annotations

import llvmlite.ir as ir

__all__ = ["intrinsic_suffix", "LaneBuilder"]


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
