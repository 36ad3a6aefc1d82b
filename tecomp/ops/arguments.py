"""Argument validation shared by the operator definitions (messages name the argument)."""
from __future__ import annotations

from ..ir import dtype as dt
from ..ir.tensor import Tensor


def tensor(op: str, arg: str, x, ndim: int | tuple | None = None) -> Tensor:
    """``x`` must be a Tensor (of rank ``ndim``, or one of the ranks in a tuple)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: argument '{arg}' must be a tecomp Tensor, got {type(x).__name__}")
    if ndim is not None:
        ranks = ndim if isinstance(ndim, tuple) else (ndim,)
        if x.ndim not in ranks:
            want = " or ".join(str(r) for r in ranks)
            raise ValueError(f"{op}: argument '{arg}' must have rank {want}, got rank {x.ndim} "
                             f"(shape {x.shape})")
    return x


def numeric(op: str, arg: str, x: Tensor) -> None:
    if x.dtype.is_bool:
        raise TypeError(f"{op}: argument '{arg}' has dtype bool; a numeric dtype is required")


def floating(op: str, arg: str, x: Tensor) -> None:
    if not x.dtype.is_float:
        raise TypeError(f"{op}: argument '{arg}' has dtype {x.dtype}; a float dtype is required")


def same_dtype(op: str, a_name: str, a: Tensor, b_name: str, b: Tensor) -> None:
    if a.dtype is not b.dtype:
        raise TypeError(f"{op}: dtype mismatch: '{a_name}' is {a.dtype} but '{b_name}' is "
                        f"{b.dtype}; cast one of them first")


def index_array(op: str, arg: str, x: Tensor) -> None:
    """Sparse index arrays are 1-d int32."""
    tensor(op, arg, x, 1)
    if x.dtype is not dt.int32:
        raise TypeError(f"{op}: index array '{arg}' must have dtype int32, got {x.dtype}")


def pos_int(op: str, arg: str, v) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: '{arg}' must be an int, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < 1:
        raise ValueError(f"{op}: '{arg}' must be positive, got {v}")
    return v


def int_pair(op: str, arg: str, v, minimum: int) -> tuple:
    """An int or a pair of ints (h, w), each >= ``minimum``."""
    vals = v if isinstance(v, (tuple, list)) else (v, v)
    if len(vals) != 2:
        raise ValueError(f"{op}: '{arg}' must be an int or an (h, w) pair, got {v!r}")
    out = []
    for x in vals:
        if isinstance(x, bool) or not hasattr(x, "__index__"):
            raise TypeError(f"{op}: '{arg}' entries must be ints, got {v!r}")
        if int(x) < minimum:
            raise ValueError(f"{op}: '{arg}' entries must be >= {minimum}, got {v!r}")
        out.append(int(x))
    return tuple(out)


def axis(op: str, arg: str, a, ndim: int) -> int:
    if isinstance(a, bool) or not hasattr(a, "__index__"):
        raise TypeError(f"{op}: '{arg}' must be an int, got {a!r}")
    a = int(a)
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: '{arg}'={a} is out of range for a rank-{ndim} tensor")
    return a % ndim
