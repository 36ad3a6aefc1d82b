"""ONNX CumSum as one compute: each output sums the input over a range of the scanned axis that
depends on the output's own index (``[0, i]``, exclusive ``[0, i)``, reversed ``[i, n)``,
reversed exclusive ``(i, n)``). The range is a reduce axis with expression bounds, which the
loop IR runs directly; it does ``n^2 / 2`` additions along the axis, nothing is precomputed."""
from __future__ import annotations

from .. import ir
from .graph import Op

__all__ = ["lower_cumsum", "cumsum"]


def lower_cumsum(x, attrs: dict, name: str):
    axis, exclusive, reverse = attrs["axis"], attrs["exclusive"], attrs["reverse"]
    n = x.shape[axis]

    def body(*idx):
        i = idx[axis]
        if reverse:
            bounds = (i + 1 if exclusive else i, n)
        else:
            bounds = (0, i if exclusive else i + 1)
        k = ir.reduce_axis(bounds, name="k")
        return ir.sum(x[idx[:axis] + (k,) + idx[axis + 1:]], axis=k)

    return ir.compute(x.shape, body, name=name, tag="cumsum")


def cumsum(ctx, node, attrs):
    """The ONNX converter: the axis must be a constant."""
    x = ctx.value(node.input[0])
    if not x.shape:
        ctx.fail("CumSum of a scalar")
    axis = int(ctx.need_const(node.input[1], "axis").reshape(-1)[0])
    if not -len(x.shape) <= axis < len(x.shape):
        ctx.fail(f"axis {axis} is out of range for rank {len(x.shape)}")
    if x.dtype.kind not in "fi":
        ctx.fail(f"CumSum of {x.dtype} is not supported", unsupported=True)
    ctx.emit(Op.CUMSUM, [node.input[0]], {"axis": axis % len(x.shape),
                                          "exclusive": bool(attrs.get("exclusive", 0)),
                                          "reverse": bool(attrs.get("reverse", 0))},
             node.output[0])
