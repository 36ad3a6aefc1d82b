"""Lowering of the injective operators (index maps: reshape, transpose, concat, gather, slice,
expand, pad) to tecomp computes. Their attributes are static (a frontend resolves shapes, starts
and permutations to plain ints before building the node)."""
from __future__ import annotations

import numpy as np

from .. import ir
from ..ir.tensor import Tensor
from .graph import Op
from .lower_elemwise import Imm, read

__all__ = ["lower_injective"]


def _strides(shape) -> list:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


def _reshape(x: Tensor, attrs: dict, name: str) -> Tensor:
    shape = tuple(attrs["shape"])
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64)):
        raise ValueError(f"reshape of {x.shape} to {shape} changes the element count")
    # a common leading part keeps its indices; the rest goes through the flat offset
    lead = 0
    while lead < min(len(shape), x.ndim) and shape[lead] == x.shape[lead]:
        lead += 1
    src_tail, dst_tail = x.shape[lead:], shape[lead:]
    ss, ds = _strides(src_tail), _strides(dst_tail)

    def body(*i):
        flat = 0
        for d, st in enumerate(ds):
            flat = flat + i[lead + d] * st if st != 1 else flat + i[lead + d]
        idx = list(i[:lead])
        for d, (st, n) in enumerate(zip(ss, src_tail)):
            if n == 1:
                idx.append(0)
                continue
            q = flat // st if st != 1 else flat
            idx.append(q % n if d > 0 else q)
        return x[tuple(idx)]

    return ir.compute(shape, body, name=name, tag="injective")


def _transpose(x: Tensor, attrs: dict, name: str) -> Tensor:
    perm = tuple(attrs["perm"])
    shape = tuple(x.shape[p] for p in perm)

    def body(*i):
        idx = [None] * x.ndim
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return x[tuple(idx)]

    return ir.compute(shape, body, name=name, tag="injective")


def _concat(ops: list, attrs: dict, name: str) -> Tensor:
    ax = attrs["axis"]
    shape = list(ops[0].shape)
    shape[ax] = sum(o.shape[ax] for o in ops)
    dtype = next((o.dtype for o in ops if isinstance(o, Tensor)), ops[0].dtype)

    def body(*i):
        starts, acc = [], 0
        for o in ops:
            starts.append(acc)
            acc += o.shape[ax]

        def part(k):
            o = ops[k]
            idx = list(i)
            idx[ax] = i[ax] - starts[k]
            if isinstance(o, Imm):
                return ir.const(o.scalar(), dtype)
            return o[tuple(idx)]
        e = part(len(ops) - 1)
        for k in range(len(ops) - 2, -1, -1):
            e = ir.if_then_else(i[ax] < starts[k + 1], part(k), e)
        return e

    return ir.compute(tuple(shape), body, name=name, tag="injective")


def _gather(data: Tensor, idx, attrs: dict, name: str) -> Tensor:
    ax, n = attrs["axis"], data.shape[attrs["axis"]]
    ishape = idx.shape
    shape = data.shape[:ax] + tuple(ishape) + data.shape[ax + 1:]

    def body(*i):
        if isinstance(idx, Imm):
            k = int(idx.scalar())
            j = ir.const(k + n if k < 0 else k, "int64")
        else:
            raw = ir.cast(idx[tuple(i[ax:ax + len(ishape)])], "int64")
            # negative indices count from the end; the clamp keeps any value in bounds (the
            # compiled model checks the real range first and reports it by node)
            j = ir.minimum(ir.maximum(ir.if_then_else(raw < 0, raw + n, raw), 0), n - 1)
        src = tuple(i[:ax]) + (j,) + tuple(i[ax + len(ishape):])
        return data[src]

    return ir.compute(shape, body, name=name, tag="injective")


def _gather_elements(data: Tensor, idx: Tensor, attrs: dict, name: str) -> Tensor:
    """``out[i] = data[i with axis replaced by idx[i]]``, the index clamped like Gather's."""
    ax, n = attrs["axis"], data.shape[attrs["axis"]]

    def body(*i):
        raw = ir.cast(idx[i], "int64")
        j = ir.minimum(ir.maximum(ir.if_then_else(raw < 0, raw + n, raw), 0), n - 1)
        return data[tuple(i[:ax]) + (j,) + tuple(i[ax + 1:])]

    return ir.compute(tuple(idx.shape), body, name=name, tag="injective")


def _slice(x: Tensor, attrs: dict, name: str) -> Tensor:
    starts, steps, shape = attrs["starts"], attrs["steps"], tuple(attrs["shape"])
    return ir.compute(shape, lambda *i: x[tuple(s + d * st for d, s, st in zip(i, starts, steps))],
                      name=name, tag="injective")


def _expand(x, attrs: dict, name: str) -> Tensor:
    shape = tuple(attrs["shape"])
    return ir.compute(shape, lambda *i: read(x, i), name=name, tag="injective")


def _pad(x: Tensor, attrs: dict, name: str) -> Tensor:
    before, after, value = attrs["before"], attrs["after"], attrs.get("value", 0.0)
    shape = tuple(s + b + a for s, b, a in zip(x.shape, before, after))
    fill = ir.const(value, x.dtype)

    def body(*i):
        conds = []
        for d, (b, a) in enumerate(zip(before, after)):
            if b:
                conds.append(i[d] >= b)
            if a:
                conds.append(i[d] < x.shape[d] + b)
        src = x[tuple(i[d] - b if b else i[d] for d, b in enumerate(before))]
        if not conds:
            return src
        c = conds[0]
        for more in conds[1:]:
            c = c & more
        return ir.if_then_else(c, src, fill)

    return ir.compute(shape, body, name=name, tag="injective")


def lower_injective(op: Op, ops: list, attrs: dict, name: str) -> Tensor:
    if op is Op.RESHAPE:
        return _reshape(ops[0], attrs, name)
    if op is Op.TRANSPOSE:
        return _transpose(ops[0], attrs, name)
    if op is Op.CONCAT:
        return _concat(ops, attrs, name)
    if op is Op.GATHER:
        return _gather(ops[0], ops[1], attrs, name)
    if op is Op.GATHER_ELEMENTS:
        return _gather_elements(ops[0], ops[1], attrs, name)
    if op is Op.SLICE:
        return _slice(ops[0], attrs, name)
    if op is Op.EXPAND:
        return _expand(ops[0], attrs, name)
    if op is Op.PAD:
        return _pad(ops[0], attrs, name)
    raise AssertionError(op)
