"""The FLAT variant of a group: a 1x1, unpadded convolution and its elementwise epilogue computed
on the image viewed as one row of ``H * W`` pixels.

Why: such a convolution is one matrix product over the pixels, but its 2-d output rows of 28,
14 or 7 pixels leave a vector tail per row in NCHW (the vector runs along a row) and split the
pixel tile at every row end in NHWC. On ``(N, C, 1, H*W)`` (``(N, 1, H*W, C)`` in NHWC) the
pixel axis tiles and vectorizes freely; the bytes are the same, so the compiled model passes
views of its buffers (:class:`tecomp.ReshapedKernel`) and nothing is copied. A strided one
reads its plain input: its first stage copies the pixels the stride reads into one row
(:func:`tecomp.ops.flat_subsample`, a stage the search places as it places a padding copy),
and the rest is the stride-1 form; only its output and epilogue operands are viewed flat.
"""
from __future__ import annotations

from .graph import Layout, Model, Op, Pattern

__all__ = ["flat_eligible", "flat_shapes"]


def _spatial(layout: Layout) -> tuple:
    """The positions of (H, W) in a 4-d activation of ``layout``."""
    return (2, 3) if layout is Layout.NCHW else (1, 2)


def _flatten(shape: tuple, layout: Layout) -> tuple:
    h, w = _spatial(layout)
    out = list(shape)
    out[h], out[w] = 1, shape[h] * shape[w]
    return tuple(out)


def flat_eligible(m: Model, g) -> bool:
    """Whether group ``g`` of ``m`` may run FLAT: its first node is a 1x1, unpadded (any stride)
    convolution of a runtime 4-d input with constant weights, and every later node is
    elementwise, reading values of the output's shape, the group's own values, or operands
    that do not vary over the image (a per-channel bias, a scalar)."""
    n = g.anchor
    if n is None or n is not g.nodes[0] or n.op is not Op.CONV2D:
        return False
    if n.inputs[0] in m.constants or n.inputs[1] not in m.constants:
        return False
    layout = n.attrs.get("layout", Layout.NCHW)
    h, wd = _spatial(layout)
    w = m.values[n.inputs[1]].shape
    k = (w[0], w[1]) if layout is Layout.NHWC else (w[2], w[3])
    if k != (1, 1) or any(n.attrs["pads"]):
        return False
    out = m.values[n.output].shape
    if len(out) != 4 or out[h] * out[wd] <= 1:
        return False
    made = {x.output for x in g.nodes}
    for x in g.nodes[1:]:
        if x.op.pattern is not Pattern.ELEMWISE:
            return False
        for i in x.inputs:
            if i in made:
                continue
            s = tuple(m.values[i].shape)
            if s == tuple(out) and i not in m.constants:
                continue
            s4 = (1,) * (4 - len(s)) + s
            if len(s) > 4 or s4[h] != 1 or s4[wd] != 1:  # varies over the image
                return False
    return True


def flat_shapes(m: Model, g, names) -> dict:
    """Name -> shape of the placeholders of ``names`` (runtime values of group ``g``) in its FLAT
    variant: a value of the convolution's output shape, or of its input shape where the stride
    is 1, flattened over the image; the others (a strided convolution's input) unchanged."""
    n = g.anchor
    layout = n.attrs.get("layout", Layout.NCHW)
    image = (tuple(m.values[n.output].shape),)
    if max(n.attrs["strides"]) == 1:
        image += (tuple(m.values[n.inputs[0]].shape),)
    out = {}
    for name in names:
        s = tuple(m.values[name].shape)
        out[name] = _flatten(s, layout) if s in image else s
    return out
