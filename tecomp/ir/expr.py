"""Scalar expressions shared by the DSL and the loop IR.

Expressions are immutable trees. Python operators build them (``a + b``, ``a == b``, ``a < b``), so
``==`` on expressions does not compare: code inside tecomp compares nodes with ``is`` or with
:func:`structural_key`. ``bool(expr)`` raises, which catches accidental ``if expr:``.

After construction every binary node has operands of one type: :func:`binary` inserts the casts that
promotion (see :mod:`tecomp.ir.dtype`) asks for, so the emitters never promote. Walking and rewriting
trees is :mod:`tecomp.ir.traverse`; the operator kinds are :mod:`tecomp.ir.opkind`.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtype as dt
from .dtype import DType
from .opkind import BinOpKind, IterKind, ReduceKind, UnOpKind

# the operator kinds live in opkind.py (no dependency on the nodes) and are re-exported here
__all__ = ["Expr", "Const", "Var", "IterVar", "IterKind", "BinOp", "BinOpKind", "UnOp", "UnOpKind",
           "Cast", "Select", "TensorRead", "Reduce", "ReduceKind", "Load", "const", "as_expr",
           "binary", "unary", "cast", "select", "is_const"]


class Expr:
    """Base of all expressions; every node has a ``dtype``."""

    __slots__ = ("dtype",)
    __hash__ = object.__hash__

    def children(self) -> tuple:
        return ()

    def with_children(self, ch: tuple) -> "Expr":
        return self

    def __bool__(self):
        raise TypeError("a tecomp expression has no truth value; use tc.if_then_else for conditions "
                        "and `is` to compare nodes")

    # arithmetic
    def __add__(self, o): return binary(BinOpKind.ADD, self, o)
    def __radd__(self, o): return binary(BinOpKind.ADD, o, self)
    def __sub__(self, o): return binary(BinOpKind.SUB, self, o)
    def __rsub__(self, o): return binary(BinOpKind.SUB, o, self)
    def __mul__(self, o): return binary(BinOpKind.MUL, self, o)
    def __rmul__(self, o): return binary(BinOpKind.MUL, o, self)
    def __truediv__(self, o): return binary(BinOpKind.DIV, self, o)
    def __rtruediv__(self, o): return binary(BinOpKind.DIV, o, self)
    def __floordiv__(self, o): return binary(BinOpKind.FLOORDIV, self, o)
    def __rfloordiv__(self, o): return binary(BinOpKind.FLOORDIV, o, self)
    def __mod__(self, o): return binary(BinOpKind.MOD, self, o)
    def __rmod__(self, o): return binary(BinOpKind.MOD, o, self)
    def __neg__(self): return unary(UnOpKind.NEG, self)
    def __pos__(self): return self
    def __abs__(self): return unary(UnOpKind.ABS, self)
    # comparisons build expressions
    def __lt__(self, o): return binary(BinOpKind.LT, self, o)
    def __le__(self, o): return binary(BinOpKind.LE, self, o)
    def __gt__(self, o): return binary(BinOpKind.GT, self, o)
    def __ge__(self, o): return binary(BinOpKind.GE, self, o)
    def __eq__(self, o): return binary(BinOpKind.EQ, self, o)  # type: ignore[override]
    def __ne__(self, o): return binary(BinOpKind.NE, self, o)  # type: ignore[override]
    # logic on bool expressions
    def __and__(self, o): return binary(BinOpKind.AND, self, o)
    def __rand__(self, o): return binary(BinOpKind.AND, o, self)
    def __or__(self, o): return binary(BinOpKind.OR, self, o)
    def __ror__(self, o): return binary(BinOpKind.OR, o, self)
    def __invert__(self): return unary(UnOpKind.NOT, self)

    def __repr__(self):
        from .printer import expr_str
        return expr_str(self)


class Const(Expr):
    """A constant of a given type; ``weak`` marks one that came from a Python scalar."""

    __slots__ = ("value", "weak")

    def __init__(self, value, t: DType, weak: bool = False):
        self.dtype = t
        self.value = _normalize(value, t)
        self.weak = weak


def _normalize(value, t: DType):
    if t.is_bool:
        return bool(value)
    if t.is_int:
        if isinstance(value, float) and not float(value).is_integer():
            raise TypeError(f"constant {value!r} is not an integer and cannot have type {t}")
        v = int(value)
        lo, hi = _int_range(t)
        if not lo <= v <= hi:
            raise OverflowError(f"constant {v} does not fit in {t}")
        return v
    return float(t.np.type(value))  # round to the type's precision


_RANGES: dict = {}


def _int_range(t: DType) -> tuple:
    r = _RANGES.get(t.name)
    if r is None:
        info = np.iinfo(t.np)
        r = _RANGES[t.name] = (int(info.min), int(info.max))
    return r


class Var(Expr):
    """A named integer variable (loop variable or iteration variable). Compared by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str, t: DType = dt.INDEX):
        self.name, self.dtype = name, t


