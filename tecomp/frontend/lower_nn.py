"""Lowering of the anchor operators (convolution, matrix products, reductions, softmax, layer
normalization, pooling) to tecomp computes, through :mod:`tecomp.ops` where it has them."""
from __future__ import annotations

import enum

from .. import ir, ops
from ..ir.tensor import Tensor
from .graph import Layout, Op
from .lower_elemwise import bcast_index, broadcast_shape, read

__all__ = ["Reduction", "PoolKind", "ConvAlgorithm", "lower_anchor"]


class Reduction(enum.Enum):
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"


class ConvAlgorithm(enum.Enum):
    """How a convolution is computed (the ``method`` of :func:`tecomp.ops.conv2d`)."""
    DIRECT = "direct"
    WINOGRAD = "winograd"
    BLOCKED = "blocked"  # NCHW[x]c: an NCHW convolution in blocks of channels
    PHASED = "phased"  # a strided NCHW one on its input split into stride phases (ops/phased.py)
    FLAT = "flat"  # a 1x1 unpadded one on the image as one row of pixels (flat.py)


class PoolKind(enum.Enum):
    MAX = "max"
    AVG = "avg"


def _conv2d(ops_: list, attrs: dict, name: str) -> Tensor:
    x, w = ops_[0], ops_[1]
    layout = attrs.get("layout", Layout.NCHW)  # NHWC: weight HWIO (the layout pass made it)
    method = attrs.get("algorithm", ConvAlgorithm.DIRECT)  # a variant of the group (fusion.py)
    strides = attrs["strides"]
    if method is ConvAlgorithm.FLAT:  # a direct convolution of the flattened image
        method = ConvAlgorithm.DIRECT
        if max(strides) > 1:  # x is the plain input: its strided pixels copied into one row
            x = ops.flat_subsample(x, tuple(strides), layout.value, f"{name}_subsample")
            strides = (1, 1)
        # (stride 1: x is already the flattened view of the model's buffer)
    out = ops.conv2d(x, w, stride=strides, padding=attrs["pads"],
                     dilation=attrs["dilations"], groups=attrs["groups"], layout=layout.value,
                     method=method.value, name=name)
    if len(ops_) > 2:
        b = ops_[2]
        ch = 1 if layout is Layout.NCHW else 3
        out = ir.compute(out.shape, lambda *i: out[i] + read(b, (i[ch],)),
                         name=f"{name}_bias", tag="elemwise")
    return out


def _matmul(a: Tensor, b: Tensor, name: str) -> Tensor:
    if a.ndim == 2 and b.ndim == 2:
        return ops.matmul(a, b, name=name)
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0]:
        return ops.batch_matmul(a, b, name=name)
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != K:
        raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    k = ir.reduce_axis(K, name="k")
    nb = len(batch)

    def body(*i):
        bi = i[:nb]
        ai = bcast_index(a.shape[:-2], bi) + (i[nb], k)
        bj = bcast_index(b.shape[:-2], bi) + (k, i[nb + 1])
        return ir.sum(a[ai] * b[bj], axis=k)

    return ir.compute(batch + (M, N), body, name=name, tag="batch_matmul" if nb else "matmul")


def _reduce(x: Tensor, attrs: dict, name: str) -> Tensor:
    axes, keep, kind = tuple(attrs["axes"]), attrs["keepdims"], attrs["kind"]
    raxes = {a: ir.reduce_axis(x.shape[a], name=f"r{a}") for a in axes}
    kept = [d for d in range(x.ndim) if d not in raxes]
    shape = tuple(1 if d in raxes else x.shape[d] for d in range(x.ndim)) if keep \
        else tuple(x.shape[d] for d in kept)

    def src(i):
        it = iter(i) if not keep else None
        idx = []
        for d in range(x.ndim):
            if d in raxes:
                idx.append(raxes[d])
            else:
                idx.append(i[d] if keep else next(it))
        return x[tuple(idx)]

    red = {Reduction.SUM: ir.sum, Reduction.MEAN: ir.sum, Reduction.MAX: ir.max,
           Reduction.MIN: ir.min}[kind]
    rlist = list(raxes.values())
    out = ir.compute(shape, lambda *i: red(src(i), axis=rlist), name=name, tag="reduce")
    if kind is Reduction.MEAN:
        n = 1
        for a in axes:
            n *= x.shape[a]
        s = out
        out = ir.compute(shape, lambda *i: s[i] * (1.0 / n), name=f"{name}_mean", tag="elemwise")
    return out


