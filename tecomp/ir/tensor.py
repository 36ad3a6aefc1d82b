"""The tensor-expression DSL: placeholders, computes and reduce axes (the functions used inside a
compute's body, reductions and elementwise math, are :mod:`tecomp.ir.intrinsics`)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

from . import dtype as dt
from .expr import (
    Const,
    Expr,
    IterKind,
    IterVar,
    Reduce,
    Select,
    TensorRead,
    as_expr,
)
from .expr import cast as expr_cast
from .interval import interval
from .traverse import free_vars, walk

__all__ = ["Tensor", "PlaceholderOp", "ComputeOp", "CSRCheck", "placeholder", "compute",
           "compute_csr", "reduce_axis", "MAX_EXPR_DEPTH", "expr_depth"]


class Tensor:
    """The single output of an operation: a placeholder (input) or a compute."""

    __slots__ = ("op", "shape", "dtype", "name")
    __hash__ = object.__hash__

    def __init__(self, op, shape: tuple, dtype: dt.DType, name: str):
        self.op, self.shape, self.dtype, self.name = op, tuple(shape), dtype, name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, idx) -> TensorRead:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise IndexError(f"tensor '{self.name}' has rank {self.ndim} (shape {self.shape}) but "
                             f"was indexed with {len(idx)} indices")
        out = []
        for d, i in enumerate(idx):
            if isinstance(i, slice) or i is Ellipsis:
                raise TypeError(f"tensor '{self.name}': index {d} must be an integer expression, "
                                f"slices are not supported")
            e = as_expr(i)
            if not (e.dtype.is_int or e.dtype.is_bool) or e.dtype.is_bool:
                raise TypeError(f"tensor '{self.name}': index {d} has type {e.dtype}; "
                                f"indices must be integers")
            if isinstance(e, Const) and not 0 <= e.value < self.shape[d]:
                raise IndexError(f"tensor '{self.name}': constant index {e.value} at position {d} "
                                 f"is out of range for dimension of size {self.shape[d]}")
            out.append(expr_cast(e, dt.INDEX))
        return TensorRead(self, tuple(out))

    def __repr__(self):
        return f"Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    # Arithmetic on a whole 0-d tensor is not supported; index it first.
    def __bool__(self):
        raise TypeError(f"tensor '{self.name}' has no truth value")


class PlaceholderOp:
    """An input of the kernel."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list = []


@dataclass(frozen=True)
class CSRCheck:
    """Input constraint of a CSR structure: ``indptr`` (rows + 1) is non-decreasing from 0 to ``nnz``
    and, when given, every ``indices`` value lies in ``[0, ncols)``. Checked on every call."""

    indptr: Tensor
    nnz: int
    indices: Tensor | None = None
    ncols: int | None = None


class ComputeOp:
    """``out[out_index] = body`` for every point of the spatial ``axes``.

    ``axes`` usually are a rectangular domain and ``out_index`` is the axes themselves; a ragged
    domain (see :func:`compute_csr`) has axes whose bounds depend on outer axes and loaded values.
    """

    def __init__(self, name: str, axes: tuple, body: Expr, out_index: tuple | None = None,
                 checks: tuple = (), tag: str = ""):
        self.name, self.axes, self.body = name, tuple(axes), body
        self.out_index = tuple(axes) if out_index is None else tuple(out_index)
        self.checks, self.tag = tuple(checks), tag
        self.is_ragged = out_index is not None
        self.inputs = _reads_in_order(self)

    @property
    def reduce_axes(self) -> tuple:
        return self.body.axes if isinstance(self.body, Reduce) else ()


def _reads_in_order(op) -> list:
    seen, out = set(), []
    exprs = [op.body] + [b for a in op.axes + op.reduce_axes for b in (a.begin, a.end)]
    for e in exprs:
        for x in walk(e):
            if isinstance(x, TensorRead) and id(x.tensor) not in seen:
                seen.add(id(x.tensor))
                out.append(x.tensor)
    return out


def placeholder(shape: Sequence[int], dtype="float32", name: str = "placeholder") -> Tensor:
    """An input tensor of a static ``shape`` and ``dtype``: an argument of the kernel.

    Parameters
    ----------
    shape : int or sequence of int
        Static extents (0 allowed; negative or non-integer entries raise).
    dtype : str or DType
        Element type: ``"float16"``, ``"float32"``, ``"float64"``, ``"int8"``, ``"int32"``,
        ``"int64"``, ``"bool"``, ...
    name : str
        The argument's name in messages, printed IR and ``kernel(...)`` errors.

    Returns
    -------
    Tensor
        Indexable in a compute's body (``A[i, k]``).

    Examples
    --------
    >>> A = tc.placeholder((128, 64), dtype="float32", name="A")
    >>> A.shape
    (128, 64)
    """
    shape = _check_shape(shape, name)
    return Tensor(PlaceholderOp(name), shape, dt.dtype(dtype), name)


