"""ONNX converters of the shape and data-movement operators: Shape, Constant, Reshape, Flatten,
(Un)squeeze, Transpose, Concat, Gather, Slice, Expand, Pad, Cast, Identity, Dropout. Shape-valued
inputs must be constants (initializers, or computed from static shapes at import)."""
from __future__ import annotations

import numpy as np

from .graph import Op

__all__ = ["TENSOR_CONVERTERS"]


def shape(ctx, node, attrs):
    s = ctx.value(node.input[0]).shape
    start, end = attrs.get("start", 0), attrs.get("end", None)
    ctx.model.add_constant(node.output[0], np.array(s[start:end], dtype=np.int64))


def constant(ctx, node, attrs):
    from onnx import numpy_helper
    if "value" in attrs:
        arr = numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs:
        arr = np.array(attrs["value_float"], dtype=np.float32)
    elif "value_floats" in attrs:
        arr = np.array(attrs["value_floats"], dtype=np.float32)
    elif "value_int" in attrs:
        arr = np.array(attrs["value_int"], dtype=np.int64)
    elif "value_ints" in attrs:
        arr = np.array(attrs["value_ints"], dtype=np.int64)
    else:
        ctx.fail(f"Constant with attributes {sorted(attrs)} is not supported", unsupported=True)
    ctx.model.add_constant(node.output[0], arr)


def constant_of_shape(ctx, node, attrs):
    from onnx import numpy_helper
    dims = [int(d) for d in ctx.need_const(node.input[0], "shape").reshape(-1)]
    ctx.check_size(dims)
    val = numpy_helper.to_array(attrs["value"]).reshape(-1) if "value" in attrs \
        else np.zeros(1, np.float32)
    ctx.model.add_constant(node.output[0], np.full(dims, val[0], dtype=val.dtype))


def _reshape_to(ctx, node, out_shape):
    src = node.input[0]
    if tuple(out_shape) == ctx.value(src).shape:
        ctx.alias(node.output[0], src)
    else:
        ctx.emit(Op.RESHAPE, [src], {"shape": tuple(int(s) for s in out_shape)}, node.output[0])


def reshape(ctx, node, attrs):
    x = ctx.value(node.input[0])
    target = [int(s) for s in (attrs["shape"] if "shape" in attrs and len(node.input) < 2
                               else ctx.need_const(node.input[1], "shape").reshape(-1))]
    allow_zero = attrs.get("allowzero", 0)
    out = [x.shape[d] if s == 0 and not allow_zero and d < len(x.shape) else s
           for d, s in enumerate(target)]
    if out.count(-1) > 1:
        ctx.fail(f"shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1]))
        if known == 0 or x.size % known:
            ctx.fail(f"cannot reshape {list(x.shape)} to {target}")
        out[out.index(-1)] = x.size // known
    if any(s < 0 for s in out) or int(np.prod(out, dtype=object)) != x.size:
        ctx.fail(f"cannot reshape {list(x.shape)} ({x.size} elements) to {target}")
    _reshape_to(ctx, node, out)


def flatten(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis  # -1 is rank - 1 (not rank: axis counts [-r, r])
    _reshape_to(ctx, node, (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))))


def squeeze(ctx, node, attrs):
    x = ctx.value(node.input[0])
    from .convert_nn import parse_axes
    axes = parse_axes(ctx, node, attrs, len(x.shape))
    if axes is None:
        axes = [d for d, s in enumerate(x.shape) if s == 1]
    if any(x.shape[a] != 1 for a in axes):
        ctx.fail(f"cannot squeeze axes {axes} of shape {list(x.shape)}")
    _reshape_to(ctx, node, [s for d, s in enumerate(x.shape) if d not in axes])


def unsqueeze(ctx, node, attrs):
    x = ctx.value(node.input[0])
    from .convert_nn import parse_axes
    rank = len(x.shape) + (len(attrs["axes"]) if "axes" in attrs else
                           int(ctx.need_const(node.input[1], "axes").size))
    axes = parse_axes(ctx, node, attrs, rank)
    out, it = [], iter(x.shape)
    for d in range(rank):
        out.append(1 if d in axes else next(it))
    _reshape_to(ctx, node, out)


def transpose(ctx, node, attrs):
    x = ctx.value(node.input[0])
    perm = tuple(attrs.get("perm", range(len(x.shape) - 1, -1, -1)))
    if sorted(perm) != list(range(len(x.shape))):
        ctx.fail(f"perm {list(perm)} is not a permutation of {len(x.shape)} axes")
    if perm == tuple(range(len(x.shape))):
        ctx.alias(node.output[0], node.input[0])
    else:
        ctx.emit(Op.TRANSPOSE, [node.input[0]], {"perm": perm}, node.output[0])


def concat(ctx, node, attrs):
    ins = [i for i in node.input if i and ctx.value(i).size > 0]
    rank = len(ctx.value(node.input[0]).shape)
    axis = int(attrs["axis"]) % rank
    for i in ins:
        s = ctx.value(i).shape
        if len(s) != rank or any(a != b for d, (a, b) in enumerate(
                zip(s, ctx.value(ins[0]).shape)) if d != axis):
            ctx.fail(f"Concat inputs {[list(ctx.value(j).shape) for j in ins]} differ outside "
                     f"axis {axis}")
    if len(ins) == 1:
        ctx.alias(node.output[0], ins[0])
    else:
        ctx.emit(Op.CONCAT, ins, {"axis": axis}, node.output[0])


