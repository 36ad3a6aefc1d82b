"""float32 ``sin`` and ``cos`` from arithmetic, so that they vectorize (``llvm.sin.v16f32`` is
sixteen scalar ``sinf`` calls) and run on the GPU alike (the NVPTX backend has no ``sinf``).

Cephes' ``sinf``/``cosf``: the argument reduced by the octant ``j`` of ``|x| * 4/pi`` (made even),
``|x| - j * pi/4`` in three parts (``DP1 + DP2 + DP3 = pi/4``, the first two exact in few bits),
then a degree-3 polynomial in ``z = r^2`` for sine or cosine by the octant, and the sign. Within 2
ulp of the correctly rounded result for ``|x| <= 8192`` (Cephes' bound); beyond it the reduction
loses bits as any float32 one does (numpy reduces exactly). NaN and +-inf give NaN.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .cpu_math import FLOAT, I32, fmuladd, splat

__all__ = ["sin_f32", "cos_f32"]

_FOPI = 1.27323954473516  # 4 / pi
_DP = (0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8)
_SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_P = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
#: |x| is clamped here before the octant is converted to an integer (a larger float has no
#: fraction of pi left, and a conversion past 2^31 would be undefined)
_BIG = 1.0e8


def _const_int(x: ir.Value, v: int) -> ir.Value:
    if isinstance(x.type, ir.VectorType):
        return ir.Constant(ir.VectorType(I32, x.type.count), [v] * x.type.count)
    return I32(v)


def _sincos(em, x: ir.Value, cosine: bool) -> ir.Value:
    b = em.b
    a = em.call_intr("llvm.minnum", em.call_intr("llvm.fabs", x), splat(em, x, _BIG))
    ity = ir.VectorType(I32, x.type.count) if isinstance(x.type, ir.VectorType) else I32
    j = b.fptosi(b.fmul(a, FLOAT(_FOPI)), ity)
    j = b.add(j, b.and_(j, _const_int(x, 1)))           # the octant made even
    y = b.sitofp(j, a.type)
    j = b.and_(j, _const_int(x, 7))
    high = b.icmp_signed(">", j, _const_int(x, 3))       # octants 4..7: the sign flips
    j = b.select(high, b.sub(j, _const_int(x, 4)), j)
    r = fmuladd(em, y, splat(em, x, -_DP[0]), a)
    r = fmuladd(em, y, splat(em, x, -_DP[1]), r)
    r = fmuladd(em, y, splat(em, x, -_DP[2]), r)
    z = b.fmul(r, r)
    ps = splat(em, x, _SIN_P[0])
    for c in _SIN_P[1:]:
        ps = fmuladd(em, ps, z, splat(em, x, c))
    s = fmuladd(em, b.fmul(ps, z), r, r)
    pc = splat(em, x, _COS_P[0])
    for c in _COS_P[1:]:
        pc = fmuladd(em, pc, z, splat(em, x, c))
    c = b.fadd(fmuladd(em, b.fmul(pc, z), z, b.fmul(z, FLOAT(-0.5))), FLOAT(1.0))
    mid = b.or_(b.icmp_signed("==", j, _const_int(x, 1)), b.icmp_signed("==", j, _const_int(x, 2)))
    if cosine:  # cos: the sine polynomial in octants 1, 2; negative in 2..5
        v = b.select(mid, s, c)
        neg = b.xor(high, b.icmp_signed(">", j, _const_int(x, 1)))
    else:       # sin: the cosine polynomial in octants 1, 2; odd in x, negative in 4..7
        v = b.select(mid, c, s)
        neg = b.xor(high, b.fcmp_ordered("<", x, splat(em, x, 0.0)))
    v = b.select(neg, b.fneg(v), v)
    if not cosine:  # sin(-0) is -0
        v = b.select(b.fcmp_ordered("==", x, splat(em, x, 0.0)), x, v)
    bad = b.fcmp_unordered("uno", x, b.fsub(x, x))       # NaN or +-inf: inf - inf is NaN
    return b.select(bad, splat(em, x, float("nan")), v)


def sin_f32(em, x: ir.Value) -> ir.Value:
    """``sin(x)`` for a float32 (or vector of float32) ``x`` at ``em``'s builder."""
    return _sincos(em, x, False)


def cos_f32(em, x: ir.Value) -> ir.Value:
    """``cos(x)`` for a float32 (or vector of float32) ``x`` at ``em``'s builder."""
    return _sincos(em, x, True)
