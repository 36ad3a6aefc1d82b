"""Math functions for the NVPTX emitter: the GPU has no libm, so exp/log/tanh/sigmoid are built from
the PTX approximate instructions (``ex2.approx.f32``, ``lg2.approx.f32``) with range reduction.

Accuracy in float32 (checked against numpy in tests/codegen/test_nvptx.py): exp and sigmoid within
about 2e-6 relative, log within 1e-6 absolute near 1 and 2e-6 relative elsewhere, tanh within 2e-6
relative. float16 is computed in float32 and rounded. float64 is refused at build time: the
approximate instructions have no double form, and a float64 exp computed in float32 would return
float32 accuracy under a float64 type (arithmetic, sqrt and casts in float64 are exact PTX f64).
"""
from __future__ import annotations

import math

import llvmlite.ir as ir

from ..ir import dtype as dt
from ..ir.expr import UnOpKind
from .llvm_expr import FLOAT, HALF

__all__ = ["emit_math"]

_LN2_HI = 0.693145751953125         # ln 2 split so that n * _LN2_HI is exact for |n| < 2^12
_LN2_LO = 1.428606765330187e-06
_LOG2E = 1.4426950408889634


def _approx(em, name: str, x: ir.Value) -> ir.Value:
    fn = em.declare(f"llvm.nvvm.{name}.approx.f", FLOAT, [FLOAT])
    return em.b.call(fn, [x])


def _exp(em, x: ir.Value) -> ir.Value:
    """e^x = 2^n * 2^(r * log2 e) with n = round(x * log2 e) and r = x - n ln 2 (Cody-Waite), so
    that the approximate ex2 only sees |r * log2 e| <= 1/2; 2^n is applied in two halves so that
    results near the float range's ends do not overflow or flush early."""
    b = em.b
    n = em.call_intr("llvm.rint", b.fmul(x, FLOAT(_LOG2E)))
    n = em.call_intr("llvm.maxnum", em.call_intr("llvm.minnum", n, FLOAT(256.0)), FLOAT(-256.0))
    r = b.fsub(x, b.fmul(n, FLOAT(_LN2_HI)))
    r = b.fsub(r, b.fmul(n, FLOAT(_LN2_LO)))
    p = _approx(em, "ex2", b.fmul(r, FLOAT(_LOG2E)))
    h = em.call_intr("llvm.trunc", b.fmul(n, FLOAT(0.5)))
    s1, s2 = _approx(em, "ex2", h), _approx(em, "ex2", b.fsub(n, h))
    return b.fmul(b.fmul(p, s1), s2)


def _log(em, x: ir.Value) -> ir.Value:
    return em.b.fmul(_approx(em, "lg2", x), FLOAT(math.log(2.0)))


def _tanh(em, x: ir.Value) -> ir.Value:
    """tanh x = sign(x) * m / (m + 2) with m = expm1(2|x|); expm1 by its Taylor series where
    exp(y) - 1 would cancel (y < 1/8), so small arguments keep their relative accuracy."""
    b = em.b
    y = b.fmul(em.call_intr("llvm.fabs", x), FLOAT(2.0))
    series = FLOAT(1.0 / 720.0)
    for c in (1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0):
        series = b.fadd(b.fmul(series, y), FLOAT(c))
    series = b.fmul(series, y)
    big = b.fsub(_exp(em, em.call_intr("llvm.minnum", y, FLOAT(64.0))), FLOAT(1.0))
    m = b.select(b.fcmp_ordered("<", y, FLOAT(0.125)), series, big)
    t = b.fdiv(m, b.fadd(m, FLOAT(2.0)))
    return em.call_intr("llvm.copysign", t, x)


def _sigmoid(em, x: ir.Value) -> ir.Value:
    one = FLOAT(1.0)
    return em.b.fdiv(one, em.b.fadd(one, _exp(em, em.b.fneg(x))))


_FUNCS = {UnOpKind.EXP: _exp, UnOpKind.LOG: _log, UnOpKind.TANH: _tanh, UnOpKind.SIGMOID: _sigmoid}


def emit_math(em, op: UnOpKind, t: dt.DType, a: ir.Value) -> ir.Value | None:
    """``op(a)`` for a float ``a`` of dtype ``t`` at ``em``'s builder, or None when ``op`` is not
    one of the functions built here (sqrt and the rest use LLVM intrinsics the backend has)."""
    fn = _FUNCS.get(op)
    if fn is None and op not in (UnOpKind.SIN, UnOpKind.COS):  # those: the shared float32 code
        return None
    if t is dt.float64:
        raise ValueError(f"{op.value} of a float64 value is not supported on the cuda target "
                         f"(the GPU's approximate math is float32 only, and computing it in "
                         f"float32 would lose the precision float64 asks for); cast its argument "
                         f"to float32 (tc.cast(x, 'float32')) or build for llvm")
    if fn is None:
        return None
    b = em.b
    x = b.fpext(a, FLOAT) if t is dt.float16 else a
    r = fn(em, x)
    if t is dt.float16:
        return b.fptrunc(r, HALF)
    return r