class IterVar(Var):
    """An iteration variable with a domain ``[begin, end)``; the bounds may be expressions."""

    __slots__ = ("begin", "end", "kind")

    def __init__(self, name: str, begin: Expr, end: Expr, kind: IterKind):
        super().__init__(name)
        self.begin, self.end, self.kind = begin, end, kind

    @property
    def extent(self) -> Expr:
        from .traverse import simplify  # traverse imports the nodes
        return simplify(self.end - self.begin)

    @property
    def const_extent(self) -> int | None:
        e = self.extent
        return e.value if isinstance(e, Const) else None


class BinOp(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: BinOpKind, a: Expr, b: Expr, t: DType):
        self.op, self.a, self.b, self.dtype = op, a, b, t

    def children(self):
        return (self.a, self.b)

    def with_children(self, ch):
        return binary(self.op, ch[0], ch[1])


class UnOp(Expr):
    __slots__ = ("op", "a")

    def __init__(self, op: UnOpKind, a: Expr, t: DType):
        self.op, self.a, self.dtype = op, a, t

    def children(self):
        return (self.a,)

    def with_children(self, ch):
        return unary(self.op, ch[0])


class Cast(Expr):
    __slots__ = ("a",)

    def __init__(self, t: DType, a: Expr):
        self.dtype, self.a = t, a

    def children(self):
        return (self.a,)

    def with_children(self, ch):
        return cast(ch[0], self.dtype)


class Select(Expr):
    """``cond ? t : f``. Lazy: only the chosen branch is evaluated (guards against bad loads)."""

    __slots__ = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        self.cond, self.t, self.f, self.dtype = cond, t, f, t.dtype

    def children(self):
        return (self.cond, self.t, self.f)

    def with_children(self, ch):
        return select(*ch)