def gather(ctx, node, attrs):
    x = ctx.value(node.input[0])
    axis = int(attrs.get("axis", 0)) % len(x.shape)
    idx = ctx.value(node.input[1])
    if idx.dtype.kind != "i":
        ctx.fail(f"Gather indices must be integers, got {idx.dtype}")
    c = ctx.const(node.input[1])
    if c is not None and c.size and (c.min() < -x.shape[axis] or c.max() >= x.shape[axis]):
        ctx.fail(f"Gather indices {c.min()}..{c.max()} are out of range for dimension {axis} of "
                 f"size {x.shape[axis]}")
    ctx.emit(Op.GATHER, [node.input[0], node.input[1]], {"axis": axis}, node.output[0])


def gather_elements(ctx, node, attrs):
    data, idx = ctx.value(node.input[0]), ctx.value(node.input[1])
    rank = len(data.shape)
    axis = int(attrs.get("axis", 0)) % max(rank, 1)
    if idx.dtype.kind != "i":
        ctx.fail(f"GatherElements indices must be integers, got {idx.dtype}")
    if len(idx.shape) != rank or any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape))
                                     if k != axis):
        ctx.fail(f"indices {list(idx.shape)} do not fit data {list(data.shape)} off axis {axis}")
    c, n = ctx.const(node.input[1]), data.shape[axis]
    if c is not None and c.size and (c.min() < -n or c.max() >= n):
        ctx.fail(f"GatherElements indices out of range for dimension {axis} of size {n}")
    ctx.emit(Op.GATHER_ELEMENTS, [node.input[0], node.input[1]], {"axis": axis}, node.output[0])


def slice_(ctx, node, attrs):
    x = ctx.value(node.input[0])
    rank = len(x.shape)
    if ctx.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes", range(len(starts))), [1] * len(starts)
    else:
        def opt(k, what, default):
            if len(node.input) > k and node.input[k]:
                return [int(v) for v in ctx.need_const(node.input[k], what).reshape(-1)]
            return default
        starts, ends = opt(1, "starts", None), opt(2, "ends", None)
        axes = opt(3, "axes", list(range(len(starts))))
        steps = opt(4, "steps", [1] * len(starts))
    begin, step, size = [0] * rank, [1] * rank, list(x.shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= rank
        if st == 0:
            ctx.fail("Slice step 0")
        sl = range(*slice(s, e, st).indices(x.shape[a]))
        begin[a], step[a], size[a] = (sl.start if len(sl) else 0), st, len(sl)
    if size == list(x.shape) and all(s == 1 for s in step):
        ctx.alias(node.output[0], node.input[0])
        return
    ctx.emit(Op.SLICE, [node.input[0]], {"starts": tuple(begin), "steps": tuple(step),
                                         "shape": tuple(size)}, node.output[0])


def expand(ctx, node, attrs):
    x = ctx.value(node.input[0])
    target = [int(s) for s in ctx.need_const(node.input[1], "shape").reshape(-1)]
    try:
        out = np.broadcast_shapes(x.shape, tuple(target))
    except ValueError:
        ctx.fail(f"cannot expand {list(x.shape)} to {target}")
    ctx.check_size(out)
    if tuple(out) == x.shape:
        ctx.alias(node.output[0], node.input[0])
    else:
        ctx.emit(Op.EXPAND, [node.input[0]], {"shape": tuple(out)}, node.output[0])


def pad(ctx, node, attrs):
    x = ctx.value(node.input[0])
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        ctx.fail(f"Pad mode {mode!r} is not supported (only 'constant')", unsupported=True)
    if "pads" in attrs:
        pads, value = list(attrs["pads"]), float(attrs.get("value", 0.0))
    else:
        pads = [int(p) for p in ctx.need_const(node.input[1], "pads").reshape(-1)]
        value = float(ctx.need_const(node.input[2], "constant_value").reshape(())) \
            if len(node.input) > 2 and node.input[2] else 0.0
        if len(node.input) > 3 and node.input[3]:
            ctx.fail("Pad with an axes input is not supported", unsupported=True)
    rank = len(x.shape)
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        ctx.fail(f"pads {pads} must be {2 * rank} non-negative values (negative pads crop)",
                 unsupported=True)
    ctx.emit(Op.PAD, [node.input[0]], {"before": tuple(pads[:rank]), "after": tuple(pads[rank:]),
                                       "value": value}, node.output[0])


def cast(ctx, node, attrs):
    from onnx import helper
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    if dtype.name not in ("float32", "float64", "float16", "int64", "int32", "int8", "bool"):
        ctx.fail(f"Cast to {dtype.name} is not supported", unsupported=True)
    if dtype == ctx.value(node.input[0]).dtype:
        ctx.alias(node.output[0], node.input[0])
    else:
        ctx.emit(Op.CAST, [node.input[0]], {"dtype": dtype.name}, node.output[0])


def identity(ctx, node, attrs):
    ctx.alias(node.output[0], node.input[0])
    if len(node.output) > 1 and node.output[1]:  # Dropout's mask: all true at inference
        ctx.model.add_constant(node.output[1], np.ones(ctx.value(node.input[0]).shape, bool))


TENSOR_CONVERTERS = {
    "Shape": shape, "Constant": constant, "ConstantOfShape": constant_of_shape,
    "Reshape": reshape, "Flatten": flatten, "Squeeze": squeeze, "Unsqueeze": unsqueeze,
    "Transpose": transpose, "Concat": concat, "Gather": gather, "Slice": slice_,
    "GatherElements": gather_elements,
    "Expand": expand, "Pad": pad, "Cast": cast, "Identity": identity, "Dropout": identity,
}
