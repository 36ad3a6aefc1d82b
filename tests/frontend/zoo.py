"""ResNet-50 and MobileNet-V2 as ONNX graphs built with onnx.helper (the architectures of
benchmarks/torch_models.py, as the TorchScript exporter writes them: Conv, BatchNormalization,
Relu / Clip, Add, MaxPool, GlobalAveragePool, Flatten, Gemm), random weights and BatchNorm
statistics. ``div`` divides every channel count (a small network of the same structure)."""
from __future__ import annotations

import numpy as np
from onnx import helper
from onnx_util import make_model


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], {}, 0

    def name(self, base):
        self.k += 1
        return f"{base}{self.k}"

    def const(self, base, a):
        n = self.name(base)
        self.inits[n] = np.asarray(a, np.float32)
        return n

    def conv_bn(self, x, cin, cout, k, s=1, groups=1, act="relu"):
        fan = cin // groups * k * k
        w = self.const("W", self.rng.standard_normal((cout, cin // groups, k, k)) * (2 / fan) ** .5)
        c = self.name("conv")
        self.nodes.append(helper.make_node("Conv", [x, w], [c], kernel_shape=[k, k],
                                           strides=[s, s], pads=[k // 2] * 4, group=groups))
        r = self.rng
        stats = [self.const("bn_s", r.random(cout) + .5), self.const("bn_b", r.standard_normal(cout) * .1),
                 self.const("bn_m", r.standard_normal(cout) * .1), self.const("bn_v", r.random(cout) + .5)]
        b = self.name("bn")
        self.nodes.append(helper.make_node("BatchNormalization", [c] + stats, [b]))
        if act is None:
            return b
        y = self.name(act)
        if act == "relu":
            self.nodes.append(helper.make_node("Relu", [b], [y]))
        else:  # relu6, as the exporter writes it (opset >= 11: min and max inputs)
            lo, hi = self.const("lo", 0.0), self.const("hi", 6.0)
            self.nodes.append(helper.make_node("Clip", [b, lo, hi], [y]))
        return y

    def op(self, op, ins, **attrs):
        y = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [y], **attrs))
        return y

    def head(self, x, c, classes):
        g = self.op("GlobalAveragePool", [x])
        f = self.op("Flatten", [g], axis=1)
        w = self.const("fc_w", self.rng.standard_normal((classes, c)) * c ** -.5)
        b = self.const("fc_b", self.rng.standard_normal(classes) * .1)
        self.nodes.append(helper.make_node("Gemm", [f, w, b], ["y"], transB=1))


def resnet50(div=1, hw=224, classes=1000, seed=0):
    b = _Builder(seed)
    x = b.conv_bn("x", 3, 64 // div, 7, 2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64 // div
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        width //= div
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = b.conv_bn(x, cin, width, 1)
            y = b.conv_bn(y, width, width, 3, s)
            y = b.conv_bn(y, width, width * 4, 1, act=None)
            short = b.conv_bn(x, cin, width * 4, 1, s, act=None) if i == 0 else x
            x = b.op("Relu", [b.op("Add", [y, short])])
            cin = width * 4
    b.head(x, cin, classes)
    return make_model(b.nodes, {"x": [1, 3, hw, hw]}, {"y": [1, classes]}, b.inits)


def mobilenet_v2(div=1, hw=224, classes=1000, seed=0):
    b = _Builder(seed)
    c = max(32 // div, 4)
    x = b.conv_bn("x", 3, c, 3, 2, act="relu6")
    for t, cout, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        cout = max(cout // div, 4)
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), c * t
            y = b.conv_bn(x, c, hidden, 1, act="relu6") if t != 1 else x
            y = b.conv_bn(y, hidden, hidden, 3, stride, groups=hidden, act="relu6")
            y = b.conv_bn(y, hidden, cout, 1, act=None)
            x = b.op("Add", [x, y]) if stride == 1 and c == cout else y
            c = cout
    last = max(1280 // div, 8)
    x = b.conv_bn(x, c, last, 1, act="relu6")
    b.head(x, last, classes)
    return make_model(b.nodes, {"x": [1, 3, hw, hw]}, {"y": [1, classes]}, b.inits)
