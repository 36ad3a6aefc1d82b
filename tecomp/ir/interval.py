"""Integer interval arithmetic over index expressions.

Used to reject out-of-range reads at construction, to validate data-dependent (sparse) indices
against real index arrays before native code runs, and by bound inference.
"""
from __future__ import annotations

from typing import Callable

from .expr import BinOp, BinOpKind, Cast, Const, Expr, Load, Select, TensorRead, UnOp, UnOpKind, Var

Interval = tuple  # (lo, hi), both inclusive ints


def interval(e: Expr, env: dict, read: Callable[[Expr], Interval | None] | None = None):
    """Inclusive integer bounds of ``e`` or None when unknown.

    ``env`` maps Var -> (lo, hi); ``read(node)`` gives the bounds of a TensorRead/Load value.
    """
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
        return interval(e.a, env, read) if not e.a.dtype.is_float else None
    if isinstance(e, Select):
        t, f = interval(e.t, env, read), interval(e.f, env, read)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if isinstance(e, UnOp):
        a = interval(e.a, env, read)
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
        a, b = interval(e.a, env, read), interval(e.b, env, read)
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
