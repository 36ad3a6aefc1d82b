"""Functions used inside a compute's body: the reductions (``tc.sum``, ``tc.max``, ``tc.min``)
and elementwise math (``tc.maximum``, ``tc.exp``, ``tc.if_then_else``, ``tc.cast``, ...).

The examples assume ``import tecomp as tc`` and ``A = tc.placeholder((64, 32), name="A")``.
"""
from __future__ import annotations

from . import dtype as dt
from .expr import (
    BinOpKind,
    Expr,
    IterKind,
    IterVar,
    Reduce,
    ReduceKind,
    UnOpKind,
    as_expr,
    binary,
    select,
    unary,
)
from .expr import cast as expr_cast
from .traverse import free_vars

__all__ = ["sum", "max", "min", "maximum", "minimum", "exp", "log", "sqrt", "tanh", "sigmoid",
           "abs", "if_then_else", "cast"]


def _reduce(kind: ReduceKind, expr, axis) -> Reduce:
    expr = as_expr(expr)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if not axes:
        raise ValueError(f"tc.{kind.value}: axis= names no reduce axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.kind is not IterKind.REDUCE:
            raise TypeError(f"tc.{kind.value}: axis {a!r} is not a tc.reduce_axis")
    used = {id(v) for v in free_vars(expr)}
    for a in axes:
        if id(a) not in used:
            raise ValueError(f"tc.{kind.value}: reducing over axis '{a.name}' that the body does "
                             f"not use")
    if kind is ReduceKind.SUM and expr.dtype.is_bool:
        expr = expr_cast(expr, dt.int64)
    return Reduce(kind, expr, _bounds_first(axes))


def _bounds_first(axes: tuple) -> tuple:
    """``axes`` in the given order, except that an axis whose bounds read another of them comes
    after it (``sum(.., axis=[r2, r1])`` with ``r2`` in ``[0, r1]``: the loops nest r1, r2)."""
    rest, out = list(axes), []
    while rest:
        ids = {id(a) for a in rest}
        a = next((a for a in rest if not any(id(v) in ids for v in free_vars(a.begin))
                  and not any(id(v) in ids for v in free_vars(a.end))), rest[0])
        rest = [b for b in rest if b is not a]  # identity: == on expressions builds a compare
        out.append(a)
    return tuple(out)


def sum(expr, axis) -> Reduce:  # noqa: A001 - mirrors numpy's name on purpose
    """Sum of ``expr`` over one reduce axis or a list of them; the whole body of a compute.

    Parameters
    ----------
    expr : Expr or scalar
        What is summed, an expression of the compute's axes and of ``axis``. A bool body is
        summed as int64 (a count).
    axis : IterVar or list of IterVar
        Reduce axes from :func:`~tecomp.ir.tensor.reduce_axis`, each used by ``expr``.

    Returns
    -------
    Reduce
        The reduction, of ``expr``'s dtype; only valid as a compute's whole body.

    Examples
    --------
    >>> A = tc.placeholder((64, 32), name="A")
    >>> k = tc.reduce_axis(32, name="k")
    >>> rows = tc.compute((64,), lambda i: tc.sum(A[i, k], axis=k), name="rows")
    """
    return _reduce(ReduceKind.SUM, expr, axis)


def max(expr, axis) -> Reduce:  # noqa: A001
    """Maximum of ``expr`` over ``axis`` (identity: -inf for floats, the type's minimum for ints).

    Parameters
    ----------
    expr : Expr or scalar
        An expression of the compute's axes and of ``axis``.
    axis : IterVar or list of IterVar
        Reduce axes from :func:`~tecomp.ir.tensor.reduce_axis`, each used by ``expr``.

    Returns
    -------
    Reduce
        Only valid as a compute's whole body.

    Examples
    --------
    >>> k = tc.reduce_axis(32, name="k")
    >>> m = tc.compute((64,), lambda i: tc.max(A[i, k], axis=k), name="m")
    """
    return _reduce(ReduceKind.MAX, expr, axis)


def min(expr, axis) -> Reduce:  # noqa: A001
    """Minimum of ``expr`` over ``axis`` (identity: +inf for floats, the type's maximum for ints).

    Parameters
    ----------
    expr : Expr or scalar
        An expression of the compute's axes and of ``axis``.
    axis : IterVar or list of IterVar
        Reduce axes from :func:`~tecomp.ir.tensor.reduce_axis`, each used by ``expr``.

    Returns
    -------
    Reduce
        Only valid as a compute's whole body.

    Examples
    --------
    >>> k = tc.reduce_axis(32, name="k")
    >>> m = tc.compute((64,), lambda i: tc.min(A[i, k], axis=k), name="m")
    """
    return _reduce(ReduceKind.MIN, expr, axis)


def maximum(a, b) -> Expr:
    """Elementwise larger of ``a`` and ``b`` (types promoted as for ``+``)."""
    return binary(BinOpKind.MAX, a, b)


def minimum(a, b) -> Expr:
    """Elementwise smaller of ``a`` and ``b``."""
    return binary(BinOpKind.MIN, a, b)


def exp(x) -> Expr:
    """e to the ``x`` (an integer ``x`` is computed in float64)."""
    return unary(UnOpKind.EXP, x)


def log(x) -> Expr:
    """Natural logarithm of ``x``."""
    return unary(UnOpKind.LOG, x)


def sqrt(x) -> Expr:
    """Square root of ``x``."""
    return unary(UnOpKind.SQRT, x)


def tanh(x) -> Expr:
    """Hyperbolic tangent of ``x``."""
    return unary(UnOpKind.TANH, x)


def sigmoid(x) -> Expr:
    """``1 / (1 + exp(-x))``."""
    return unary(UnOpKind.SIGMOID, x)


def abs(x) -> Expr:  # noqa: A001
    """Absolute value of ``x``."""
    return unary(UnOpKind.ABS, x)


def sin(x) -> Expr:
    """Sine of ``x`` (radians)."""
    return unary(UnOpKind.SIN, x)


def cos(x) -> Expr:
    """Cosine of ``x`` (radians)."""
    return unary(UnOpKind.COS, x)


def floor(x) -> Expr:
    """The largest integer not above ``x`` (``x`` itself for an integer ``x``)."""
    return unary(UnOpKind.FLOOR, x)


def ceil(x) -> Expr:
    """The smallest integer not below ``x`` (``x`` itself for an integer ``x``)."""
    return unary(UnOpKind.CEIL, x)


def round(x) -> Expr:  # noqa: A001 - mirrors numpy's name on purpose
    """``x`` rounded to the nearest integer, halves to even, as ``numpy.round`` (``x`` itself
    for an integer ``x``)."""
    return unary(UnOpKind.ROUND, x)


def if_then_else(cond, t, f) -> Expr:
    """``t`` where ``cond`` holds, else ``f``; only the chosen side is evaluated."""
    return select(cond, t, f)


def cast(x, dtype) -> Expr:
    """Convert ``x`` to ``dtype``."""
    return expr_cast(x, dtype)
