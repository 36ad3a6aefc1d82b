"""Scalar data types and the promotion rules of tecomp expressions.

Promotion follows numpy >= 2 (NEP 50): two typed operands promote as ``np.result_type`` does, and a
Python ``int``/``float``/``bool`` scalar is *weak*: it takes the type of the typed operand when that
type can represent its kind (``float32 * 2.0 -> float32``, ``int8 + 1 -> int8``), and only moves an
integer operand to ``float64`` when a Python float meets it (``int32 * 0.5 -> float64``).
Index arithmetic (iteration variables, loop bounds) is ``int64``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DType", "dtype", "float16", "float32", "float64", "int8", "int32", "int64", "bool_",
           "INDEX", "promote", "scalar_dtype"]


class DType:
    """A scalar type: ``kind`` is ``"f"`` (float), ``"i"`` (signed int) or ``"b"`` (bool)."""

    __slots__ = ("name", "bits", "kind", "np")

    def __init__(self, name: str, bits: int, kind: str):
        self.name, self.bits, self.kind = name, bits, kind
        self.np = np.dtype(name)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __reduce__(self):  # pickles as the canonical instance
        return (dtype, (self.name,))


float16 = DType("float16", 16, "f")
float32 = DType("float32", 32, "f")
float64 = DType("float64", 64, "f")
int8 = DType("int8", 8, "i")
int32 = DType("int32", 32, "i")
int64 = DType("int64", 64, "i")
bool_ = DType("bool", 1, "b")
INDEX = int64

_BY_NAME = {d.name: d for d in (float16, float32, float64, int8, int32, int64, bool_)}


def dtype(x) -> DType:
    """Return the tecomp :class:`DType` for a name, numpy dtype or DType; raise TypeError if unsupported."""
    if isinstance(x, DType):
        return x
    try:
        name = np.dtype(x).name
    except TypeError:
        name = None
    if name not in _BY_NAME:
        raise TypeError(f"unsupported dtype {x!r}; supported: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def scalar_dtype(value) -> DType:
    """The type a Python scalar gets when it stands alone (int -> int64, float -> float64)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64 if isinstance(value, int) else dtype(value.dtype)
    if isinstance(value, (float, np.floating)):
        return float64 if isinstance(value, float) else dtype(value.dtype)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in an expression")


def promote(a: DType, b: DType, a_weak: bool = False, b_weak: bool = False) -> DType:
    """Result type of a binary arithmetic op on operands of types ``a`` and ``b``.

    ``*_weak`` marks an operand that came from a Python scalar (NEP 50 weak typing).
    """
    if a_weak and not b_weak:
        return _weak(b, a)
    if b_weak and not a_weak:
        return _weak(a, b)
    if a is b:  # the common case (index arithmetic); np.result_type is slow
        return a
    key = (a.name, b.name)
    r = _PROMOTED.get(key)
    if r is None:
        r = _PROMOTED[key] = dtype(np.result_type(a.np, b.np))
    return r


_PROMOTED: dict = {}


def _weak(strong: DType, weak: DType) -> DType:
    order = {"b": 0, "i": 1, "f": 2}
    if order[weak.kind] <= order[strong.kind]:
        return strong
    return int64 if weak.kind == "i" else float64
