"""Layout-changing stages of the convolutions that compute an NCHW operator channels-last inside
(:func:`tecomp.ops.conv2d` with ``method="channels_last"``, and Winograd in NCHW): the padding copy
that is also the transpose to channels-last, and the transpose of the result back to NCHW. The
search keeps both at root (``search.analysis.transposing_stages``): each is one cheap pass over
its tensor, where computing them inside a consumer's tiles would gather every vector lane."""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor

__all__ = ["pad_to_nhwc", "nhwc_to_nchw"]


def pad_to_nhwc(data: Tensor, pt: int, pl: int, pb: int, pr: int, name: str) -> Tensor:
    """``(N, H + pt + pb, W + pl + pr, C)``: the NCHW ``data`` zero-padded and channels-last (a
    plain transpose without padding)."""
    N, C, H, W = data.shape
    if pt == pl == pb == pr == 0:
        return ir.compute((N, H, W, C), lambda n, h, w, c: data[n, c, h, w], name=name,
                          tag="pad")
    zero = ir.const(0, data.dtype)

    def body(n, h, w, c):
        cond = (h >= pt) & (h < H + pt) & (w >= pl) & (w < W + pl)
        return ir.if_then_else(cond, data[n, c, h - pt, w - pl], zero)

    return ir.compute((N, H + pt + pb, W + pl + pr, C), body, name=name, tag="pad")


def nhwc_to_nchw(y: Tensor, name: str, tag: str) -> Tensor:
    """The channels-last ``y`` ``(N, H, W, C)`` as NCHW ``(N, C, H, W)``."""
    N, H, W, C = y.shape
    return ir.compute((N, C, H, W), lambda n, c, h, w: y[n, h, w, c], name=name, tag=tag)
