"""ONNX converters that compose tecomp operators: the parametrized activations, PRelu, Mean,
LogSoftmax, the L1/L2/log-sum reductions, Instance/GroupNormalization, Split, Tile,
DepthToSpace/SpaceToDepth, Trilu, Range and Size. Each emits nodes of :class:`~.graph.Op` that
the fusion pass merges again (an activation is one elementwise node; a log-softmax is the two
reductions and elementwise steps a hand-written kernel would do)."""
from __future__ import annotations

import numpy as np

from .activations import DEFAULTS, Activation
from .convert_nn import fold_inputs, parse_axes
from .graph import Op
from .lower_nn import PoolKind, Reduction

__all__ = ["MORE_CONVERTERS"]


def _activation(kind: Activation):
    (a0, b0), (name_a, name_b) = DEFAULTS[kind]

    def convert(ctx, node, attrs):
        a = float(attrs.get(name_a, a0)) if name_a else a0
        b = float(attrs.get(name_b, b0)) if name_b else b0
        if kind is Activation.CELU and a == 0.0:
            ctx.fail("Celu alpha must be nonzero")
        ctx.emit(Op.ACTIVATION, [node.input[0]], {"kind": kind, "alpha": a, "beta": b},
                 node.output[0])
    return convert


def _scalar(ctx, value: float, like: str) -> str:
    return ctx.add_const(np.array(value, dtype=ctx.value(like).dtype), f"{like}_scalar")


def prelu(ctx, node, attrs):
    x, slope = node.input[0], node.input[1]
    xs, ss = ctx.value(x).shape, ctx.value(slope).shape
    if ctx.value(slope).dtype != ctx.value(x).dtype:
        ctx.fail(f"slope type {ctx.value(slope).dtype} differs from the input's "
                 f"{ctx.value(x).dtype}")
    try:
        if tuple(np.broadcast_shapes(xs, ss)) != tuple(xs):
            raise ValueError
    except ValueError:
        ctx.fail(f"slope {list(ss)} does not broadcast to the input {list(xs)}")
    neg = ctx.emit(Op.LESS, [x, _scalar(ctx, 0, x)], {})
    ctx.emit(Op.WHERE, [neg, ctx.emit(Op.MUL, [x, slope], {}), x], {}, node.output[0])


def mean(ctx, node, attrs):
    ins = [i for i in node.input if i]
    if len(ins) == 1:
        ctx.alias(node.output[0], ins[0])
        return
    y = fold_inputs(ctx, Op.ADD, ins)
    ctx.emit(Op.MUL, [y, _scalar(ctx, 1.0 / len(ins), ins[0])], {}, node.output[0])


def _reduce(ctx, x: str, kind: Reduction, axes, keepdims: bool, out=None) -> str:
    return ctx.emit(Op.REDUCE, [x], {"kind": kind, "axes": tuple(axes), "keepdims": keepdims},
                    out)


