"""A strided NCHW convolution computed on its input split into stride phases
(:func:`tecomp.ops.conv2d` with ``method="phased"``).

An NCHW convolution vectorizes best along the output columns ``x``: the output rows are
contiguous, so its tiles store whole vectors, and the weight is the broadcast operand. With
stride ``s`` the input columns such a vector reads, ``s*x + rx``, are ``s`` apart: every vector
load gathers. The alternative the search also has, the vector along the output channels, reads
the input as broadcasts but must transpose every tile into the NCHW output; with a short
reduction (a 3-channel stem: 147 or 27 taps) that write-back costs as much as the arithmetic.

Here the padding copy, ``phase``, writes the padded input as ``(N, C, PH, PW, HQ, WQ)``
(``PH <= s_h`` and ``PW <= s_w`` planes): plane ``(py, px)`` holds the padded pixels
``(i*s_h + py, j*s_w + px)``. The convolution reads tap
``(ry, rx)`` of output pixel ``(y, x)`` from plane ``(ry*d_h % s_h, rx*d_w % s_w)`` at
``(y + ry*d_h // s_h, x + rx*d_w // s_w)``: unit stride along ``x``, as in a stride-1
convolution. Only the planes some tap reads are written (a 1x1 strided convolution reads one:
the copy is the input subsampled), and of each only the rows and columns read, so the copy
moves at most the bytes the plain padding does. With stride 1 it is the plain padding with two
unit dimensions.

:func:`flat_subsample` is that one plane of a 1x1 strided convolution written as one row of
pixels, ``(N, C, 1, OH*OW)`` (NCHW) or ``(N, 1, OH*OW, C)`` (NHWC): the 1x1 stride-1 convolution
of it is the FLAT form (``tecomp.workloads.networks.FLAT``), whose pixel axis tiles and
vectorizes across the ends of the output rows.
"""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor
from . import arguments as chk

__all__ = ["phased_conv2d", "phase_extent", "phase_planes", "flat_subsample"]


def phase_extent(out: int, kernel: int, stride: int, dilation: int) -> int:
    """Rows (or columns) of one phase plane that an output of ``out`` rows reads: the last
    output row's last tap, ``out - 1 + ((kernel - 1) * dilation) // stride``, plus one."""
    return out + ((kernel - 1) * dilation) // stride


def phase_planes(kernel: int, stride: int, dilation: int) -> int:
    """Phase planes along one dimension that the taps read: the largest ``r*dilation % stride``
    plus one."""
    return max((r * dilation) % stride for r in range(kernel)) + 1


def _indexed_planes(kernel: int, stride: int, dilation: int) -> int:
    """The planes the phase split holds: those the taps read, or all ``stride`` of them where
    the index ``r * dilation % stride`` may wrap (its bounds are then taken as ``[0, stride)``;
    the planes no tap reads are zero-padded copies, never read)."""
    n = phase_planes(kernel, stride, dilation)
    return n if n == 1 or (kernel - 1) * dilation < stride else stride


def _phase_split(data: Tensor, pads: tuple, stride: tuple, planes: tuple, extents: tuple,
                 name: str) -> Tensor:
    """``(N, C, PH, PW, HQ, WQ)``: NCHW ``data`` zero-padded and split into stride phases."""
    N, C, H, W = data.shape
    pt, pl = pads[0], pads[1]
    sh, sw = stride
    zero = ir.const(0, data.dtype)

    def body(n, c, py, px, i, j):
        h = i * sh + py - pt
        w = j * sw + px - pl
        cond = (h >= 0) & (h < H) & (w >= 0) & (w < W)
        return ir.if_then_else(cond, data[n, c, h, w], zero)

    return ir.compute((N, C) + tuple(planes) + tuple(extents), body, name=name, tag="pad")


def phased_conv2d(data: Tensor, weight: Tensor, pads: tuple, stride: tuple, dilation: tuple,
                  groups: int, out_hw: tuple, name: str) -> Tensor:
    """NCHW ``data`` (N, C, H, W) convolved with the OIHW ``weight`` through the stride-phase
    split of its padded input (see the module docstring); arguments as :func:`tecomp.ops.conv2d`
    checked and normalized them (``pads`` top, left, bottom, right; ``out_hw`` the output's
    height and width)."""
    N = data.shape[0]
    O, CG, KH, KW = weight.shape
    (sh, sw), (dh, dw), (OH, OW) = stride, dilation, out_hw
    OG = O // groups
    extents = (phase_extent(OH, KH, sh, dh), phase_extent(OW, KW, sw, dw))
    planes = (_indexed_planes(KH, sh, dh), _indexed_planes(KW, sw, dw))
    phase = _phase_split(data, pads, (sh, sw), planes, extents, f"{name}_phase")
    rc = ir.reduce_axis(CG, name="rc")
    ry = ir.reduce_axis(KH, name="ry")
    rx = ir.reduce_axis(KW, name="rx")

    def chan(o):
        return rc if groups == 1 else (o // OG) * CG + rc

    def plane(r, k, d, s, n_planes):
        # one plane while r * d reaches s (the dilation a multiple of the stride): index 0,
        # which the bounds check sees too (it takes such an ``r * d % s`` to reach ``s - 1``)
        return 0 if n_planes == 1 and (k - 1) * d >= s else (r * d) % s

    return ir.compute(
        (N, O, OH, OW),
        lambda n, o, y, x: ir.sum(
            phase[n, chan(o), plane(ry, KH, dh, sh, planes[0]),
                  plane(rx, KW, dw, sw, planes[1]),
                  y + (ry * dh) // sh,
                  x + (rx * dw) // sw] * weight[o, rc, ry, rx],
            axis=[rc, ry, rx]),
        name=name, tag="conv2d_nchw")


def flat_subsample(data: Tensor, stride, layout: str = "NCHW", name: str = "subsample") -> Tensor:
    """The pixels a 1x1, unpadded convolution of ``stride`` reads from ``data`` (4-d, NCHW or
    NHWC), as one row: ``(N, C, 1, OH*OW)`` or ``(N, 1, OH*OW, C)`` with ``OH = (H - 1) //
    stride_h + 1`` (likewise ``OW``); pixel ``p`` is input pixel ``(p // OW * stride_h,
    p % OW * stride_w)``. A copy stage tagged ``"pad"``: the search places it as it places a
    padding copy (at root, inside a tile, or inlined)."""
    op = "flat_subsample"
    chk.tensor(op, "data", data, 4)
    sh, sw = chk.int_pair(op, "stride", stride, 1)
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"{op}: 'layout' must be 'NCHW' or 'NHWC', got {layout!r}")
    if layout == "NCHW":
        N, C, H, W = data.shape
    else:
        N, H, W, C = data.shape
    OH, OW = (H - 1) // sh + 1, (W - 1) // sw + 1
    if layout == "NCHW":
        return ir.compute((N, C, 1, OH * OW),
                          lambda n, c, z, p: data[n, c, p // OW * sh, p % OW * sw],
                          name=name, tag="pad")
    return ir.compute((N, 1, OH * OW, C),
                      lambda n, z, p, c: data[n, p // OW * sh, p % OW * sw, c],
                      name=name, tag="pad")
