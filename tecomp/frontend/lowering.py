"""One entry point from a :class:`~tecomp.frontend.graph.Node` to tecomp computes
(:func:`lower_node`), and the evaluation of a node whose inputs are all constants
(:func:`fold_node`: numpy for the cheap operators a model computes on constants, such as shapes
and weight transposes; a default-schedule tecomp kernel for the rest)."""
from __future__ import annotations

import math

import numpy as np

from .. import ir
from ..ir.tensor import Tensor
from .activations import activation_numpy
from .cumsum import lower_cumsum
from .einsum import lower_einsum
from .graph import Node, Op, Pattern
from .lower_elemwise import BINARY, UNARY, Imm, lower_binary, lower_unary, lower_where
from .lower_nn import Reduction, lower_anchor, lowering_needs_tensor
from .lower_shape import lower_injective

__all__ = ["lower_node", "fold_node", "Imm", "inline_as_literal"]


def lower_node(node: Node, operands: list, name: str) -> Tensor:
    """The output tensor of ``node`` computed from ``operands`` (Tensors, or :class:`Imm` for
    one-element constants where :func:`inline_as_literal` allowed them)."""
    op = node.op
    if op is Op.WHERE:
        return lower_where(operands, name)
    if op is Op.EINSUM:
        return lower_einsum(node.attrs["spec"], operands, name)
    if op is Op.CUMSUM:
        return lower_cumsum(operands[0], node.attrs, name)
    if op in BINARY:
        return lower_binary(op, operands, node.attrs, name)
    if op in UNARY:
        return lower_unary(op, operands, node.attrs, name)
    if op.pattern is Pattern.INJECTIVE:
        return lower_injective(op, operands, node.attrs, name)
    return lower_anchor(op, operands, node.attrs, name)


def inline_as_literal(node: Node, position: int, array: np.ndarray) -> bool:
    """Whether constant input ``position`` of ``node`` is written as a literal (one element, an
    operand the lowering reads by broadcasting) rather than passed as a tensor argument."""
    return array.size == 1 and not lowering_needs_tensor(node.op, position)


_ERF = np.vectorize(math.erf, otypes=[np.float64])

_NP_BINARY = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.POW: np.power,
              Op.MOD: np.mod, Op.FMOD: np.fmod,
              Op.MAXIMUM: np.maximum, Op.MINIMUM: np.minimum, Op.EQUAL: np.equal,
              Op.LESS: np.less, Op.LESS_EQUAL: np.less_equal, Op.GREATER: np.greater,
              Op.GREATER_EQUAL: np.greater_equal, Op.AND: np.logical_and,
              Op.OR: np.logical_or, Op.XOR: np.logical_xor}


def _np_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore"):
            q = np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b)))  # ONNX: C division
        return q.astype(a.dtype)
    return a / b


def _np_unary(op: Op, x: np.ndarray, attrs: dict) -> np.ndarray:
    if op is Op.RELU:
        return np.maximum(x, 0)
    if op is Op.CLIP:
        lo, hi = attrs.get("min"), attrs.get("max")
        return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi).astype(x.dtype)
    if op is Op.CAST:
        return x.astype(attrs["dtype"])
    if op is Op.IDENTITY:
        return x
    if op is Op.NOT:
        return np.logical_not(x)
    if op is Op.ISNAN:
        return np.isnan(x)
    if op is Op.ACTIVATION:
        return activation_numpy(x, attrs)
    f = {Op.SIGMOID: lambda v: 1 / (1 + np.exp(-v)), Op.TANH: np.tanh, Op.EXP: np.exp,
         Op.LOG: np.log, Op.SQRT: np.sqrt, Op.NEG: np.negative, Op.ABS: np.abs,
         Op.FLOOR: np.floor, Op.CEIL: np.ceil, Op.ROUND: np.round, Op.SIN: np.sin,
         Op.COS: np.cos,
         Op.RECIPROCAL: lambda v: 1 / v, Op.ERF: _ERF,
         Op.GELU: lambda v: 0.5 * v * (1 + _ERF(v / math.sqrt(2)))}.get(op)
    return None if f is None else np.asarray(f(x)).astype(x.dtype)