def log_softmax(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    axis = int(attrs.get("axis", -1 if ctx.opset >= 13 else 1)) % max(rank, 1)
    src = node.input[0]
    flat = ctx.opset < 13 and axis != rank - 1
    if flat:  # before opset 13: over the flattened dimensions axis.. as one
        lead, tail = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
        src, axis = ctx.emit(Op.RESHAPE, [src], {"shape": (lead, tail)}), 1
    # x - max - log(sum(exp(x - max))): no overflow, no log(0) where softmax underflows
    d = ctx.emit(Op.SUB, [src, _reduce(ctx, src, Reduction.MAX, (axis,), True)], {})
    s = _reduce(ctx, ctx.emit(Op.EXP, [d], {}), Reduction.SUM, (axis,), True)
    out = None if flat else node.output[0]
    y = ctx.emit(Op.SUB, [d, ctx.emit(Op.LOG, [s], {})], {}, out)
    if flat:
        ctx.emit(Op.RESHAPE, [y], {"shape": x.shape}, node.output[0])


def _reduce_composite(name: str):
    def convert(ctx, node, attrs):
        x = ctx.value(node.input[0])
        rank = len(x.shape)
        axes = parse_axes(ctx, node, attrs, rank)
        if not axes:  # none given (or an empty axes input): all, unless noop_with_empty_axes
            if attrs.get("noop_with_empty_axes", 0) and rank:
                ctx.fail(f"{name} with noop_with_empty_axes and no axes is not supported",
                         unsupported=True)
            axes = list(range(rank))
        keep = bool(attrs.get("keepdims", 1))
        src = node.input[0]
        if not axes:  # a scalar: the function of its one element
            one = {"ReduceL1": Op.ABS, "ReduceL2": Op.ABS, "ReduceLogSum": Op.LOG}.get(name)
            if name == "ReduceSumSquare":
                ctx.emit(Op.MUL, [src, src], {}, node.output[0])
            elif one is not None:
                ctx.emit(one, [src], {}, node.output[0])
            else:
                ctx.alias(node.output[0], src)
            return
        if name == "ReduceLogSumExp":
            m = _reduce(ctx, src, Reduction.MAX, axes, True)
            # shift by 0 where the maximum is infinite: a row of -inf gives -inf, not NaN
            inf = ctx.emit(Op.ISNAN, [ctx.emit(Op.SUB, [m, m], {})], {})
            m = ctx.emit(Op.WHERE, [inf, _scalar(ctx, 0, src), m], {})
            e = ctx.emit(Op.EXP, [ctx.emit(Op.SUB, [src, m], {})], {})
            y = ctx.emit(Op.ADD, [ctx.emit(Op.LOG, [_reduce(ctx, e, Reduction.SUM, axes, True)],
                                           {}), m], {}, None if not keep else node.output[0])
            if not keep:
                shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
                ctx.emit(Op.RESHAPE, [y], {"shape": shape}, node.output[0])
            return
        if name == "ReduceL1":
            src = ctx.emit(Op.ABS, [src], {})
        elif name in ("ReduceL2", "ReduceSumSquare"):
            src = ctx.emit(Op.MUL, [src, src], {})
        last = {"ReduceL2": Op.SQRT, "ReduceLogSum": Op.LOG}.get(name)
        y = _reduce(ctx, src, Reduction.SUM, axes, keep, None if last else node.output[0])
        if last:
            ctx.emit(last, [y], {}, node.output[0])
    return convert


def _channel_const(ctx, name: str, what: str, channels: int, groups: int, rank: int) -> str:
    """A per-channel scale/bias, shaped to broadcast over a ``rank``-d NC... tensor; a per-group
    one (GroupNormalization before opset 21) repeated over each group's channels."""
    v = ctx.value(name)
    n = v.size
    if n not in (channels, groups):
        ctx.fail(f"{what} has {n} values; expected {channels}")
    shape = (channels,) + (1,) * (rank - 2)
    c = ctx.const(name)
    if c is not None:
        c = c.reshape(-1)
        if n != channels:
            c = np.repeat(c, channels // groups)
        return ctx.add_const(c.reshape(shape), f"{name}_{what}")
    if n != channels:
        ctx.fail(f"a per-group {what} computed at run time is not supported", unsupported=True)
    return ctx.emit(Op.RESHAPE, [name], {"shape": shape})


def _grouped_norm(ctx, node, groups: int, eps: float):
    """Normalize over each (sample, group)'s channels and space, then scale and shift per
    channel: a layer normalization of the input seen as ``[N, groups, C / groups * space]``."""
    x = ctx.value(node.input[0])
    if len(x.shape) < 3:
        ctx.fail(f"input {list(x.shape)} must have rank >= 3 (N, C, spatial...)")
    n, c = x.shape[0], x.shape[1]
    if groups < 1 or c % groups:
        ctx.fail(f"{c} channels do not split into {groups} groups")
    inner = int(np.prod(x.shape[1:])) // groups
    r = ctx.emit(Op.RESHAPE, [node.input[0]], {"shape": (n, groups, inner)})
    one = ctx.add_const(np.ones(1, x.dtype), "one")
    ln = ctx.emit(Op.LAYER_NORM, [r, one], {"axis": 2, "epsilon": eps})
    y = ctx.emit(Op.RESHAPE, [ln], {"shape": x.shape})
    rank = len(x.shape)
    s = _channel_const(ctx, node.input[1], "scale", c, groups, rank)
    b = _channel_const(ctx, node.input[2], "bias", c, groups, rank)
    ctx.emit(Op.ADD, [ctx.emit(Op.MUL, [y, s], {}), b], {}, node.output[0])


def instance_norm(ctx, node, attrs):
    x = ctx.value(node.input[0])
    _grouped_norm(ctx, node, x.shape[1] if len(x.shape) > 1 else 1,
                  float(attrs.get("epsilon", 1e-5)))


def group_norm(ctx, node, attrs):
    if "num_groups" not in attrs:
        ctx.fail("GroupNormalization needs num_groups")
    _grouped_norm(ctx, node, int(attrs["num_groups"]), float(attrs.get("epsilon", 1e-5)))


def split(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    axis = int(attrs.get("axis", 0)) % rank
    n, outs = x.shape[axis], list(node.output)
    if "split" in attrs:
        sizes = [int(s) for s in attrs["split"]]
    elif len(node.input) > 1 and node.input[1]:
        sizes = [int(s) for s in ctx.need_const(node.input[1], "split").reshape(-1)]
    else:  # equal parts; opset 18's num_outputs lets the last one be smaller
        k = int(attrs.get("num_outputs", len(outs)))
        chunk = -(-n // k)
        sizes = [max(0, min(chunk, n - i * chunk)) for i in range(k)]
    if len(sizes) != len(outs) or sum(sizes) != n or any(s < 0 for s in sizes):
        ctx.fail(f"split sizes {sizes} do not divide dimension {axis} ({n}) into "
                 f"{len(outs)} outputs")
    start = 0
    for size, out in zip(sizes, outs):
        if out and size == 0:
            ctx.fail("an empty Split output is not supported", unsupported=True)
        if out and size == n:
            ctx.alias(out, node.input[0])
        elif out:
            begin = [0] * rank
            begin[axis] = start
            shape = list(x.shape)
            shape[axis] = size
            ctx.emit(Op.SLICE, [node.input[0]], {"starts": tuple(begin), "steps": (1,) * rank,
                                                 "shape": tuple(shape)}, out)
        start += size


def tile(ctx, node, attrs):
    x = ctx.value(node.input[0])
    reps = [int(r) for r in ctx.need_const(node.input[1], "repeats").reshape(-1)]
    if len(reps) != len(x.shape) or any(r < 1 for r in reps):
        ctx.fail(f"repeats {reps} must be {len(x.shape)} positive values")
    if all(r == 1 for r in reps):
        ctx.alias(node.output[0], node.input[0])
        return
    # [s0, s1] -> [1, s0, 1, s1] -> expand [r0, s0, r1, s1] -> [r0 * s0, r1 * s1]
    ones = tuple(v for s in x.shape for v in (1, s))
    full = tuple(v for r, s in zip(reps, x.shape) for v in (r, s))
    ctx.check_size(full)
    y = ctx.emit(Op.RESHAPE, [node.input[0]], {"shape": ones})
    y = ctx.emit(Op.EXPAND, [y], {"shape": full})
    ctx.emit(Op.RESHAPE, [y], {"shape": tuple(r * s for r, s in zip(reps, x.shape))},
             node.output[0])


def _regroup(ctx, node, split_shape, perm, out_shape):
    y = ctx.emit(Op.RESHAPE, [node.input[0]], {"shape": tuple(split_shape)})
    y = ctx.emit(Op.TRANSPOSE, [y], {"perm": tuple(perm)})
    ctx.emit(Op.RESHAPE, [y], {"shape": tuple(out_shape)}, node.output[0])


def depth_to_space(ctx, node, attrs):
    x = ctx.value(node.input[0])
    b = int(attrs.get("blocksize", 0))
    if len(x.shape) != 4 or b < 1 or x.shape[1] % (b * b):
        ctx.fail(f"input {list(x.shape)} and blocksize {b}: need NCHW with C divisible by b^2")
    n, c, h, w = x.shape
    out = (n, c // (b * b), h * b, w * b)
    if attrs.get("mode", "DCR") == "CRD":
        _regroup(ctx, node, (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3), out)
    else:
        _regroup(ctx, node, (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2), out)


def space_to_depth(ctx, node, attrs):
    x = ctx.value(node.input[0])
    b = int(attrs.get("blocksize", 0))
    if len(x.shape) != 4 or b < 1 or x.shape[2] % b or x.shape[3] % b:
        ctx.fail(f"input {list(x.shape)} and blocksize {b}: need NCHW with H, W divisible by b")
    n, c, h, w = x.shape
    _regroup(ctx, node, (n, c, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4),
             (n, c * b * b, h // b, w // b))


def trilu(ctx, node, attrs):
    x = ctx.value(node.input[0])
    if len(x.shape) < 2:
        ctx.fail(f"input {list(x.shape)} must have rank >= 2")
    k = int(ctx.need_const(node.input[1], "k").reshape(())) \
        if len(node.input) > 1 and node.input[1] else 0
    ones = np.ones(x.shape[-2:], bool)
    mask = np.triu(ones, k) if attrs.get("upper", 1) else np.tril(ones, k)
    ctx.emit(Op.WHERE, [ctx.add_const(mask, "trilu_mask"), node.input[0],
                        _scalar(ctx, 0, node.input[0])], {}, node.output[0])


def range_(ctx, node, attrs):
    start, limit, delta = (ctx.need_const(i, w).reshape(()) for i, w in
                           zip(node.input[:3], ("start", "limit", "delta")))
    if delta == 0:
        ctx.fail("Range delta 0")
    n = max(int(np.ceil((limit - start) / delta)), 0)
    ctx.check_size((n,))
    ctx.model.add_constant(node.output[0],
                           (start + np.arange(n) * delta).astype(ctx.value(node.input[0]).dtype))


def _arg_extreme(largest: bool):
    """ArgMax / ArgMin: the first (or, with select_last_index, the last) position of the
    extreme along the axis, a NaN counting as the extreme (numpy's and ONNX Runtime's
    answer), as reductions: the extreme, then the least (greatest) index where it occurs."""
    def convert(ctx, node, attrs):
        x = ctx.value(node.input[0])
        rank = len(x.shape)
        if not rank:
            ctx.fail("ArgMax / ArgMin of a scalar")
        axis = int(attrs.get("axis", 0)) % rank
        keep, last = bool(attrs.get("keepdims", 1)), bool(attrs.get("select_last_index", 0))
        src = node.input[0]
        ext = _reduce(ctx, src, Reduction.MAX if largest else Reduction.MIN, (axis,), True)
        hit = ctx.emit(Op.OR, [ctx.emit(Op.EQUAL, [src, ext], {}),
                               ctx.emit(Op.ISNAN, [src], {})], {})
        n = x.shape[axis]
        pos = ctx.add_const(np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (rank - 1 - axis)),
                            f"{node.output[0]}_positions")
        miss = ctx.add_const(np.array(-1 if last else n, np.int64), f"{node.output[0]}_none")
        cand = ctx.emit(Op.WHERE, [hit, pos, miss], {})
        _reduce(ctx, cand, Reduction.MAX if last else Reduction.MIN, (axis,), keep,
                node.output[0])
    return convert


def lrn(ctx, node, attrs):
    """Local response normalization across channels: ``x / (bias + alpha / size * sum of x^2
    over the window)^beta``; the window sum is an average pooling (padding counted) of
    ``x^2`` seen as ``[N, 1, C, H * W]``."""
    x = ctx.value(node.input[0])
    if len(x.shape) < 3 or "size" not in attrs:
        ctx.fail(f"LRN needs an input [N, C, ...] (got {list(x.shape)}) and a size")
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    n, c = x.shape[0], x.shape[1]
    rest = int(np.prod(x.shape[2:]))
    sq = ctx.emit(Op.MUL, [node.input[0], node.input[0]], {})
    sq = ctx.emit(Op.RESHAPE, [sq], {"shape": (n, 1, c, rest)})
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    avg = ctx.emit(Op.POOL, [sq], {"kind": PoolKind.AVG, "kernel": (size, 1), "strides": (1, 1),
                                   "dilations": (1, 1), "pads": (lo, 0, hi, 0),
                                   "count_include_pad": True})
    avg = ctx.emit(Op.RESHAPE, [avg], {"shape": x.shape})
    den = ctx.emit(Op.ADD, [ctx.emit(Op.MUL, [avg, _scalar(ctx, alpha, node.input[0])], {}),
                            _scalar(ctx, bias, node.input[0])], {})
    den = ctx.emit(Op.POW, [den, _scalar(ctx, beta, node.input[0])], {})
    ctx.emit(Op.DIV, [node.input[0], den], {}, node.output[0])


def size(ctx, node, attrs):
    ctx.model.add_constant(node.output[0], np.array(ctx.value(node.input[0]).size, np.int64))


MORE_CONVERTERS = {
    **{k.value: _activation(k) for k in Activation},
    "PRelu": prelu, "Mean": mean, "LogSoftmax": log_softmax,
    **{n: _reduce_composite(n) for n in ("ReduceL1", "ReduceL2", "ReduceSumSquare",
                                         "ReduceLogSum", "ReduceLogSumExp")},
    "InstanceNormalization": instance_norm, "GroupNormalization": group_norm,
    "Split": split, "Tile": tile, "DepthToSpace": depth_to_space,
    "SpaceToDepth": space_to_depth, "Trilu": trilu, "Range": range_, "Size": size,
    "ArgMax": _arg_extreme(True), "ArgMin": _arg_extreme(False), "LRN": lrn,
}
