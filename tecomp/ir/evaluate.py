"""Vectorized numpy evaluation of expressions over grids of variable values.

Used to count data-dependent trip counts, to validate sparse index data, and as the direct
(schedule-free) numpy evaluation of a DAG in tests.
"""
from __future__ import annotations

import numpy as np

from .expr import BinOp, BinOpKind, Cast, Const, Expr, Load, Select, TensorRead, UnOp, UnOpKind, Var

__all__ = ["eval_np", "NP_BINARY", "NP_UNARY"]

#: the numpy function of each operator (the interpreter calls the same ones)
NP_BINARY = {
    BinOpKind.ADD: np.add, BinOpKind.SUB: np.subtract, BinOpKind.MUL: np.multiply,
    BinOpKind.DIV: np.true_divide, BinOpKind.FLOORDIV: np.floor_divide, BinOpKind.MOD: np.mod,
    BinOpKind.MIN: np.minimum, BinOpKind.MAX: np.maximum, BinOpKind.LT: np.less,
    BinOpKind.LE: np.less_equal, BinOpKind.GT: np.greater, BinOpKind.GE: np.greater_equal,
    BinOpKind.EQ: np.equal, BinOpKind.NE: np.not_equal, BinOpKind.AND: np.logical_and,
    BinOpKind.OR: np.logical_or,
}


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x))).astype(x.dtype)


NP_UNARY = {
    UnOpKind.NEG: np.negative, UnOpKind.NOT: np.logical_not, UnOpKind.EXP: np.exp,
    UnOpKind.LOG: np.log, UnOpKind.SQRT: np.sqrt, UnOpKind.TANH: np.tanh,
    UnOpKind.SIGMOID: _sigmoid, UnOpKind.ABS: np.abs, UnOpKind.FLOOR: np.floor,
    UnOpKind.CEIL: np.ceil, UnOpKind.ROUND: np.round, UnOpKind.SIN: np.sin, UnOpKind.COS: np.cos,
}


def eval_np(e: Expr, env: dict, data: dict, mask=None):
    """Evaluate ``e`` with numpy. ``env`` maps Var -> array (broadcastable), ``data`` maps a
    tensor/buffer -> ndarray. Reads under a false ``mask`` (and untaken Select branches) read index 0
    instead, so guarded out-of-range reads never fault; their values are discarded.
    Integer arithmetic wraps and division by zero gives 0, as in the compiled code paths."""
    t = e.dtype.np
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=t)
    if isinstance(e, Var):
        return np.asarray(env[e])
    if isinstance(e, (TensorRead, Load)):
        arr = data[e.tensor if isinstance(e, TensorRead) else e.buffer]
        idx = [np.asarray(eval_np(i, env, data, mask)) for i in e.indices]
        idx = np.broadcast_arrays(*idx) if idx else []
        if mask is not None:
            idx = [np.where(mask, i, 0) for i in idx]
        if arr.size == 0:
            return np.zeros(np.broadcast(*idx).shape if idx else (), dtype=t)
        return arr[tuple(idx)] if idx else arr[()]
    if isinstance(e, Cast):
        a = eval_np(e.a, env, data, mask)
        with np.errstate(invalid="ignore", over="ignore"):
            if e.dtype.is_int and e.a.dtype.is_float:
                a = np.where(np.isfinite(a), np.trunc(a), 0)
            return np.asarray(a).astype(t)
    if isinstance(e, Select):
        c = np.asarray(eval_np(e.cond, env, data, mask)).astype(bool)
        mt = c if mask is None else (mask & c)
        mf = ~c if mask is None else (mask & ~c)
        return np.where(c, eval_np(e.t, env, data, mt), eval_np(e.f, env, data, mf)).astype(t)
    if isinstance(e, UnOp):
        a = eval_np(e.a, env, data, mask)
        with np.errstate(all="ignore"):
            return np.asarray(NP_UNARY[e.op](a)).astype(t)
    if isinstance(e, BinOp):
        a, b = eval_np(e.a, env, data, mask), eval_np(e.b, env, data, mask)
        with np.errstate(all="ignore"):
            if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and e.a.dtype.is_int:
                safe = np.where(b == 0, 1, b)
                r = NP_BINARY[e.op](a, safe)
                return np.where(b == 0, 0, r).astype(t)
            return np.asarray(NP_BINARY[e.op](a, b)).astype(t)
    raise TypeError(f"cannot evaluate {type(e).__name__} with numpy")