def _layer_norm(ops_: list, attrs: dict, name: str) -> Tensor:
    x, scale, bias = ops_[0], ops_[1], ops_[2] if len(ops_) > 2 else None
    ax, eps = attrs["axis"], attrs["epsilon"]
    norm = x.shape[ax:]
    n = 1
    for s in norm:
        n *= s
    inv = 1.0 / n
    lead = x.shape[:ax]

    def raxes():
        return [ir.reduce_axis(s, name=f"r{d}") for d, s in enumerate(norm)]

    r1 = raxes()
    s1 = ir.compute(lead, lambda *i: ir.sum(x[tuple(i) + tuple(r1)], axis=r1),
                    name=f"{name}_sum", tag="layer_norm_sum")
    r2 = raxes()

    def sq(i):
        d = x[tuple(i) + tuple(r2)] - s1[tuple(i)] * inv
        return ir.sum(d * d, axis=r2)

    s2 = ir.compute(lead, lambda *i: sq(i), name=f"{name}_var", tag="layer_norm_var")

    def body(*i):
        lo, tail = tuple(i[:ax]), tuple(i[ax:])
        y = (x[i] - s1[lo] * inv) / ir.sqrt(s2[lo] * inv + eps)
        y = y * read(scale, tail, x.dtype)
        return y + read(bias, tail, x.dtype) if bias is not None else y

    return ir.compute(x.shape, body, name=name, tag="layer_norm")


def _pool(x: Tensor, attrs: dict, name: str) -> Tensor:
    kind = attrs["kind"]
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    nhwc = attrs.get("layout", Layout.NCHW) is Layout.NHWC
    if nhwc:
        N, H, W, C = x.shape
    else:
        N, C, H, W = x.shape
    OH = (H + pt + pb - dh * (kh - 1) - 1) // sh + 1
    OW = (W + pl + pr - dw * (kw - 1) - 1) // sw + 1
    ry, rx = ir.reduce_axis(kh, name="ry"), ir.reduce_axis(kw, name="rx")
    padded = any((pt, pl, pb, pr))
    shape = (N, OH, OW, C) if nhwc else (N, C, OH, OW)

    def nchw(i):  # an index of this layout as (n, c, y, x)
        return (i[0], i[3], i[1], i[2]) if nhwc else tuple(i)

    def src(i, fill):
        n, c, y, xx = nchw(i)
        h, w = y * sh + ry * dh - pt, xx * sw + rx * dw - pl
        v = x[(n, h, w, c) if nhwc else (n, c, h, w)]
        if not padded:
            return v
        return ir.if_then_else((h >= 0) & (h < H) & (w >= 0) & (w < W), v, ir.const(fill, x.dtype))

    if kind is PoolKind.MAX:
        return ir.compute(shape, lambda *i: ir.max(src(i, float("-inf")), axis=[ry, rx]),
                          name=name, tag="pool_max")
    s = ir.compute(shape, lambda *i: ir.sum(src(i, 0.0), axis=[ry, rx]),
                   name=f"{name}_sum", tag="pool_sum")
    if attrs["count_include_pad"] or not padded:
        return ir.compute(s.shape, lambda *i: s[i] * (1.0 / (kh * kw)), name=name, tag="elemwise")

    def count(i):  # the window's in-bounds size (dilation 1: checked at import)
        _, _, y, xx = nchw(i)
        h0, w0 = y * sh - pt, xx * sw - pl
        ch = ir.minimum(h0 + kh, H) - ir.maximum(h0, 0)
        cw = ir.minimum(w0 + kw, W) - ir.maximum(w0, 0)
        return ir.cast(ch * cw, x.dtype)

    return ir.compute(s.shape, lambda *i: s[i] / count(i), name=name, tag="elemwise")


def lower_anchor(op: Op, ops_: list, attrs: dict, name: str) -> Tensor:
    if op is Op.CONV2D:
        return _conv2d(ops_, attrs, name)
    if op is Op.MATMUL:
        return _matmul(ops_[0], ops_[1], name)
    if op is Op.REDUCE:
        return _reduce(ops_[0], attrs, name)
    if op is Op.SOFTMAX:
        return ops.softmax(ops_[0], axis=attrs["axis"], name=name)
    if op is Op.LAYER_NORM:
        return _layer_norm(ops_, attrs, name)
    if op is Op.POOL:
        return _pool(ops_[0], attrs, name)
    raise AssertionError(op)


def lowering_needs_tensor(op: Op, position: int) -> bool:
    """Whether input ``position`` of ``op`` must be a tensor argument even when it is a
    one-element constant (the operators above index it like one)."""
    return op in (Op.CONV2D, Op.MATMUL, Op.REDUCE, Op.SOFTMAX, Op.POOL, Op.EINSUM,
                  Op.CUMSUM) or \
        (op is Op.LAYER_NORM and position == 0) or (op is Op.GATHER and position == 0) or \
        op is Op.GATHER_ELEMENTS or \
        (op in (Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.PAD) and position == 0)


