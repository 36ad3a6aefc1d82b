"""Layer sets of standard networks (batch ``N``, 224x224 inputs): each distinct conv2d / dense
layer once, with how many times the network runs it (the task scheduler's weight)."""
from __future__ import annotations

from collections import OrderedDict

from ..ops.conv2d import METHODS
from ..ops.winograd import winograd_applies
from . import builders as W

__all__ = ["layer_specs", "layer_set", "layer_weights", "conv_specs", "conv_kind", "conv_layer",
           "small_size", "method_applies", "flat_applies", "NETWORKS", "FLAT", "LAYER_METHODS"]

#: a network-level method beside the conv2d ones: a 1x1, unpadded convolution computed on its
#: image viewed as one row of ``H * W`` pixels, ``(N, C, 1, H*W)`` (NCHW) or ``(N, 1, H*W, C)``
#: (NHWC): the same bytes, so a caller passes reshaped views (:class:`tecomp.ReshapedKernel`).
#: Its pixel axis then tiles and vectorizes across row ends: a 28-, 14- or 7-pixel row otherwise
#: leaves a vector tail per row. A strided one reads the plain image and first copies the pixels
#: its stride reads into one row (:func:`~.builders.conv2d_flat`); its output is viewed flat.
FLAT = "flat"
#: the methods a network's layer set may be built with (``tecomp tune --network --method``)
LAYER_METHODS = METHODS + (FLAT,)


def _conv(layers, C, H, O, k, s, p, groups=1):
    key = ("conv", C, H, O, k, s, p, groups)
    layers[key] = layers.get(key, 0) + 1


def _dense(layers, K, O):
    key = ("dense", K, O)
    layers[key] = layers.get(key, 0) + 1


def _resnet18():
    L = OrderedDict()
    _conv(L, 3, 224, 64, 7, 2, 3)
    for _ in range(4):
        _conv(L, 64, 56, 64, 3, 1, 1)
    size, c = 56, 64
    for o in (128, 256, 512):
        _conv(L, c, size, o, 3, 2, 1)
        _conv(L, c, size, o, 1, 2, 0)  # downsample
        size //= 2
        for _ in range(3):
            _conv(L, o, size, o, 3, 1, 1)
        c = o
    _dense(L, 512, 1000)
    return L


def _resnet50():
    L = OrderedDict()
    _conv(L, 3, 224, 64, 7, 2, 3)
    c, size = 64, 56
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        out = width * 4
        for b in range(blocks):
            s = stride if b == 0 else 1
            _conv(L, c, size, width, 1, 1, 0)
            _conv(L, width, size, width, 3, s, 1)
            if b == 0:
                _conv(L, c, size, out, 1, s, 0)  # downsample
                size //= s
            _conv(L, width, size, out, 1, 1, 0)
            c = out
    _dense(L, 2048, 1000)
    return L


def _mobilenet_v2():
    L = OrderedDict()
    _conv(L, 3, 224, 32, 3, 2, 1)
    c, size = 32, 112
    for t, o, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for b in range(n):
            stride = s if b == 0 else 1
            hidden = c * t
            if t != 1:
                _conv(L, c, size, hidden, 1, 1, 0)
            _conv(L, hidden, size, hidden, 3, stride, 1, groups=hidden)
            size //= stride
            _conv(L, hidden, size, o, 1, 1, 0)
            c = o
    _conv(L, c, size, 1280, 1, 1, 0)
    _dense(L, 1280, 1000)
    return L


NETWORKS = {"resnet18": _resnet18, "resnet50": _resnet50, "mobilenet_v2": _mobilenet_v2}


def layer_specs(name: str) -> list:
    """``[(spec, count), ...]``: spec ``("conv", C, H, O, k, stride, pad, groups)`` (square inputs
    and kernels) or ``("dense", K, O)``."""
    try:
        return list(NETWORKS[name]().items())
    except KeyError:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}") from None


def flat_applies(spec) -> bool:
    """Whether layer ``spec`` is a 1x1, unpadded convolution (:data:`FLAT`; any stride)."""
    return spec[0] == "conv" and spec[4] == 1 and spec[6] == 0


def method_applies(spec, method: str) -> bool:
    """Whether conv ``method`` computes layer ``spec``: direct, implicit GEMM, channels-last and
    blocked every layer (a dense one as a matmul), Winograd the 3x3, stride-1, ungrouped
    convolutions only, :data:`FLAT` the 1x1, unpadded ones, ``"phased"`` the strided
    ones."""
    if method == FLAT:
        return flat_applies(spec)
    if method == "phased":
        return spec[0] == "conv" and spec[5] > 1
    if method != "winograd":
        return True
    return spec[0] == "conv" and winograd_applies((spec[4],) * 2, (spec[5],) * 2, (1, 1), spec[7])


def layer_set(name: str, batch: int = 1, layout: str = "NHWC", method: str = "direct") -> list:
    """``[(Workload, count), ...]`` of the network's distinct layers that ``method`` computes
    (:func:`method_applies`: all of them, except for ``"winograd"`` and :data:`FLAT`; a
    :data:`FLAT` workload is the direct convolution of the flattened image, ``H = 1``,
    ``W = H * W``, after a copy of the pixels a stride reads, :func:`~.builders.conv2d_flat`)."""
    out = []
    for spec, count in layer_specs(name):
        if not method_applies(spec, method):
            continue
        if spec[0] == "dense":
            _, K, O = spec
            wl = W.matmul(batch, O, K)
        else:
            _, C, H, O, k, s, p, g = spec
            if method == FLAT:
                wl = W.conv2d_flat(batch, C, H, H, O, s, g, layout)
            else:
                wl = W.conv2d(batch, C, H, H, O, k, k, s, p, 1, g, layout, method)
        out.append((wl, count))
    return out


def layer_weights(wl) -> tuple:
    """Names of the inputs of a :func:`layer_set` workload that are the layer's weights: the conv
    weight, the dense layer's ``(K, O)`` matrix. In the network they are constants, so a tuning
    task marks them (``SearchTask(..., constants=)``) and a kernel is built with them bound
    (``tc.build(..., constants=)``): a weight packed into the tile layout is packed once, at build
    time, as in a compiled model, not on every call."""
    return (wl.dag.inputs[1].name,)


def conv_specs(*names: str) -> list:
    """The distinct conv specs ``("conv", C, H, O, k, stride, pad, groups)`` of the named networks,
    in order of first appearance."""
    out = {}
    for name in names:
        for spec, _ in layer_specs(name):
            if spec[0] == "conv":
                out.setdefault(spec, None)
    return list(out)


def conv_kind(spec) -> str:
    """A short name of what a conv spec exercises: ``"dw3x3s2"``, ``"1x1s2"``, ``"7x7s2"`` ..."""
    _, C, _, _, k, s, _, g = spec
    kind = f"{k}x{k}s{s}"
    return f"dw{kind}" if g == C and g > 1 else kind if g == 1 else f"g{g}-{kind}"


def small_size(spec) -> int:
    """A small input size with the spec's kernel, stride and padding unchanged: a few output rows
    (at least 3), so that both padded borders and the stride are exercised."""
    _, _, H, _, k, s, p, _ = spec
    return min(H, max(k - 2 * p + 2 * s + 1, 3))


def conv_layer(spec, batch: int = 1, layout: str = "NHWC", method: str = "direct",
               size: int | None = None):
    """The Workload of one conv spec; ``size`` replaces the (square) input size."""
    _, C, H, O, k, s, p, g = spec
    H = H if size is None else size
    return W.conv2d(batch, C, H, H, O, k, k, s, p, 1, g, layout, method)