class TensorRead(Expr):
    """``tensor[indices]`` in the DSL (lowering turns it into :class:`Load`)."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor, indices: tuple):
        self.tensor, self.indices, self.dtype = tensor, tuple(indices), tensor.dtype

    def children(self):
        return self.indices

    def with_children(self, ch):
        return TensorRead(self.tensor, tuple(ch))


class Load(Expr):
    """``buffer[indices]`` in the loop IR (one element)."""

    __slots__ = ("buffer", "indices")

    def __init__(self, buffer, indices: tuple):
        self.buffer, self.indices, self.dtype = buffer, tuple(indices), buffer.dtype

    def children(self):
        return self.indices

    def with_children(self, ch):
        return Load(self.buffer, tuple(ch))


class Reduce(Expr):
    """A reduction of ``source`` over ``axes``; only allowed as the whole body of a compute."""

    __slots__ = ("kind", "source", "axes")

    def __init__(self, kind: ReduceKind, source: Expr, axes: tuple):
        self.kind, self.source, self.axes, self.dtype = kind, source, tuple(axes), source.dtype

    def children(self):
        return (self.source,)

    def with_children(self, ch):
        return Reduce(self.kind, ch[0], self.axes)

    @property
    def identity(self) -> Const:
        return Const(self.kind.identity(self.dtype), self.dtype)


# ----------------------------------------------------------------------------- construction

def const(value, t=None) -> Const:
    """A typed constant; without ``t`` the type is that of the Python/numpy scalar."""
    return Const(value, dt.scalar_dtype(value) if t is None else dt.dtype(t))


def as_expr(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (bool, int, float)):
        return Const(x, dt.scalar_dtype(x), weak=True)
    if isinstance(x, (np.bool_, np.integer, np.floating)):
        return Const(x.item(), dt.dtype(x.dtype))
    raise TypeError(f"cannot use {type(x).__name__} {x!r} in a tecomp expression")


def _weak(e: Expr) -> bool:
    return isinstance(e, Const) and e.weak


def cast(x, t) -> Expr:
    """Convert ``x`` to type ``t`` (C semantics: float -> int truncates toward zero)."""
    x, t = as_expr(x), dt.dtype(t)
    if x.dtype is t:
        return x
    if isinstance(x, Const):
        v = x.value
        if t.is_int and isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"cannot cast {v} to {t}")
            v = int(v)
        if t.is_int:  # wrap like a C conversion would
            v = int(np.array(v).astype(t.np))
        return Const(v, t)
    return Cast(t, x)


def _coerce(e: Expr, t: DType) -> Expr:
    """Cast for promotion; a weak Python scalar must fit the type it takes (as in numpy)."""
    if _weak(e) and e.dtype is not t:
        if t.is_int and isinstance(e.value, float):
            return cast(e, t)
        return Const(e.value, t)
    return cast(e, t)


def binary(op: BinOpKind, a, b) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if op.is_logical:
        if not (a.dtype.is_bool and b.dtype.is_bool):
            raise TypeError(f"'{op.value}' needs bool operands, got {a.dtype} and {b.dtype}")
        return _fold(BinOp(op, a, b, dt.bool_))
    t = dt.promote(a.dtype, b.dtype, _weak(a), _weak(b))
    if op is BinOpKind.DIV and not t.is_float:
        t = dt.float64
    elif t.is_bool and not (op.is_compare or op in (BinOpKind.MIN, BinOpKind.MAX)):
        raise TypeError(f"'{op.value}' is not defined on two bool operands; cast one first")
    a, b = _coerce(a, t), _coerce(b, t)
    return _fold(BinOp(op, a, b, dt.bool_ if op.is_compare else t))


def unary(op: UnOpKind, a) -> Expr:
    a = as_expr(a)
    if op is UnOpKind.NOT:
        if not a.dtype.is_bool:
            raise TypeError(f"logical not needs a bool operand, got {a.dtype}")
        t = a.dtype
    elif op.is_math:
        t = a.dtype if a.dtype.is_float else dt.float64
        a = cast(a, t)
    elif op.is_rounding and not a.dtype.is_bool:
        if not a.dtype.is_float:
            return a
        t = a.dtype
    else:
        if a.dtype.is_bool:
            raise TypeError(f"'{op.value}' is not defined on a bool operand")
        t = a.dtype
    return _fold(UnOp(op, a, t))


def select(cond, t, f) -> Expr:
    cond, t, f = as_expr(cond), as_expr(t), as_expr(f)
    if not cond.dtype.is_bool:
        raise TypeError(f"if_then_else condition must be bool, got {cond.dtype}")
    rt = dt.promote(t.dtype, f.dtype, _weak(t), _weak(f))
    t, f = _coerce(t, rt), _coerce(f, rt)
    if isinstance(cond, Const):
        return t if cond.value else f
    return Select(cond, t, f)


# ----------------------------------------------------------------------------- folding

_PY = {
    BinOpKind.ADD: lambda x, y: x + y, BinOpKind.SUB: lambda x, y: x - y,
    BinOpKind.MUL: lambda x, y: x * y, BinOpKind.MIN: min, BinOpKind.MAX: max,
    BinOpKind.LT: lambda x, y: x < y, BinOpKind.LE: lambda x, y: x <= y,
    BinOpKind.GT: lambda x, y: x > y, BinOpKind.GE: lambda x, y: x >= y,
    BinOpKind.EQ: lambda x, y: x == y, BinOpKind.NE: lambda x, y: x != y,
    BinOpKind.AND: lambda x, y: x and y, BinOpKind.OR: lambda x, y: x or y,
}


def _fold(e: Expr) -> Expr:
    """Fold integer/bool constants and trivial index identities; floats are left to the emitters."""
    if isinstance(e, BinOp):
        a, b, op = e.a, e.b, e.op
        ca, cb = isinstance(a, Const), isinstance(b, Const)
        if ca and cb and not a.dtype.is_float:
            x, y = a.value, b.value
            if op in _PY:
                v = _PY[op](x, y)
            elif op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and y != 0:
                v = x // y if op is BinOpKind.FLOORDIV else x % y
            else:
                return e
            try:
                return Const(v, e.dtype)
            except OverflowError:
                return e
        if a.dtype.is_int:
            if op is BinOpKind.ADD:
                if cb and b.value == 0:
                    return a
                if ca and a.value == 0:
                    return b
            elif op is BinOpKind.SUB and cb and b.value == 0:
                return a
            elif op is BinOpKind.SUB and a is b:
                return Const(0, e.dtype)
            elif op is BinOpKind.MUL:
                if (cb and b.value == 1):
                    return a
                if ca and a.value == 1:
                    return b
                if (cb and b.value == 0) or (ca and a.value == 0):
                    return Const(0, e.dtype)
            elif op is BinOpKind.FLOORDIV and cb and b.value == 1:
                return a
            elif op is BinOpKind.MOD and cb and b.value == 1:
                return Const(0, e.dtype)
    elif isinstance(e, UnOp) and isinstance(e.a, Const) and not e.a.dtype.is_float:
        if e.op is UnOpKind.NEG:
            return Const(-e.a.value, e.dtype)
        if e.op is UnOpKind.NOT:
            return Const(not e.a.value, e.dtype)
        if e.op is UnOpKind.ABS:
            return Const(abs(e.a.value), e.dtype)
    return e


def is_const(e, value=None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)