def _check_shape(shape, name) -> tuple:
    if isinstance(shape, int):
        shape = (shape,)
    out = []
    for d, s in enumerate(shape):
        if isinstance(s, bool) or not isinstance(s, int) and not hasattr(s, "__index__"):
            raise TypeError(f"tensor '{name}': shape entry {d} is {s!r}; shapes are static ints")
        s = int(s)
        if s < 0:
            raise ValueError(f"tensor '{name}': shape entry {d} is negative ({s})")
        out.append(s)
    return tuple(out)


def reduce_axis(dom, name: str = "k") -> IterVar:
    """A reduction axis over ``range(dom)`` or ``[begin, end)``; bounds may be expressions, including
    values loaded from tensors (e.g. CSR row ranges ``(indptr[i], indptr[i + 1])``).

    Parameters
    ----------
    dom : int, Expr or (begin, end)
        The extent, or the half-open range; integer-typed.
    name : str
        The loop's name in the printed IR and in schedules.

    Returns
    -------
    IterVar
        Used in the body of ``tc.sum`` / ``tc.max`` / ``tc.min`` and named by their ``axis=``.

    Examples
    --------
    >>> k = tc.reduce_axis(64, name="k")
    >>> C = tc.compute((128, 32), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> j = tc.reduce_axis((indptr[i], indptr[i + 1]), name="j")   # doctest: +SKIP
    """
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ValueError(f"reduce_axis '{name}': domain must be an extent or (begin, end)")
        begin, end = as_expr(dom[0]), as_expr(dom[1])
    else:
        begin, end = Const(0, dt.INDEX), as_expr(dom)
    for what, b in (("begin", begin), ("end", end)):
        if not b.dtype.is_int:
            raise TypeError(f"reduce_axis '{name}': {what} has type {b.dtype}; must be an integer")
    return IterVar(name, expr_cast(begin, dt.INDEX), expr_cast(end, dt.INDEX), IterKind.REDUCE)


# ----------------------------------------------------------------------------- compute

def _param_names(fcompute: Callable, n: int, name: str) -> list:
    """Names of the iteration variables: the lambda's positional parameters (``*args`` extends
    them as ``args0, args1, ...``; parameters with defaults beyond ``n`` are left alone)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"i{k}" for k in range(n)]
    P = inspect.Parameter
    pos = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    star = [p for p in params if p.kind is P.VAR_POSITIONAL]
    required = [p for p in pos if p.default is P.empty]
    if star and len(pos) <= n:
        return [p.name for p in pos] + [f"{star[0].name}{k}" for k in range(n - len(pos))]
    if len(required) <= n <= len(pos):
        return [p.name for p in pos[:n]]
    raise TypeError(f"compute '{name}': the lambda takes {len(required)} arguments but the shape "
                    f"has {n} dimensions")


def compute(shape: Sequence[int], fcompute: Callable, name: str = "compute", tag: str = "",
            checks: Sequence = ()) -> Tensor:
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    Iteration variables are named after the lambda's parameters. The body may be a reduction
    (``tc.sum``/``tc.max``/``tc.min``) only as a whole.

    Parameters
    ----------
    shape : int or sequence of int
        Static extents of the result.
    fcompute : callable
        Takes one iteration variable per dimension and returns the element's expression.
    name : str
        The stage's name (schedules address it by its tensor, printed IR by this name).
    tag : str
        A free-form label of the operator kind (``"conv2d"``, ...) that the search may read.
    checks : sequence of CSRCheck
        Input constraints every call validates, e.g. for the index arrays a sparse reduction's
        bounds load.

    Returns
    -------
    Tensor
        Of the body's dtype.

    Examples
    --------
    >>> A = tc.placeholder((128, 64), name="A")
    >>> B = tc.compute((128, 64), lambda i, j: tc.maximum(A[i, j], 0.0), name="B")
    >>> k = tc.reduce_axis(64, name="k")
    >>> S = tc.compute((128,), lambda i: tc.sum(A[i, k], axis=k), name="S")
    """
    shape = _check_shape(shape, name)
    checks = _check_checks(checks, name)
    names = _param_names(fcompute, len(shape), name)
    axes = tuple(IterVar(n, Const(0, dt.INDEX), Const(s, dt.INDEX), IterKind.SPATIAL)
                 for n, s in zip(names, shape))
    body = as_expr(fcompute(*axes))
    op = ComputeOp(name, axes, body, checks=checks, tag=tag)
    _check_body(op)
    return Tensor(op, shape, body.dtype, name)


def _check_checks(checks, name) -> tuple:
    checks = tuple(checks)
    for c in checks:
        if not isinstance(c, CSRCheck):
            raise TypeError(f"compute '{name}': checks must be CSRCheck instances, got "
                            f"{type(c).__name__}")
    return checks


