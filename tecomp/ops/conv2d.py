"""2-d convolution: direct (7 loops) or implicit GEMM (one fused reduce axis over an im2col index
expression; no im2col buffer is materialized)."""
from __future__ import annotations

from .. import ir
from ..ir.tensor import Tensor
from . import arguments as chk
from .blocked import blocked_conv2d
from .layout import nhwc_to_nchw, pad_to_nhwc
from .phased import phased_conv2d
from .winograd import winograd_applies, winograd_conv2d, winograd_tile

__all__ = ["conv2d", "pad2d", "conv2d_output_shape", "normalize_conv2d_args", "METHODS"]

LAYOUTS = ("NCHW", "NHWC")
METHODS = ("direct", "implicit_gemm", "winograd", "channels_last", "blocked", "phased")


def _padding4(padding) -> tuple:
    """int, (h, w) or (top, left, bottom, right) -> (top, left, bottom, right)."""
    op = "conv2d"
    vals = padding if isinstance(padding, (tuple, list)) else (padding,)
    if len(vals) not in (1, 2, 4):
        raise ValueError(f"{op}: 'padding' must be an int, (h, w) or (top, left, bottom, right), "
                         f"got {padding!r}")
    out = []
    for v in vals:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{op}: 'padding' entries must be ints, got {padding!r}")
        if int(v) < 0:
            raise ValueError(f"{op}: 'padding' must be non-negative, got {padding!r}")
        out.append(int(v))
    if len(out) == 1:
        return (out[0],) * 4
    if len(out) == 2:
        return (out[0], out[1], out[0], out[1])
    return tuple(out)


def normalize_conv2d_args(stride=1, padding=0, dilation=1) -> tuple:
    """``(stride_hw, dilation_hw, (top, left, bottom, right))`` from the user's forms; raises
    ValueError/TypeError for bad values."""
    return (chk.int_pair("conv2d", "stride", stride, 1), chk.int_pair("conv2d", "dilation", dilation, 1),
            _padding4(padding))


