"""Elementwise and normalization operators (small multi-stage DAGs for fusion)."""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor
from . import arguments as chk

__all__ = ["bias_add", "relu", "softmax"]


def bias_add(x: Tensor, bias: Tensor, axis: int = -1, *, name: str = "bias_add") -> Tensor:
    """``x + bias`` with the 1-d ``bias`` broadcast along dimension ``axis`` of ``x``.

    Parameters
    ----------
    x : Tensor
        Any rank >= 1.
    bias : Tensor
        ``(x.shape[axis],)``, the dtype of ``x``.
    axis : int
        The dimension of ``x`` that ``bias`` runs along (negative counts from the end).
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.

    Raises
    ------
    TypeError
        Non-tensor arguments or a dtype mismatch.
    ValueError
        A rank-0 ``x``, a ``bias`` that is not 1-d, a bad ``axis`` or a length mismatch.
    """
    op = "bias_add"
    chk.tensor(op, "x", x)
    chk.tensor(op, "bias", bias, 1)
    if x.ndim < 1:
        raise ValueError("bias_add: 'x' must have rank >= 1")
    chk.same_dtype(op, "x", x, "bias", bias)
    ax = chk.axis(op, "axis", axis, x.ndim)
    if bias.shape[0] != x.shape[ax]:
        raise ValueError(f"bias_add: 'bias' has length {bias.shape[0]} but dimension {ax} of 'x' "
                         f"(shape {x.shape}) has size {x.shape[ax]}")
    return ir.compute(x.shape, lambda *i: x[i] + bias[i[ax]], name=name, tag="elemwise")


def relu(x: Tensor, *, name: str = "relu") -> Tensor:
    """``max(x, 0)`` elementwise.

    Parameters
    ----------
    x : Tensor
        Any shape, numeric dtype.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.
    """
    chk.tensor("relu", "x", x)
    chk.numeric("relu", "x", x)
    zero = ir.const(0, x.dtype)
    return ir.compute(x.shape, lambda *i: ir.maximum(x[i], zero), name=name, tag="elemwise")


def softmax(x: Tensor, axis: int = -1, *, name: str = "softmax") -> Tensor:
    """Numerically stable softmax along ``axis``, as four stages.

    ``{name}_max`` (max-reduce), ``{name}_exp`` (``exp(x - max)``), ``{name}_sum`` (sum-reduce) and
    ``{name}`` (the division), so that schedules can fuse and inline them.

    Parameters
    ----------
    x : Tensor
        Any rank >= 1, float dtype.
    axis : int
        The dimension normalized over (negative counts from the end).
    name : str
        Name of the output stage (the others are derived from it).

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.

    Raises
    ------
    TypeError
        A non-tensor or non-float ``x``.
    ValueError
        A rank-0 ``x`` or a bad ``axis``.
    """
    op = "softmax"
    chk.tensor(op, "x", x)
    chk.floating(op, "x", x)
    if x.ndim < 1:
        raise ValueError("softmax: 'x' must have rank >= 1")
    ax = chk.axis(op, "axis", axis, x.ndim)
    red_shape = x.shape[:ax] + x.shape[ax + 1:]

    def full(idx, k):
        return tuple(idx[:ax]) + (k,) + tuple(idx[ax:])

    def drop(idx):
        return tuple(idx[:ax]) + tuple(idx[ax + 1:])

    km = ir.reduce_axis(x.shape[ax], name="k")
    mx = ir.compute(red_shape, lambda *i: ir.max(x[full(i, km)], axis=km), name=f"{name}_max",
                    tag="softmax_max")
    ex = ir.compute(x.shape, lambda *i: ir.exp(x[i] - mx[drop(i)]), name=f"{name}_exp",
                    tag="softmax_exp")
    ks = ir.reduce_axis(x.shape[ax], name="k")
    sm = ir.compute(red_shape, lambda *i: ir.sum(ex[full(i, ks)], axis=ks), name=f"{name}_sum",
                    tag="softmax_sum")
    return ir.compute(x.shape, lambda *i: ex[i] / sm[drop(i)], name=name, tag="softmax_norm")
