"""ONNX converters of the compute operators: convolution, Gemm/MatMul, normalization, pooling,
reductions, softmax and the elementwise operators. Each is ``conv(ctx, node, attrs)`` and emits
tecomp operator nodes through the :class:`~.onnx_import.ImportContext`."""
from __future__ import annotations

import numpy as np

from .graph import Op
from .lower_nn import PoolKind, Reduction

__all__ = ["NN_CONVERTERS", "parse_axes", "as_2d", "squeeze_h", "fold_inputs"]


def _spatial_pads(ctx, attrs, in_hw, kernel, strides, dilations) -> tuple:
    """(top, left, bottom, right) from ``pads`` / ``auto_pad``."""
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(p) != 4:
            ctx.fail(f"pads {p} must have 4 entries for a 2-d operator")
        return (p[0], p[1], p[2], p[3])
    if auto == "VALID":
        return (0, 0, 0, 0)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        ctx.fail(f"auto_pad {auto!r} is not supported", unsupported=True)
    pads = []
    for n, k, s, d in zip(in_hw, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def as_2d(ctx, node, attrs) -> tuple:
    """A 1-d operator's input ``[N, C, L]`` as ``[N, C, 1, L]`` and its attributes with a
    leading unit axis, so that the 2-d lowering serves it."""
    n, c, length = ctx.value(node.input[0]).shape
    x4 = ctx.emit(Op.RESHAPE, [node.input[0]], {"shape": (n, c, 1, length)})
    at = dict(attrs)
    for k in ("kernel_shape", "strides", "dilations"):
        if k in at:
            at[k] = [1] + list(at[k])
    if "pads" in at:
        p = list(at["pads"])
        if len(p) != 2:
            ctx.fail(f"pads {p} must have 2 entries for a 1-d operator")
        at["pads"] = [0, p[0], 0, p[1]]
    return x4, at


def squeeze_h(ctx, y: str, out: str) -> None:
    n, c, _, length = ctx.value(y).shape
    ctx.emit(Op.RESHAPE, [y], {"shape": (n, c, length)}, out)


def conv(ctx, node, attrs):
    x, w = ctx.value(node.input[0]), ctx.value(node.input[1])
    bias = [node.input[2]] if len(node.input) > 2 and node.input[2] else []
    if len(x.shape) == 3 and len(w.shape) == 3:  # 1-d: a 2-d convolution of height 1
        x4, at = as_2d(ctx, node, attrs)
        o, ci, k = w.shape
        w4 = ctx.emit(Op.RESHAPE, [node.input[1]], {"shape": (o, ci, 1, k)})
        squeeze_h(ctx, _conv2d(ctx, x4, w4, bias, at), node.output[0])
        return
    if len(x.shape) != 4 or len(w.shape) != 4:
        ctx.fail(f"only 1-d and 2-d convolutions (3-d or 4-d input and weight) are supported; "
                 f"input is {list(x.shape)}, weight {list(w.shape)}", unsupported=True)
    _conv2d(ctx, node.input[0], node.input[1], bias, attrs, node.output[0])


def _conv2d(ctx, x_name: str, w_name: str, bias: list, attrs, out=None) -> str:
    x, w = ctx.value(x_name), ctx.value(w_name)
    kernel = tuple(attrs.get("kernel_shape", w.shape[2:]))
    if kernel != tuple(w.shape[2:]):
        ctx.fail(f"kernel_shape {list(kernel)} differs from the weight's {list(w.shape[2:])}")
    strides = tuple(attrs.get("strides", (1, 1)))
    dil = tuple(attrs.get("dilations", (1, 1)))
    pads = _spatial_pads(ctx, attrs, x.shape[2:], kernel, strides, dil)
    return ctx.emit(Op.CONV2D, [x_name, w_name] + bias,
                    {"strides": strides, "pads": pads, "dilations": dil,
                     "groups": int(attrs.get("group", 1))}, out)


def _transposed(ctx, name: str) -> str:
    v = ctx.value(name)
    perm = tuple(range(len(v.shape) - 2)) + (len(v.shape) - 1, len(v.shape) - 2)
    return ctx.emit(Op.TRANSPOSE, [name], {"perm": perm})


def gemm(ctx, node, attrs):
    a, b = node.input[0], node.input[1]
    if len(ctx.value(a).shape) != 2 or len(ctx.value(b).shape) != 2:
        ctx.fail("Gemm inputs must be 2-d")
    if attrs.get("transA", 0):
        a = _transposed(ctx, a)
    if attrs.get("transB", 0):
        b = _transposed(ctx, b)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    has_c = len(node.input) > 2 and node.input[2] and beta != 0.0
    y = ctx.emit(Op.MATMUL, [a, b], {}, None if (alpha != 1.0 or has_c) else node.output[0])
    if alpha != 1.0:
        s = ctx.add_const(np.array(alpha, dtype=ctx.value(y).dtype), "alpha")
        y = ctx.emit(Op.MUL, [y, s], {}, None if has_c else node.output[0])
    if has_c:
        c = node.input[2]
        if beta != 1.0:
            s = ctx.add_const(np.array(beta, dtype=ctx.value(c).dtype), "beta")
            c = ctx.emit(Op.MUL, [c, s], {})
        ctx.emit(Op.ADD, [y, c], {}, node.output[0])


def matmul(ctx, node, attrs):
    a, b = node.input[0], node.input[1]
    ra, rb = len(ctx.value(a).shape), len(ctx.value(b).shape)
    if ra == 0 or rb == 0:
        ctx.fail("MatMul inputs must have rank >= 1")
    a2 = ctx.emit(Op.RESHAPE, [a], {"shape": (1,) + ctx.value(a).shape}) if ra == 1 else a
    b2 = ctx.emit(Op.RESHAPE, [b], {"shape": ctx.value(b).shape + (1,)}) if rb == 1 else b
    if ra > 1 and rb > 1:
        ctx.emit(Op.MATMUL, [a2, b2], {}, node.output[0])
        return
    y = ctx.emit(Op.MATMUL, [a2, b2], {})
    shape = list(ctx.value(y).shape)
    if ra == 1:
        del shape[-2]
    if rb == 1:
        del shape[-1]
    ctx.emit(Op.RESHAPE, [y], {"shape": tuple(shape)}, node.output[0])


def batch_norm(ctx, node, attrs):
    x = ctx.value(node.input[0])
    if len(node.output) > 1 and any(node.output[1:]):
        ctx.fail("training-mode BatchNormalization (running mean/var outputs) is not supported",
                 unsupported=True)
    scale, bias, mean, var = (ctx.need_const(n, what).astype(np.float64) for n, what in
                              zip(node.input[1:5], ("scale", "B", "input_mean", "input_var")))
    eps = float(attrs.get("epsilon", 1e-5))
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    shape = (-1,) + (1,) * (len(x.shape) - 2)  # per channel (dimension 1), broadcast over space
    sa = ctx.add_const(a.astype(x.dtype).reshape(shape), f"{node.output[0]}_scale")
    sb = ctx.add_const(b.astype(x.dtype).reshape(shape), f"{node.output[0]}_shift")
    y = ctx.emit(Op.MUL, [node.input[0], sa], {})
    ctx.emit(Op.ADD, [y, sb], {}, node.output[0])


def _pool(kind: PoolKind):
    def convert(ctx, node, attrs):
        x = ctx.value(node.input[0])
        if len(node.output) > 1 and node.output[1]:
            ctx.fail("MaxPool's Indices output is not supported", unsupported=True)
        if len(x.shape) == 3:  # 1-d: a 2-d pooling of height 1
            x4, at = as_2d(ctx, node, attrs)
            squeeze_h(ctx, _pool2d(ctx, x4, at, None), node.output[0])
        elif len(x.shape) == 4:
            _pool2d(ctx, node.input[0], attrs, node.output[0])
        else:
            ctx.fail(f"only 1-d and 2-d pooling (3-d or 4-d input) is supported; input is "
                     f"{list(x.shape)}", unsupported=True)

    def _pool2d(ctx, x_name, attrs, out):
        x = ctx.value(x_name)
        kernel = tuple(attrs["kernel_shape"])
        strides = tuple(attrs.get("strides", (1, 1)))
        dil = tuple(attrs.get("dilations", (1, 1)))
        pads = list(_spatial_pads(ctx, attrs, x.shape[2:], kernel, strides, dil))
        include = bool(attrs.get("count_include_pad", 0))
        if attrs.get("ceil_mode", 0):
            # ceil mode = extra padding at the end that no window starts in
            for d, (n, k, s, dd) in enumerate(zip(x.shape[2:], kernel, strides, dil)):
                span = n + pads[d] + pads[d + 2] - dd * (k - 1) - 1
                n_out = -(-span // s) + 1
                if (n_out - 1) * s >= n + pads[d]:
                    n_out -= 1
                extra = (n_out - 1) * s + dd * (k - 1) + 1 - (n + pads[d] + pads[d + 2])
                if extra > 0:
                    if kind is PoolKind.AVG and include:
                        ctx.fail("AveragePool with ceil_mode and count_include_pad is not "
                                 "supported", unsupported=True)
                    pads[d + 2] += extra
        if kind is PoolKind.AVG and not include and dil != (1, 1) and any(pads):
            ctx.fail("dilated AveragePool with padding excluded from the count is not supported",
                     unsupported=True)
        return ctx.emit(Op.POOL, [x_name], {"kind": kind, "kernel": kernel, "strides": strides,
                                            "dilations": dil, "pads": tuple(pads),
                                            "count_include_pad": include}, out)
    return convert


def _global_pool(kind: Reduction):
    def convert(ctx, node, attrs):
        x = ctx.value(node.input[0])
        ctx.emit(Op.REDUCE, [node.input[0]], {"kind": kind, "axes": tuple(range(2, len(x.shape))),
                                              "keepdims": True}, node.output[0])
    return convert


def parse_axes(ctx, node, attrs, rank: int, input_pos: int = 1):
    """Axes from the attribute (old opsets) or the optional input (new); normalized, sorted."""
    if "axes" in attrs:
        axes = list(attrs["axes"])
    elif len(node.input) > input_pos and node.input[input_pos]:
        axes = [int(a) for a in ctx.need_const(node.input[input_pos], "axes").reshape(-1)]
    else:
        return None
    out = []
    for a in axes:
        if not -rank <= a < rank:
            ctx.fail(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return sorted(set(out))


def _reduce(kind: Reduction):
    def convert(ctx, node, attrs):
        x = ctx.value(node.input[0])
        axes = parse_axes(ctx, node, attrs, len(x.shape))
        if not axes:  # none given (or an empty axes input): all, unless noop_with_empty_axes
            axes = [] if attrs.get("noop_with_empty_axes", 0) else list(range(len(x.shape)))
        if not axes:  # that, or a scalar: nothing to reduce
            ctx.alias(node.output[0], node.input[0])
            return
        ctx.emit(Op.REDUCE, [node.input[0]], {"kind": kind, "axes": tuple(axes),
                                              "keepdims": bool(attrs.get("keepdims", 1))},
                 node.output[0])
    return convert


def softmax(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    axis = int(attrs.get("axis", -1 if ctx.opset >= 13 else 1)) % max(rank, 1)
    if ctx.opset >= 13 or axis == rank - 1:
        ctx.emit(Op.SOFTMAX, [node.input[0]], {"axis": axis}, node.output[0])
        return
    # before opset 13: softmax over the flattened dimensions axis.. as one
    lead, tail = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
    y = ctx.emit(Op.RESHAPE, [node.input[0]], {"shape": (lead, tail)})
    y = ctx.emit(Op.SOFTMAX, [y], {"axis": 1})
    ctx.emit(Op.RESHAPE, [y], {"shape": x.shape}, node.output[0])


def layer_norm(ctx, node, attrs):
    x = ctx.value(node.input[0])
    if len(node.output) > 1 and any(node.output[1:]):
        ctx.fail("LayerNormalization's Mean / InvStdDev outputs are not supported",
                 unsupported=True)
    axis = int(attrs.get("axis", -1)) % len(x.shape)
    ins = [i for i in node.input[:3] if i]
    ctx.emit(Op.LAYER_NORM, ins, {"axis": axis, "epsilon": float(attrs.get("epsilon", 1e-5))},
             node.output[0])


def _binary(op: Op):
    def convert(ctx, node, attrs):
        a, b = node.input[0], node.input[1]
        ta, tb = ctx.value(a).dtype, ctx.value(b).dtype
        if ta != tb:
            cb = ctx.const(b)
            if op is Op.POW and cb is not None:  # Pow allows another exponent type
                b = ctx.add_const(cb.astype(ta), f"{node.output[0]}_exp")
            else:
                ctx.fail(f"operand types differ: {ta} and {tb}")
        ctx.emit(op, [a, b], {}, node.output[0])
    return convert


def mod(ctx, node, attrs):
    _binary(Op.FMOD if attrs.get("fmod", 0) else Op.MOD)(ctx, node, attrs)


def where(ctx, node, attrs):
    c, a, b = node.input[:3]
    if ctx.value(c).dtype != np.bool_:
        ctx.fail(f"the condition must be bool, got {ctx.value(c).dtype}")
    if ctx.value(a).dtype != ctx.value(b).dtype:
        ctx.fail(f"operand types differ: {ctx.value(a).dtype} and {ctx.value(b).dtype}")
    ctx.emit(Op.WHERE, [c, a, b], {}, node.output[0])


def fold_inputs(ctx, op: Op, ins: list, out=None) -> str:
    """``ins[0] op ins[1] op ...`` as a chain of binary nodes, the last one named ``out``."""
    if len(ins) == 1:
        return ctx.alias(out, ins[0]) if out else ins[0]
    y = ins[0]
    for k, i in enumerate(ins[1:]):
        y = ctx.emit(op, [y, i], {}, out if k == len(ins) - 2 else None)
    return y


def _variadic(op: Op):
    def convert(ctx, node, attrs):
        fold_inputs(ctx, op, [i for i in node.input if i], node.output[0])
    return convert


def _unary(op: Op):
    def convert(ctx, node, attrs):
        ctx.emit(op, [node.input[0]], {}, node.output[0])
    return convert


def clip(ctx, node, attrs):
    lo, hi = attrs.get("min"), attrs.get("max")
    if len(node.input) > 1 and node.input[1]:
        lo = float(ctx.need_const(node.input[1], "min").reshape(()))
    if len(node.input) > 2 and node.input[2]:
        hi = float(ctx.need_const(node.input[2], "max").reshape(()))
    ctx.emit(Op.CLIP, [node.input[0]], {"min": lo, "max": hi}, node.output[0])


def gelu(ctx, node, attrs):
    ctx.emit(Op.GELU, [node.input[0]], {"approximate": attrs.get("approximate", "none")},
             node.output[0])


NN_CONVERTERS = {
    "Conv": conv, "Gemm": gemm, "MatMul": matmul, "BatchNormalization": batch_norm,
    "MaxPool": _pool(PoolKind.MAX), "AveragePool": _pool(PoolKind.AVG),
    "GlobalAveragePool": _global_pool(Reduction.MEAN),
    "GlobalMaxPool": _global_pool(Reduction.MAX),
    "ReduceMean": _reduce(Reduction.MEAN), "ReduceSum": _reduce(Reduction.SUM),
    "ReduceMax": _reduce(Reduction.MAX), "ReduceMin": _reduce(Reduction.MIN),
    "Softmax": softmax, "LayerNormalization": layer_norm,
    "Add": _binary(Op.ADD), "Sub": _binary(Op.SUB), "Mul": _binary(Op.MUL),
    "Div": _binary(Op.DIV), "Pow": _binary(Op.POW),
    "Max": _variadic(Op.MAXIMUM), "Min": _variadic(Op.MINIMUM), "Sum": _variadic(Op.ADD),
    "Relu": _unary(Op.RELU), "Sigmoid": _unary(Op.SIGMOID), "Tanh": _unary(Op.TANH),
    "Erf": _unary(Op.ERF), "Exp": _unary(Op.EXP), "Log": _unary(Op.LOG), "Sqrt": _unary(Op.SQRT),
    "Neg": _unary(Op.NEG), "Abs": _unary(Op.ABS), "Reciprocal": _unary(Op.RECIPROCAL),
    "Floor": _unary(Op.FLOOR), "Ceil": _unary(Op.CEIL), "Round": _unary(Op.ROUND),
    "Clip": clip, "Gelu": gelu, "Where": where, "Mod": mod,
    "Sin": _unary(Op.SIN), "Cos": _unary(Op.COS),
    "Equal": _binary(Op.EQUAL), "Less": _binary(Op.LESS), "LessOrEqual": _binary(Op.LESS_EQUAL),
    "Greater": _binary(Op.GREATER), "GreaterOrEqual": _binary(Op.GREATER_EQUAL),
    "And": _binary(Op.AND), "Or": _binary(Op.OR), "Xor": _binary(Op.XOR),
    "Not": _unary(Op.NOT), "IsNaN": _unary(Op.ISNAN),
}