def conv2d_output_shape(H: int, W: int, KH: int, KW: int, stride=1, padding=0,
                        dilation=1) -> tuple:
    """Output ``(OH, OW)`` of a convolution (floor division, as PyTorch)."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = normalize_conv2d_args(stride, padding, dilation)
    oh = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    ow = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    return oh, ow


def pad2d(data: Tensor, padding, layout: str = "NCHW", *, name: str = "pad") -> Tensor:
    """Zero-pad the two spatial dimensions of a 4-d tensor as a stage of its own.

    Parameters
    ----------
    data : Tensor
        ``(N, C, H, W)`` for ``layout="NCHW"``, ``(N, H, W, C)`` for ``"NHWC"``.
    padding : int or tuple
        ``p``, ``(h, w)`` or ``(top, left, bottom, right)``.
    layout : {"NCHW", "NHWC"}
    name : str
        Name of the stage.

    Returns
    -------
    Tensor
        The padded tensor; out-of-range reads of ``data`` are guarded by ``if_then_else``. When the
        padding is all zero, ``data`` itself is returned (no stage).
    """
    chk.tensor("pad2d", "data", data, 4)
    if layout not in LAYOUTS:
        raise ValueError(f"pad2d: 'layout' must be one of {LAYOUTS}, got {layout!r}")
    pt, pl, pb, pr = _padding4(padding)
    if pt == pl == pb == pr == 0:
        return data
    hd, wd = (2, 3) if layout == "NCHW" else (1, 2)
    H, W = data.shape[hd], data.shape[wd]
    shape = list(data.shape)
    shape[hd], shape[wd] = H + pt + pb, W + pl + pr
    zero = ir.const(0, data.dtype)

    def body(*idx):
        h, w = idx[hd], idx[wd]
        conds = []
        if pt:
            conds.append(h >= pt)
        if pb:
            conds.append(h < H + pt)
        if pl:
            conds.append(w >= pl)
        if pr:
            conds.append(w < W + pl)
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        src = list(idx)
        src[hd], src[wd] = h - pt, w - pl
        return ir.if_then_else(cond, data[tuple(src)], zero)

    if layout == "NCHW":
        return ir.compute(shape, lambda n, c, h, w: body(n, c, h, w), name=name, tag="pad")
    return ir.compute(shape, lambda n, h, w, c: body(n, h, w, c), name=name, tag="pad")


def conv2d(data: Tensor, weight: Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
           layout: str = "NCHW", method: str = "direct", *, name: str = "conv2d") -> Tensor:
    """2-d convolution (cross-correlation, as in PyTorch), grouped and depthwise included.

    Parameters
    ----------
    data : Tensor
        ``(N, C, H, W)`` for ``layout="NCHW"``, ``(N, H, W, C)`` for ``"NHWC"``.
    weight : Tensor
        ``(O, C // groups, KH, KW)`` (OIHW) for NCHW, ``(KH, KW, C // groups, O)`` (HWIO) for NHWC.
    stride, dilation : int or (int, int)
        Per (height, width); positive.
    padding : int, (h, w) or (top, left, bottom, right)
        Zero padding, non-negative. Nonzero padding becomes a stage of its own named ``"pad"``
        (see :func:`pad2d`).
    groups : int
        ``C`` and ``O`` must be divisible by it; ``groups == C`` is a depthwise convolution.
    layout : {"NCHW", "NHWC"}
    method : {"direct", "implicit_gemm", "winograd", "channels_last", "blocked", "phased"}
        ``"direct"``: reduce axes ``(rc, ry, rx)`` (NCHW) or ``(ry, rx, rc)`` (NHWC).
        ``"implicit_gemm"``: one reduce axis ``rk`` of extent ``(C // groups) * KH * KW`` that is
        decomposed into ``(rc, ry, rx)`` (NCHW: ``rk // (KH*KW), rk // KW % KH, rk % KW``; NHWC:
        ``ry, rx, rc`` with ``rc`` fastest), so the convolution is a GEMM of the output pixels
        against the flattened weight, reading the (padded) data directly through the im2col index
        expression.
        ``"winograd"``: Winograd's F(m x m, 3 x 3) (:mod:`tecomp.ops.winograd`; ``m = 4``, or 2
        for outputs under 8 pixels on a side), for 3x3 kernels with stride 1, no dilation and
        ``groups=1`` (else ValueError): input, weight and output transforms and ``(m + 2)^2``
        matrix products as stages of their own, a quarter of the direct FLOPs for ``m = 4``.
        Floating-point only; its rounding differs from the direct sum by a few ulps per term.
        ``"channels_last"``: for NCHW, the direct convolution computed channels-last between two
        transposes (:mod:`tecomp.ops.layout`): the padding copy writes the input as NHWC, the
        convolution runs as in NHWC (vectors along the channels, for any width of the image), and
        a last stage transposes the result to NCHW, as the vendor libraries reorder an NCHW
        tensor to their blocked layout and back. For NHWC it is ``"direct"``.
        ``"blocked"``: for NCHW, the direct convolution in a blocked channel layout, NCHW[x]c
        (:mod:`tecomp.ops.blocked`): the padding copy writes the input in blocks of 16 (or 8)
        channels, the OIHW weight is packed into blocks of input and output channels (once, at
        build time, where it is a constant), the convolution's vector runs along a block of
        output channels, and a last stage writes the result as NCHW. For NHWC it is
        ``"direct"``.
        ``"phased"``: for NCHW, the direct convolution on its input split into stride phases
        (:mod:`tecomp.ops.phased`): the padding copy writes plane ``(py, px)`` of the padded
        input as its pixels ``(i*stride_h + py, j*stride_w + px)``, so a strided convolution
        reads its input at unit stride along the output columns. With stride 1 it is
        ``"direct"`` with two unit dimensions in the padding copy; for NHWC it is ``"direct"``.
    name : str
        Name of the output stage.

    Returns
    -------
    Tensor
        ``(N, O, OH, OW)`` (NCHW) or ``(N, OH, OW, O)`` (NHWC) of the inputs' dtype, with
        ``OH = (H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) // stride_h + 1`` (likewise
        ``OW``).

    Raises
    ------
    TypeError
        Non-tensor arguments, mismatched or bool dtypes, non-int parameters.
    ValueError
        Wrong ranks, channel/group mismatches, bad stride/padding/dilation/groups/layout/method, or
        an empty output.
    """
    op = "conv2d"
    chk.tensor(op, "data", data, 4)
    chk.tensor(op, "weight", weight, 4)
    chk.same_dtype(op, "data", data, "weight", weight)
    chk.numeric(op, "data", data)
    if layout not in LAYOUTS:
        raise ValueError(f"conv2d: 'layout' must be one of {LAYOUTS}, got {layout!r}")
    if method not in METHODS:
        raise ValueError(f"conv2d: 'method' must be one of {METHODS}, got {method!r}")
    (sh, sw), (dh, dw), pads = normalize_conv2d_args(stride, padding, dilation)
    groups = chk.pos_int(op, "groups", groups)
    if layout == "NCHW":
        N, C, H, W = data.shape
        O, CG, KH, KW = weight.shape
        wdesc = "OIHW (O, C/groups, KH, KW)"
    else:
        N, H, W, C = data.shape
        KH, KW, CG, O = weight.shape
        wdesc = "HWIO (KH, KW, C/groups, O)"
    if C % groups:
        raise ValueError(f"conv2d: input channels C={C} are not divisible by groups={groups}")
    if O % groups:
        raise ValueError(f"conv2d: output channels O={O} (from weight shape {weight.shape}) are not "
                         f"divisible by groups={groups}")
    if CG != C // groups:
        raise ValueError(f"conv2d: weight shape {weight.shape} ({wdesc}) has {CG} input channels "
                         f"per group, but data has C={C} channels and groups={groups} "
                         f"(expected {C // groups})")
    if KH < 1 or KW < 1:
        raise ValueError(f"conv2d: kernel size must be at least 1x1, got {KH}x{KW}")
    OH, OW = conv2d_output_shape(H, W, KH, KW, (sh, sw), pads, (dh, dw))
    if OH < 1 or OW < 1:
        raise ValueError(f"conv2d: output would be empty ({OH}x{OW}): the padded input "
                         f"{H + pads[0] + pads[2]}x{W + pads[1] + pads[3]} is smaller than the "
                         f"dilated kernel {dh * (KH - 1) + 1}x{dw * (KW - 1) + 1}")

    if method == "winograd":
        if not winograd_applies((KH, KW), (sh, sw), (dh, dw), groups):
            raise ValueError(f"conv2d: method='winograd' needs a 3x3 kernel, stride 1, dilation 1 "
                             f"and groups=1; got {KH}x{KW}, stride {(sh, sw)}, dilation "
                             f"{(dh, dw)}, groups={groups}")
        if not data.dtype.is_float:
            raise TypeError(f"conv2d: method='winograd' needs a floating-point dtype, got "
                            f"{data.dtype}")
        return winograd_conv2d(data, weight, pads, layout, winograd_tile(OH, OW), name)

    if method == "blocked" and layout == "NCHW":
        return blocked_conv2d(data, weight, pads, (sh, sw), (dh, dw), groups, (OH, OW), name)

    if method == "phased" and layout == "NCHW":
        return phased_conv2d(data, weight, pads, (sh, sw), (dh, dw), groups, (OH, OW), name)

    OG = O // groups  # output channels per group

    def chan(o, rc):
        """Input channel read for output channel ``o`` and in-group channel ``rc``."""
        return rc if groups == 1 else (o // OG) * CG + rc

    tag = f"conv2d_{layout.lower()}"
    cl = method == "channels_last" and layout == "NCHW"
    if method in ("direct", "channels_last", "blocked", "phased"):  # NHWC: direct
        ry = ir.reduce_axis(KH, name="ry")
        rx = ir.reduce_axis(KW, name="rx")
        rc = ir.reduce_axis(CG, name="rc")
        if layout == "NCHW" and not cl:
            pad = pad2d(data, pads, layout)
            return ir.compute(
                (N, O, OH, OW),
                lambda n, o, y, x: ir.sum(
                    pad[n, chan(o, rc), y * sh + ry * dh, x * sw + rx * dw] * weight[o, rc, ry, rx],
                    axis=[rc, ry, rx]),
                name=name, tag=tag)
        # NHWC, or channels-last between the two transposes (reading the OIHW weight)
        pad = pad_to_nhwc(data, *pads, name=f"{name}_pad") if cl else pad2d(data, pads, layout)
        y = ir.compute(
            (N, OH, OW, O),
            lambda n, y, x, o: ir.sum(
                pad[n, y * sh + ry * dh, x * sw + rx * dw, chan(o, rc)]
                * (weight[o, rc, ry, rx] if cl else weight[ry, rx, rc, o]),
                axis=[ry, rx, rc]),
            name=f"{name}_nhwc" if cl else name, tag="conv2d_nhwc")
        return nhwc_to_nchw(y, name, "conv2d_channels_last") if cl else y

    pad = pad2d(data, pads, layout)
    # implicit GEMM: rows = output pixels, columns = output channels, K = CG * KH * KW
    rk = ir.reduce_axis(CG * KH * KW, name="rk")
    if layout == "NCHW":
        rc, ry, rx = rk // (KH * KW), (rk // KW) % KH, rk % KW
        return ir.compute(
            (N, O, OH, OW),
            lambda n, o, y, x: ir.sum(
                pad[n, chan(o, rc), y * sh + ry * dh, x * sw + rx * dw] * weight[o, rc, ry, rx],
                axis=rk),
            name=name, tag=tag + "_gemm")
    ry, rx, rc = rk // (KW * CG), (rk // CG) % KW, rk % CG
    return ir.compute(
        (N, OH, OW, O),
        lambda n, y, x, o: ir.sum(
            pad[n, y * sh + ry * dh, x * sw + rx * dw, chan(o, rc)] * weight[ry, rx, rc, o],
            axis=rk),
        name=name, tag=tag + "_gemm")
