"""ONNX ConvTranspose (1-d and 2-d, groups, dilations, output_padding, output_shape, auto_pad)
as a convolution: the input with ``stride - 1`` zeros inserted between its elements, padded (or
cropped) by ``dilation * (kernel - 1) - pad`` on each side, convolved at stride 1 with the
weight flipped in space and its in/out channels swapped per group. The weight must be a
constant (it is rearranged once at import); the convolution is then an ordinary ``Op.CONV2D``
that the layout pass, the fusion and the search treat like any other."""
from __future__ import annotations

import numpy as np

from .convert_nn import as_2d, squeeze_h
from .graph import Op

__all__ = ["conv_transpose", "transposed_conv_weight", "phase_weight"]


def transposed_conv_weight(w: np.ndarray, groups: int) -> np.ndarray:
    """ConvTranspose's weight ``[C_in, C_out / g, kh, kw]`` as the equivalent convolution's
    ``[C_out, C_in / g, kh, kw]``, flipped in space."""
    ci, cog, kh, kw = w.shape
    cig = ci // groups
    f = w[:, :, ::-1, ::-1].reshape(groups, cig, cog, kh, kw).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(f.reshape(groups * cog, cig, kh, kw))


def _pads(ctx, attrs, in_hw, kernel, strides, dil, out_pad) -> tuple:
    """(top, left, bottom, right) of the transposed convolution."""
    auto = attrs.get("auto_pad", "NOTSET")
    full = [s * (n - 1) + op + (k - 1) * d + 1
            for n, k, s, d, op in zip(in_hw, kernel, strides, dil, out_pad)]
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(attrs["output_shape"])[-2:] if "output_shape" in attrs \
            else [n * s for n, s in zip(in_hw, strides)]
        total = [f - o for f, o in zip(full, want)]
        if any(t < 0 for t in total):
            ctx.fail(f"output_shape {want} is larger than the full output {full}")
        lower = auto == "SAME_LOWER"
        begin = [t - t // 2 if lower else t // 2 for t in total]
        return (begin[0], begin[1], total[0] - begin[0], total[1] - begin[1])
    if auto not in ("NOTSET", "", "VALID"):
        ctx.fail(f"auto_pad {auto!r} is not supported", unsupported=True)
    p = list(attrs.get("pads", [0, 0, 0, 0])) if auto != "VALID" else [0, 0, 0, 0]
    if len(p) != 4:
        ctx.fail(f"pads {p} must have 4 entries for a 2-d operator")
    return tuple(p)


def _conv_t2d(ctx, src: str, w: np.ndarray, bias: list, attrs, out) -> str:
    n, c, h, wd = ctx.value(src).shape
    g = int(attrs.get("group", 1))
    if w.shape[0] != c or g < 1 or c % g:
        ctx.fail(f"weight {list(w.shape)} does not match {c} input channels in {g} groups")
    kernel = tuple(w.shape[2:])
    if tuple(attrs.get("kernel_shape", kernel)) != kernel:
        ctx.fail(f"kernel_shape {attrs['kernel_shape']} differs from the weight's {list(kernel)}")
    s = tuple(attrs.get("strides", (1, 1)))
    d = tuple(attrs.get("dilations", (1, 1)))
    op = tuple(attrs.get("output_padding", (0, 0)))
    if any(o >= max(st, dd) for o, st, dd in zip(op, s, d)) or min(s + d) < 1 or min(op) < 0:
        ctx.fail(f"output_padding {list(op)} must be below the stride {list(s)} or dilation")
    pt, pl, pb, pr = _pads(ctx, attrs, (h, wd), kernel, s, d, op)
    if s != (1, 1) and d == (1, 1):
        return _by_phases(ctx, src, w, bias, g, s, op, (pt, pl, pb, pr), out)
    y = src
    if s != (1, 1):  # zeros between the elements: [.., h, 1, w, 1] padded to [.., h, s, w, s]
        y = ctx.emit(Op.RESHAPE, [y], {"shape": (n, c, h, 1, wd, 1)})
        y = ctx.emit(Op.PAD, [y], {"before": (0,) * 6,
                                   "after": (0, 0, 0, s[0] - 1, 0, s[1] - 1), "value": 0.0})
        y = ctx.emit(Op.RESHAPE, [y], {"shape": (n, c, h * s[0], wd * s[1])})
        y = ctx.emit(Op.SLICE, [y], {"starts": (0, 0, 0, 0), "steps": (1, 1, 1, 1),
                                     "shape": (n, c, (h - 1) * s[0] + 1, (wd - 1) * s[1] + 1)})
    # each side: dilation * (kernel - 1) - pad, output_padding at the end; negative = a crop
    sides = [d[0] * (kernel[0] - 1) - pt, d[1] * (kernel[1] - 1) - pl,
             d[0] * (kernel[0] - 1) - pb + op[0], d[1] * (kernel[1] - 1) - pr + op[1]]
    if any(v < 0 for v in sides):
        hh, ww = ctx.value(y).shape[2:]
        crop = [max(-v, 0) for v in sides]
        size = (n, c, hh - crop[0] - crop[2], ww - crop[1] - crop[3])
        if min(size) < 1:
            ctx.fail(f"pads {[pt, pl, pb, pr]} leave no output")
        y = ctx.emit(Op.SLICE, [y], {"starts": (0, 0, crop[0], crop[1]), "steps": (1, 1, 1, 1),
                                     "shape": size})
    wc = ctx.add_const(transposed_conv_weight(w, g), f"{src}_conv_t_weight")
    return ctx.emit(Op.CONV2D, [y, wc] + bias,
                    {"strides": (1, 1), "pads": tuple(max(v, 0) for v in sides),
                     "dilations": d, "groups": g}, out)


def phase_weight(w: np.ndarray, groups: int, stride: tuple) -> np.ndarray:
    """ConvTranspose's weight ``[C_in, C_out / g, kh, kw]`` as one stride-1 convolution's that
    computes every output phase: ``[g * s_h * s_w * C_out / g, C_in / g, M_h, M_w]``, output
    channels ordered (group, phase row, phase column, channel); phase ``(r_h, r_w)`` holds the
    taps ``r + s * m``, flipped, zero past the kernel (``M = ceil(k / s)``)."""
    c, og, kh, kw = w.shape
    cg = c // groups
    m = (-(-kh // stride[0]), -(-kw // stride[1]))
    wp = np.zeros((c, og, m[0] * stride[0], m[1] * stride[1]), w.dtype)
    wp[:, :, :kh, :kw] = w
    return np.concatenate([transposed_conv_weight(wp[gi * cg:(gi + 1) * cg, :, ry::stride[0],
                                                     rx::stride[1]], 1)
                           for gi in range(groups) for ry in range(stride[0])
                           for rx in range(stride[1])])


def _by_phases(ctx, src: str, w: np.ndarray, bias: list, g: int, s: tuple, op: tuple,
               pads: tuple, out) -> str:
    """The transposed convolution as one stride-1 convolution whose output channels are its
    ``s_h * s_w`` output phases (the outputs ``s * q + r``, :func:`phase_weight`): no multiply
    meets an inserted zero (the zero-insertion form does ``s_h * s_w`` times the work), and a
    kernel not a multiple of the stride costs only its phases' padding to ``ceil(k / s)`` taps.
    The phases are interleaved into ``[.., Q * s, ..]`` (the input padded by ``M - 1`` before and
    to ``Q`` rows after), the pads cropped, and the bias added."""
    n, c, h, wd = ctx.value(src).shape
    kh, kw = w.shape[2:]
    full = (s[0] * (h - 1) + kh + op[0], s[1] * (wd - 1) + kw + op[1])
    q = (-(-full[0] // s[0]), -(-full[1] // s[1]))
    og = w.shape[1]
    wc = phase_weight(w, g, s)
    mh, mw = wc.shape[2:]
    y = ctx.emit(Op.CONV2D, [src, ctx.add_const(wc, f"{src}_phase_weight")],
                 {"strides": (1, 1), "dilations": (1, 1), "groups": g,
                  "pads": (mh - 1, mw - 1, q[0] - h, q[1] - wd)})
    y = ctx.emit(Op.RESHAPE, [y], {"shape": (n, g, s[0], s[1], og, q[0], q[1])})
    y = ctx.emit(Op.TRANSPOSE, [y], {"perm": (0, 1, 4, 5, 2, 6, 3)})
    y = ctx.emit(Op.RESHAPE, [y], {"shape": (n, g * og, q[0] * s[0], q[1] * s[1])})
    pt, pl, pb, pr = pads
    size = (n, g * og, full[0] - pt - pb, full[1] - pl - pr)
    if min(size) < 1:
        ctx.fail(f"pads {list(pads)} leave no output")
    y = ctx.emit(Op.SLICE, [y], {"starts": (0, 0, pt, pl), "steps": (1, 1, 1, 1),
                                 "shape": size}, None if bias else out)
    if bias:
        b = ctx.emit(Op.RESHAPE, bias, {"shape": (g * og, 1, 1)})
        y = ctx.emit(Op.ADD, [y, b], {}, out)
    return y


def conv_transpose(ctx, node, attrs):
    x = ctx.value(node.input[0])
    w = ctx.need_const(node.input[1], "the weight")
    bias = [node.input[2]] if len(node.input) > 2 and node.input[2] else []
    if len(x.shape) == 3 and w.ndim == 3:  # 1-d: a 2-d one of height 1
        x4, at = as_2d(ctx, node, attrs)
        if "output_padding" in at:
            at["output_padding"] = [0] + list(at["output_padding"])
        if "output_shape" in at:
            at["output_shape"] = [1] + list(at["output_shape"])[-1:]
        squeeze_h(ctx, _conv_t2d(ctx, x4, w[:, :, None, :], bias, at, None), node.output[0])
    elif len(x.shape) == 4 and w.ndim == 4:
        _conv_t2d(ctx, node.input[0], w, bias, attrs, node.output[0])
    else:
        ctx.fail(f"only 1-d and 2-d ConvTranspose is supported; input {list(x.shape)}, weight "
                 f"{list(w.shape)}", unsupported=True)