def compute_csr(indptr: Tensor, nnz: int, fcompute: Callable, name: str = "compute",
                tag: str = "", checks: Sequence = ()) -> Tensor:
    """A tensor of shape ``(nnz,)`` over a CSR pattern: for each row ``i`` and each position ``p`` in
    ``[indptr[i], indptr[i + 1])``, element ``p`` is ``fcompute(i, p)`` (SDDMM's output).
    ``indptr`` is always checked to be a valid CSR pointer for ``nnz``; pass a fuller
    :class:`CSRCheck` (with indices and column count) in ``checks`` to check more."""
    if indptr.ndim != 1 or not indptr.dtype.is_int:
        raise TypeError(f"compute_csr '{name}': indptr '{indptr.name}' must be a 1-d integer tensor")
    rows = indptr.shape[0] - 1
    if rows < 0:
        raise ValueError(f"compute_csr '{name}': indptr '{indptr.name}' must have rows + 1 entries")
    n_i, n_p = _param_names(fcompute, 2, name)
    i = IterVar(n_i, Const(0, dt.INDEX), Const(rows, dt.INDEX), IterKind.SPATIAL)
    p = IterVar(n_p, expr_cast(indptr[i], dt.INDEX), expr_cast(indptr[i + 1], dt.INDEX), IterKind.SPATIAL)
    body = as_expr(fcompute(i, p))
    checks = _check_checks(checks, name)
    if not any(c.indptr is indptr for c in checks):
        checks = (CSRCheck(indptr, int(nnz)),) + checks
    op = ComputeOp(name, (i, p), body, out_index=(p,), checks=checks, tag=tag)
    _check_body(op)
    return Tensor(op, (int(nnz),), body.dtype, name)


#: the deepest expression a compute may hold: every pass over expressions (bounds, lowering,
#: code generation, the interpreter) recurses once per level, and Python's recursion limit
#: (1000 frames) was hit at ~450 levels: a chain of 900 additions raised RecursionError in build
MAX_EXPR_DEPTH = 256


def expr_depth(e) -> int:
    """The number of nested operations of ``e`` (a leaf is 1), counted without recursion."""
    deepest, stack = 0, [(e, 1)]
    while stack:
        x, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in x.children())
    return deepest


def _check_body(op: ComputeOp) -> None:
    """Construction-time errors: nested reductions, foreign or unreduced axes, bad constant ranges,
    expressions past :data:`MAX_EXPR_DEPTH`."""
    body = op.body
    depth = expr_depth(body)
    if depth > MAX_EXPR_DEPTH:
        raise ValueError(f"compute '{op.name}': its expression is {depth} operations deep, past "
                         f"tecomp's limit of {MAX_EXPR_DEPTH} (MAX_EXPR_DEPTH); compute part of "
                         f"it in a compute of its own")
    top = body.source if isinstance(body, Reduce) else body
    for x in walk(top):
        if isinstance(x, Reduce):
            raise ValueError(f"compute '{op.name}': a reduction must be the whole body of a compute; "
                             f"put the inner reduction in a compute of its own")
    own = {id(a): a for a in op.axes}
    red = {id(a): a for a in op.reduce_axes}
    bound_exprs = [b for a in op.axes + op.reduce_axes for b in (a.begin, a.end)]
    for e in [top] + bound_exprs:
        for v in free_vars(e):
            if id(v) in own or id(v) in red:
                continue
            if isinstance(v, IterVar) and v.kind is IterKind.REDUCE:
                raise ValueError(f"compute '{op.name}': reduce axis '{v.name}' is used but not "
                                 f"reduced over (pass it in axis=)")
            raise ValueError(f"compute '{op.name}': iteration variable '{v.name}' belongs to another "
                             f"compute; index tensors only with this compute's own axes")
    _check_static_ranges(op, top)


def _check_static_ranges(op: ComputeOp, top: Expr) -> None:
    env = {}
    for a in op.axes + op.reduce_axes:
        lo, hi = interval(a.begin, env), interval(a.end, env)
        if lo is not None and hi is not None:
            env[a] = (lo[0], hi[1] - 1)

    def visit(e: Expr, guarded: bool):
        if isinstance(e, Select):
            visit(e.cond, guarded)
            visit(e.t, True)
            visit(e.f, True)
            return
        if isinstance(e, TensorRead) and not guarded:
            for d, ix in enumerate(e.indices):
                if any(isinstance(x, TensorRead) for x in walk(ix)):
                    continue  # data-dependent: validated against the real data on every call
                r = interval(ix, env)
                n = e.tensor.shape[d]
                if r is not None and (r[0] < 0 or r[1] >= n) and r[0] <= r[1]:
                    raise IndexError(f"compute '{op.name}': index {d} of tensor '{e.tensor.name}' "
                                     f"({ix!r}) ranges over [{r[0]}, {r[1]}] but the dimension has "
                                     f"size {n}")
        for c in e.children():
            visit(c, guarded)

    visit(top, False)