def _np_cumsum(x: np.ndarray, at: dict) -> np.ndarray:
    ax = at["axis"]
    y = np.flip(x, ax) if at["reverse"] else x
    y = np.cumsum(y, axis=ax, dtype=x.dtype)
    if at["exclusive"]:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=ax)),
                            np.take(y, range(x.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(y, ax) if at["reverse"] else y


def _fold_numpy(node: Node, arrays: list):
    """``node`` evaluated in numpy, or None where only the tecomp kernel computes it."""
    op, at = node.op, node.attrs
    if op in _NP_BINARY:
        r = np.asarray(_NP_BINARY[op](arrays[0], arrays[1]))
        return r if r.dtype == bool else r.astype(np.result_type(arrays[0].dtype,
                                                                  arrays[1].dtype))
    if op is Op.WHERE:
        return np.where(*arrays)
    if op is Op.DIV:
        return _np_div(arrays[0], arrays[1])
    if op in UNARY:
        return _np_unary(op, arrays[0], at)
    if op is Op.RESHAPE:
        return arrays[0].reshape(at["shape"])
    if op is Op.TRANSPOSE:
        return arrays[0].transpose(at["perm"])
    if op is Op.CONCAT:
        return np.concatenate(arrays, axis=at["axis"])
    if op is Op.GATHER:
        n = arrays[0].shape[at["axis"]]
        idx = arrays[1].astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"Gather indices out of range [{-n}, {n})")
        return np.take(arrays[0], np.where(idx < 0, idx + n, idx), axis=at["axis"])
    if op is Op.GATHER_ELEMENTS:
        n = arrays[0].shape[at["axis"]]
        idx = arrays[1].astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"GatherElements indices out of range [{-n}, {n})")
        # the indices may be smaller than the data off the axis: only that corner is read
        data = arrays[0][tuple(slice(None) if d == at["axis"] else slice(0, s)
                               for d, s in enumerate(idx.shape))]
        return np.take_along_axis(data, np.where(idx < 0, idx + n, idx), at["axis"])
    if op is Op.SLICE:
        sl = tuple(slice(s, s + st * n if s + st * n >= 0 else None, st)
                   for s, st, n in zip(at["starts"], at["steps"], at["shape"]))
        return arrays[0][sl]
    if op is Op.EXPAND:
        return np.broadcast_to(arrays[0], at["shape"])
    if op is Op.PAD:
        return np.pad(arrays[0], list(zip(at["before"], at["after"])),
                      constant_values=at.get("value", 0))
    if op is Op.MATMUL:
        return np.matmul(arrays[0], arrays[1])
    if op is Op.EINSUM:
        return np.asarray(np.einsum(at["equation"], *arrays)).astype(arrays[0].dtype)
    if op is Op.CUMSUM:
        return _np_cumsum(arrays[0], at)
    if op is Op.REDUCE:
        f = {Reduction.SUM: np.sum, Reduction.MEAN: np.mean, Reduction.MAX: np.max,
             Reduction.MIN: np.min}[at["kind"]]
        return f(arrays[0], axis=tuple(at["axes"]), keepdims=bool(at["keepdims"])).astype(
            arrays[0].dtype)
    return None


def fold_node(node: Node, arrays: list) -> np.ndarray:
    """The value of ``node`` for constant inputs ``arrays``."""
    out = _fold_numpy(node, arrays)
    if out is None:  # a heavier operator on constants: run its own kernel once
        from ..build import build
        phs = [ir.placeholder(a.shape, a.dtype, name=f"c{k}") for k, a in enumerate(arrays)]
        t = lower_node(node, phs, "fold")
        used = [p for p in phs if any(p is q for q in _inputs_of(t))]
        kernel = build(ir.ComputeDAG(used + [t]), "llvm", cache=False)
        out = kernel(*[np.array(a, order="C", copy=None) for p, a in zip(phs, arrays)
                       if p in used])
    return np.array(out, order="C", copy=None)


def _inputs_of(t: Tensor) -> list:
    seen, stack, out = set(), [t], []
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if not x.op.inputs and not hasattr(x.op, "body"):
            out.append(x)
        stack.extend(x.op.inputs)
    return out


