"""ONNX Resize and Upsample (modes nearest and linear) as gathers with constant indices.

Each resized axis is one gather of the source rows it reads (nearest), or two gathers and a
weighted sum of them (linear: ``a + (b - a) * w``, the weights a constant per output row). The
source coordinate of every output index follows ONNX's ``coordinate_transformation_mode``,
computed in float32 as ONNX Runtime does, so that the rounding of ``nearest`` picks the same
rows; coordinates outside the input clamp to its edge (ONNX Runtime's behaviour for both modes).
"""
from __future__ import annotations

import numpy as np

from .graph import Op

__all__ = ["RESIZE_CONVERTERS", "source_coordinates", "nearest_index"]

_F = np.float32
_CTMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_half_pixel_for_nn", "half_pixel_symmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def source_coordinates(n_in: int, n_out: int, scale: float, mode: str) -> np.ndarray:
    """The float32 source coordinate of each of ``n_out`` output indices (before clamping).

    Raises
    ------
    ValueError
        An unknown (or unsupported: ``tf_crop_and_resize``) mode.
    """
    o = np.arange(n_out, dtype=_F)
    s = _F(scale)
    if mode == "half_pixel":
        return (o + _F(0.5)) / s - _F(0.5)
    if mode == "pytorch_half_pixel":
        return (o + _F(0.5)) / s - _F(0.5) if n_out > 1 else np.zeros(n_out, _F)
    if mode == "align_corners":
        return o * _F(n_in - 1) / _F(n_out - 1) if n_out > 1 else np.zeros(n_out, _F)
    if mode == "asymmetric":
        return o / s
    if mode == "tf_half_pixel_for_nn":
        return (o + _F(0.5)) / s
    if mode == "half_pixel_symmetric":
        adj = _F(n_out) / (s * _F(n_in))
        offset = _F(n_in) / _F(2) * (_F(1) - adj)
        return offset + (o + _F(0.5)) / s - _F(0.5)
    raise ValueError(f"coordinate_transformation_mode {mode!r} is not supported")


def nearest_index(x: np.ndarray, mode: str, downsample: bool, n_in: int) -> np.ndarray:
    """The source index ``nearest_mode`` picks for each coordinate, clamped to the input."""
    if mode == "round_prefer_floor":
        i = np.ceil(x - _F(0.5))
    elif mode == "round_prefer_ceil":
        i = np.floor(x + _F(0.5))
    elif mode == "floor":
        i = np.floor(x)
    elif mode == "ceil":
        i = np.ceil(x)
    elif mode == "simple":  # Upsample and Resize-10: truncate, or ceil when downsampling
        i = np.ceil(x) if downsample else np.trunc(x)
    else:
        raise ValueError(f"nearest_mode {mode!r} is not supported")
    return np.clip(i, 0, n_in - 1).astype(np.int64)


def _take(ctx, src: str, axis: int, idx: np.ndarray, out=None) -> str:
    """``src`` at indices ``idx`` along ``axis``: a slice where that is one row or a range."""
    x = ctx.value(src)
    if len(idx) == x.shape[axis] and np.array_equal(idx, np.arange(len(idx))):
        return ctx.alias(out, src) if out else src
    if len(idx) == 1 or np.all(np.diff(idx) == 1):
        starts = [0] * len(x.shape)
        starts[axis] = int(idx[0])
        shape = list(x.shape)
        shape[axis] = len(idx)
        return ctx.emit(Op.SLICE, [src], {"starts": tuple(starts), "steps": (1,) * len(shape),
                                          "shape": tuple(shape)}, out)
    return ctx.emit(Op.GATHER, [src, ctx.add_const(idx, f"{src}_rows")], {"axis": axis}, out)


def _resize_axis(ctx, src: str, axis: int, n_out: int, scale: float, attrs: dict,
                 out=None) -> str:
    n_in = ctx.value(src).shape[axis]
    x = source_coordinates(n_in, n_out, scale, attrs["ctm"])
    if attrs["mode"] == "nearest":
        return _take(ctx, src, axis, nearest_index(x, attrs["nearest_mode"], scale < 1, n_in),
                     out)
    x = np.clip(x, _F(0), _F(n_in - 1))
    i0 = np.floor(x).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = (x - i0.astype(_F)).astype(ctx.value(src).dtype)
    if not w.any():
        return _take(ctx, src, axis, i0, out)
    a = _take(ctx, src, axis, i0)
    rank = len(ctx.value(src).shape)
    wc = ctx.add_const(w.reshape((n_out,) + (1,) * (rank - 1 - axis)), f"{src}_weights")
    d = ctx.emit(Op.SUB, [_take(ctx, src, axis, i1), a], {})
    return ctx.emit(Op.ADD, [a, ctx.emit(Op.MUL, [d, wc], {})], {}, out)


def _opt_const(ctx, node, k: int, what: str):
    if len(node.input) > k and node.input[k]:
        c = ctx.need_const(node.input[k], what).reshape(-1)
        return c if c.size else None
    return None


def resize(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    old = node.op_type == "Upsample" or ctx.opset < 11
    mode = attrs.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode
    if mode not in ("nearest", "linear"):
        ctx.fail(f"mode {mode!r} is not supported (nearest, linear)", unsupported=True)
    ctm = "asymmetric" if old else attrs.get("coordinate_transformation_mode", "half_pixel")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        ctx.fail("keep_aspect_ratio_policy other than 'stretch' is not supported",
                 unsupported=True)
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    if old:
        scales, sizes = (np.asarray(attrs["scales"], np.float32) if "scales" in attrs
                         else _opt_const(ctx, node, 1, "scales")), None
    else:
        scales, sizes = _opt_const(ctx, node, 2, "scales"), _opt_const(ctx, node, 3, "sizes")
    if (scales is None) == (sizes is None):
        ctx.fail("exactly one of scales and sizes must be given")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        ctx.fail(f"{len(given)} scales/sizes for {len(axes)} axes")
    if sizes is not None:
        outs = [int(s) for s in sizes]
        facs = [o / x.shape[a] for o, a in zip(outs, axes)]
    else:
        facs = [float(s) for s in scales]
        outs = [int(np.floor(x.shape[a] * s)) for a, s in zip(axes, facs)]
    if any(o < 1 for o in outs) or any(f <= 0 for f in facs):
        ctx.fail(f"output sizes {outs} (scales {facs}) must be positive")
    if mode == "linear" and attrs.get("antialias", 0) and any(f < 1 for f in facs):
        ctx.fail("antialiased linear downsampling is not supported", unsupported=True)
    shape = list(x.shape)
    for a, o in zip(axes, outs):
        shape[a] = o
    ctx.check_size(shape)
    at = {"mode": mode, "ctm": ctm,
          "nearest_mode": "simple" if old else attrs.get("nearest_mode", "round_prefer_floor")}
    work = [(a, o, f) for a, o, f in zip(axes, outs, facs) if o != x.shape[a] or f != 1.0]
    if not work:
        ctx.alias(node.output[0], node.input[0])
        return
    if ctm not in _CTMS or at["nearest_mode"] not in _NEAREST:
        ctx.fail(f"coordinate_transformation_mode {ctm!r} / nearest_mode "
                 f"{at['nearest_mode']!r} is not supported", unsupported=True)
    y = node.input[0]
    for k, (a, o, f) in enumerate(work):
        y = _resize_axis(ctx, y, a, o, f, at, node.output[0] if k == len(work) - 1 else None)


RESIZE_CONVERTERS = {"Resize": resize, "Upsample": resize}
