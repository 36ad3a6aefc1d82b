"""An NCHW convolution computed in a blocked channel layout (NCHW[x]c, as oneDNN's nChw16c and
MLAS's NCHWc), all its layout changes stages of the DAG that the search schedules like any other
(:func:`tecomp.ops.conv2d` with ``method="blocked"``):

- ``pad``: the input zero-padded and re-laid out to ``(N, C / cb, H, W, cb)``: a pixel's ``cb``
  channels contiguous, so the convolution's reduction over them reads whole cache lines;
- ``wpack``: the OIHW weight as ``(O / ob, C_g / cb, KH, KW, cb, ob)`` (depthwise: ``(C / ob,
  KH, KW, ob)``). It depends only on the weight: where the weight is a build-time constant
  (``tc.build(..., constants=)``, a network's layer) it runs once at build time;
- the convolution ``(N, O / ob, OH, OW, ob)``: the vector along the ``ob`` output channels of a
  block, the reduction over ``(C_g / cb, KH, KW, cb)``;
- the output stage, the result as NCHW again.

The search keeps the two activation reorders at root and tiles them over both layouts
(:func:`tecomp.search.analysis.transposing_stages`). Blocks are 16 channels (8 where 16 does not
divide the channel count, else all of them: a 3-channel image is one block), which is one
AVX-512 vector or two AVX2 vectors; the search's tiles split them further where that pays.
"""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor

__all__ = ["channel_block", "blocked_conv2d", "BLOCKS"]

#: the block sizes tried, largest first
BLOCKS = (16, 8)


def channel_block(channels: int) -> int:
    """The block of ``channels``: the first of :data:`BLOCKS` that divides it, else all of them."""
    return next((b for b in BLOCKS if channels % b == 0), channels)


def _pad_blocked(data: Tensor, pads: tuple, cb: int, name: str) -> Tensor:
    """``(N, C / cb, H + pt + pb, W + pl + pr, cb)``: NCHW ``data`` zero-padded and blocked."""
    N, C, H, W = data.shape
    pt, pl, pb, pr = pads
    shape = (N, C // cb, H + pt + pb, W + pl + pr, cb)
    if pt == pl == pb == pr == 0:
        return ir.compute(shape, lambda n, c0, h, w, c1: data[n, c0 * cb + c1, h, w], name=name,
                          tag="pad")
    zero = ir.const(0, data.dtype)

    def body(n, c0, h, w, c1):
        cond = (h >= pt) & (h < H + pt) & (w >= pl) & (w < W + pl)
        return ir.if_then_else(cond, data[n, c0 * cb + c1, h - pt, w - pl], zero)

    return ir.compute(shape, body, name=name, tag="pad")


def blocked_conv2d(data: Tensor, weight: Tensor, pads: tuple, stride: tuple, dilation: tuple,
                   groups: int, out_hw: tuple, name: str) -> Tensor:
    """NCHW ``data`` (N, C, H, W) convolved with the OIHW ``weight`` through the blocked layout
    (see the module docstring); arguments as :func:`tecomp.ops.conv2d` checked and normalized
    them (``pads`` top, left, bottom, right; ``out_hw`` the output's height and width)."""
    N, C, _, _ = data.shape
    O, CG, KH, KW = weight.shape
    (sh, sw), (dh, dw), (OH, OW) = stride, dilation, out_hw
    OG = O // groups
    depthwise = groups == C == O
    if depthwise:
        cb = ob = channel_block(C)
    else:
        cb, ob = channel_block(CG), channel_block(OG)  # a block never straddles two groups
    pad = _pad_blocked(data, pads, cb, f"{name}_pad")
    ry = ir.reduce_axis(KH, name="ry")
    rx = ir.reduce_axis(KW, name="rx")
    if depthwise:
        wp = ir.compute((O // ob, KH, KW, ob), lambda o0, y, x, o1: weight[o0 * ob + o1, 0, y, x],
                        name=f"{name}_wpack", tag="weight_pack")
        yb = ir.compute(
            (N, O // ob, OH, OW, ob),
            lambda n, o0, y, x, o1: ir.sum(
                pad[n, o0, y * sh + ry * dh, x * sw + rx * dw, o1] * wp[o0, ry, rx, o1],
                axis=[ry, rx]),
            name=f"{name}_blocked", tag="conv2d_nchwc")
    else:
        r0 = ir.reduce_axis(CG // cb, name="rc0")
        r1 = ir.reduce_axis(cb, name="rc1")
        wp = ir.compute((O // ob, CG // cb, KH, KW, cb, ob),
                        lambda o0, c0, y, x, c1, o1: weight[o0 * ob + o1, c0 * cb + c1, y, x],
                        name=f"{name}_wpack", tag="weight_pack")
        per_group = OG // ob  # output blocks per group; its input blocks start at g * CG / cb

        def in_block(o0):
            return r0 if groups == 1 else (o0 // per_group) * (CG // cb) + r0

        yb = ir.compute(
            (N, O // ob, OH, OW, ob),
            lambda n, o0, y, x, o1: ir.sum(
                pad[n, in_block(o0), y * sh + ry * dh, x * sw + rx * dw, r1]
                * wp[o0, r0, ry, rx, r1, o1],
                axis=[r0, ry, rx, r1]),
            name=f"{name}_blocked", tag="conv2d_nchwc")
    return ir.compute((N, O, OH, OW), lambda n, o, y, x: yb[n, o // ob, y, x, o % ob],
                      name=name, tag="conv2d_blocked")
