"""Lowering of the elementwise operators (numpy broadcasting) to tecomp computes.

An operand is a :class:`~tecomp.ir.Tensor` or an :class:`Imm`: a one-element constant that is
written into the expression as a literal instead of being passed as an argument (``x + 1e-5``,
``x ** 2``, ``x / 8.0``), so that such scalars cost no argument and no load.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..ir.expr import Const
from ..ir.tensor import Tensor
from .activations import activation_expr
from .graph import Op

__all__ = ["Imm", "broadcast_shape", "bcast_index", "read", "lower_binary", "lower_unary",
           "lower_where", "BINARY", "UNARY"]


@dataclass(frozen=True)
class Imm:
    """A one-element constant operand, inlined as a literal; ``shape`` still broadcasts."""
    value: np.ndarray

    @property
    def shape(self) -> tuple:
        return self.value.shape

    @property
    def dtype(self):
        return ir.dtype.dtype(self.value.dtype)

    def scalar(self):
        return self.value.reshape(()).item()


def broadcast_shape(*shapes) -> tuple:
    """numpy's broadcast of ``shapes``; ValueError when they do not broadcast."""
    return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))


def bcast_index(shape, idx: tuple) -> tuple:
    """The index into a tensor of ``shape`` broadcast to the output index ``idx``: a dimension
    of size 1 reads 0, unless the output's is 1 too (then the axis itself, so that a
    same-shape read stays recognizably elementwise to the schedules)."""
    off = len(idx) - len(shape)
    return tuple(idx[off + d] if shape[d] != 1 or getattr(idx[off + d], "const_extent", None) == 1
                 else 0 for d in range(len(shape)))


def read(x, idx: tuple, dtype=None):
    """``x`` at output index ``idx`` under numpy broadcasting (``x``'s rank <= ``len(idx)``)."""
    if isinstance(x, Imm):
        return ir.const(x.scalar(), dtype or x.dtype)
    return x[bcast_index(x.shape, idx)]


def _operand_dtype(ops):
    """The tensor operands' common dtype (ONNX requires equal types); an Imm takes it."""
    tensors = [o for o in ops if isinstance(o, Tensor)]
    return tensors[0].dtype if tensors else ops[0].dtype


def _pow_any(a, b):
    """``a ** b`` for any float ``a`` and ``b``, as numpy: ``|a| ** b`` from exp and log, negative
    for a negative base and an odd integer exponent, NaN for a negative base and a fraction;
    ``x ** 0`` and ``1 ** y`` are 1."""
    one = ir.const(1, a.dtype)
    m = ir.exp(b * ir.log(ir.abs(a)))
    whole = ir.floor(b) == b
    odd = whole & (ir.floor(b * 0.5) * 2.0 != b)
    neg = ir.if_then_else(whole, ir.if_then_else(odd, -m, m), ir.const(float("nan"), a.dtype))
    r = ir.if_then_else(a < 0.0, neg, m)
    return ir.if_then_else((b == 0.0) | (a == 1.0), one, r)


def _pow(a, b):
    """``a ** b`` with the common constant exponents as multiplies / sqrt (exact and fast); an
    integer one as :func:`_pow_any` (a negative base keeps its sign), a fraction as
    ``exp(e log a)`` (NaN for a negative base, as numpy)."""
    if not a.dtype.is_float:  # integers: in float64, rounded back (exp/log is not exact)
        return ir.cast(ir.round(_pow(ir.cast(a, "float64"), ir.cast(b, "float64") if isinstance(
            b, ir.Expr) else float(b))), a.dtype)
    if isinstance(b, ir.Expr) and not isinstance(b, Const):
        return _pow_any(a, b)
    e = b.value if isinstance(b, Const) else float(b)
    if e == 1.0:
        return a
    if e == 2.0:
        return a * a
    if e == 3.0:
        return a * a * a
    if e == 0.5:
        return ir.sqrt(a)
    if e == -1.0:
        return 1.0 / a
    if e == 0.0:
        return a * 0.0 + 1.0
    if float(e).is_integer():
        return _pow_any(a, ir.const(e, a.dtype))
    return ir.exp(ir.log(a) * e)


def _div(a, b):
    """``a / b``; on integers truncated toward zero (C's and ONNX's integer Div; by zero: 0)."""
    if a.dtype.is_float:
        return a / b
    q = a // b
    zero = ir.const(0, a.dtype)
    return ir.if_then_else((a % b != zero) & ((a < zero) != (b < zero)), q + 1, q)


