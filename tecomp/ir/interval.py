"""Integer interval arithmetic over index expressions.

Used to reject out-of-range reads at construction, to validate data-dependent (sparse) indices
against real index arrays before native code runs, and by bound inference.
"""
from __future__ import annotations

from typing import Callable

from .expr import BinOp, BinOpKind, Cast, Const, Expr, Load, Select, TensorRead, UnOp, UnOpKind, Var

Interval = tuple  # (lo, hi), both inclusive ints


def interval(e: Expr, env: dict, read: Callable[[Expr], Interval | None] | None = None,
             wrap: bool = False):
    """Inclusive integer bounds of ``e`` or None when unknown.

    ``env`` maps Var -> (lo, hi); ``read(node)`` gives the bounds of a TensorRead/Load value.
    With ``wrap``, every integer node is computed as the compiled code computes it, in its own
    type's two's complement: a node that may overflow its type wraps (a result that can wrap
    to anywhere is the type's whole range). Without it, bounds are of the unbounded values.
    """
    r = _interval(e, env, read, wrap)
    return wrapped(r, e.dtype) if wrap and r is not None and e.dtype.is_int else r


def wrapped(r: Interval, t) -> Interval:
    """``r`` as values of the signed integer type ``t`` (two's complement wrap-around)."""
    half = 1 << (t.bits - 1)
    if -half <= r[0] and r[1] < half:
        return r
    lo, hi = (r[0] + half) % (2 * half) - half, (r[1] + half) % (2 * half) - half
    if r[1] - r[0] < 2 * half and lo <= hi:
        return (lo, hi)  # the whole interval wraps by the same multiple
    return (-half, half - 1)


def _interval(e: Expr, env: dict, read, wrap: bool):
    def sub(x, env, read):
        return interval(x, env, read, wrap)
    if isinstance(e, Const):
        if e.dtype.is_float:
            return None
        v = int(e.value)
        return (v, v)
    if isinstance(e, Var):
        return env.get(e)
    if isinstance(e, (TensorRead, Load)):
        return read(e) if read is not None else None
    if isinstance(e, Cast):
        return sub(e.a, env, read) if not e.a.dtype.is_float else None
    if isinstance(e, Select):
        t, f = sub(e.t, env, read), sub(e.f, env, read)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if isinstance(e, UnOp):
        a = sub(e.a, env, read)
        if a is None:
            return None
        if e.op is UnOpKind.NEG:
            return (-a[1], -a[0])
        if e.op is UnOpKind.ABS:
            lo = 0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1]))
            return (lo, max(abs(a[0]), abs(a[1])))
        return None
    if isinstance(e, BinOp):
        if e.op.is_compare or e.op.is_logical:
            return (0, 1)
        a, b = sub(e.a, env, read), sub(e.b, env, read)
        if a is None or b is None:
            return None
        op = e.op
        if op is BinOpKind.ADD:
            return (a[0] + b[0], a[1] + b[1])
        if op is BinOpKind.SUB:
            return (a[0] - b[1], a[1] - b[0])
        if op is BinOpKind.MUL:
            p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
            return (min(p), max(p))
        if op is BinOpKind.MIN:
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op is BinOpKind.MAX:
            return (max(a[0], b[0]), max(a[1], b[1]))
        if op is BinOpKind.FLOORDIV and b[0] > 0:
            p = (a[0] // b[0], a[0] // b[1], a[1] // b[0], a[1] // b[1])
            return (min(p), max(p))
        if op is BinOpKind.MOD and b[0] > 0:
            if b[0] == b[1] and a[0] // b[0] == a[1] // b[0]:
                return (a[0] % b[0], a[1] % b[0])
            return (0, b[1] - 1)
        return None
    return None