def _fmod(a, b):
    """C's remainder (the dividend's sign) from the floor modulo (the divisor's)."""
    m = a % b
    zero = ir.const(0, m.dtype)
    return ir.if_then_else((m != zero) & ((a < zero) != (b < zero)), m - b, m)


BINARY = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.DIV: _div,
    Op.POW: _pow,
    Op.MOD: lambda a, b: a % b,
    Op.FMOD: _fmod,
    Op.MAXIMUM: ir.maximum,
    Op.MINIMUM: ir.minimum,
    Op.EQUAL: lambda a, b: a == b,
    Op.LESS: lambda a, b: a < b,
    Op.LESS_EQUAL: lambda a, b: a <= b,
    Op.GREATER: lambda a, b: a > b,
    Op.GREATER_EQUAL: lambda a, b: a >= b,
    Op.AND: lambda a, b: a & b,
    Op.OR: lambda a, b: a | b,
    Op.XOR: lambda a, b: a != b,
}


def lower_binary(op: Op, ops: list, attrs: dict, name: str) -> Tensor:
    a, b = ops
    shape = broadcast_shape(a.shape, b.shape)
    t = _operand_dtype(ops)
    f = BINARY[op]
    if op is Op.POW and isinstance(b, Imm):
        e = float(b.scalar())
        return ir.compute(shape, lambda *i: f(read(a, i, t), ir.const(e, t)), name=name,
                          tag="elemwise")
    return ir.compute(shape, lambda *i: f(read(a, i, t), read(b, i, t)), name=name,
                      tag="elemwise")


# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, below float32's resolution near 1
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x):
    """``erf(x)`` from exp and a rational polynomial (tecomp has no erf intrinsic)."""
    ax = ir.abs(x)
    t = 1.0 / (1.0 + _ERF_P * ax)
    poly = t * (_ERF_A[0] + t * (_ERF_A[1] + t * (_ERF_A[2] + t * (_ERF_A[3] + t * _ERF_A[4]))))
    y = 1.0 - poly * ir.exp(-(ax * ax))
    return ir.if_then_else(x < 0.0, -y, y)


def _gelu(x, attrs):
    if attrs.get("approximate") == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + ir.tanh(c * (x + 0.044715 * (x * x * x))))
    return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


def _clip(x, attrs):
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is not None:
        x = ir.maximum(x, ir.const(lo, x.dtype))
    if hi is not None:
        x = ir.minimum(x, ir.const(hi, x.dtype))
    return x


UNARY = {
    Op.RELU: lambda x, at: ir.maximum(x, ir.const(0, x.dtype)),
    Op.CLIP: _clip,
    Op.SIGMOID: lambda x, at: ir.sigmoid(x),
    Op.TANH: lambda x, at: ir.tanh(x),
    Op.ERF: lambda x, at: erf(x),
    Op.GELU: _gelu,
    Op.EXP: lambda x, at: ir.exp(x),
    Op.LOG: lambda x, at: ir.log(x),
    Op.SQRT: lambda x, at: ir.sqrt(x),
    Op.NEG: lambda x, at: -x,
    Op.ABS: lambda x, at: ir.abs(x),
    Op.FLOOR: lambda x, at: ir.floor(x),
    Op.CEIL: lambda x, at: ir.ceil(x),
    Op.ROUND: lambda x, at: ir.round(x),
    Op.SIN: lambda x, at: ir.sin(x),
    Op.COS: lambda x, at: ir.cos(x),
    Op.RECIPROCAL: lambda x, at: 1.0 / x,
    Op.CAST: lambda x, at: ir.cast(x, at["dtype"]),
    Op.NOT: lambda x, at: ~x,
    Op.ISNAN: lambda x, at: x != x,  # an unordered compare: true for NaN only
    Op.IDENTITY: lambda x, at: x,
    Op.ACTIVATION: activation_expr,
}


def lower_where(ops: list, name: str) -> Tensor:
    """``where(cond, a, b)`` with numpy broadcasting of all three."""
    c, a, b = ops
    shape = broadcast_shape(c.shape, a.shape, b.shape)
    t = _operand_dtype([a, b])
    return ir.compute(shape, lambda *i: ir.if_then_else(read(c, i), read(a, i, t), read(b, i, t)),
                      name=name, tag="elemwise")


def lower_unary(op: Op, ops: list, attrs: dict, name: str) -> Tensor:
    (x,) = ops
    f = UNARY[op]
    return ir.compute(x.shape, lambda *i: f(read(x, i), attrs), name=name, tag="elemwise")
