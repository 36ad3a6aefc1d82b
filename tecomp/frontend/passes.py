"""Graph passes on a :class:`~.graph.Model` before fusion.

- Identity nodes are removed (their readers read the source value); a node that repeats an
  earlier one (same operator, inputs and attributes) is replaced by it.
- A per-output-channel multiply / add / subtract / divide by a constant that follows a
  convolution with constant weights is folded into the convolution's weight and bias (what a
  BatchNormalization becomes on import); a multiply by a per-column constant after a matrix
  product with a constant right operand is folded into that operand (Gemm's alpha).
- A layer normalization written out (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div,
  then an optional scale and shift, as exporters before opset 17 write it) becomes one
  layer_norm node: three passes over the row instead of six kernels.
- Nodes whose results nobody uses are dropped.

Constant folding proper happens during import (a node whose inputs are all constants is
evaluated then); these passes only create new constants from old ones.
"""
from __future__ import annotations

import numpy as np

from .graph import Model, Node, Op

__all__ = ["simplify", "fold_channel_affine", "remove_identities", "eliminate_common",
           "fuse_layer_norms", "eliminate_dead"]


def simplify(m: Model) -> Model:
    """Run every pass of this module, in place; returns ``m``."""
    remove_identities(m)
    eliminate_common(m)
    fuse_layer_norms(m)
    while fold_channel_affine(m):
        pass
    eliminate_dead(m)
    return m


def eliminate_common(m: Model) -> None:
    """Compute each (operator, inputs, attributes) once: exporters repeat the same mask
    computation in every layer of a transformer."""
    outputs = set(m.outputs)
    canon: dict = {}  # small constants of equal value read as one
    for name, a in m.constants.items():
        if a.size <= 1024 and name not in outputs:
            first = canon.setdefault((a.dtype.str, a.shape, a.tobytes()), name)
            if first != name:
                _replace_uses(m, name, first)
    seen: dict = {}
    keep = []
    for n in m.nodes:
        key = (n.op, tuple(n.inputs), repr(sorted(n.attrs.items())))
        first = seen.get(key)
        if first is not None and n.output not in outputs:
            _replace_uses(m, n.output, first)
            continue
        seen.setdefault(key, n.output)
        keep.append(n)
    m.nodes = keep


def _replace_uses(m: Model, old: str, new: str) -> None:
    for n in m.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]


def remove_identities(m: Model) -> None:
    outputs = set(m.outputs)
    keep = []
    for n in m.nodes:
        if n.op is Op.IDENTITY and n.output not in outputs:
            _replace_uses(m, n.output, n.inputs[0])
            continue
        keep.append(n)
    m.nodes = keep


def _channel_vector(c: np.ndarray, out_shape: tuple, axis: int):
    """``c`` as a vector along ``axis`` of ``out_shape`` when, broadcast to it, it varies only
    along that axis (a scalar gives a constant vector); else None."""
    if len(c.shape) > len(out_shape):
        return None
    full = (1,) * (len(out_shape) - len(c.shape)) + tuple(c.shape)
    if any(s != 1 for d, s in enumerate(full) if d != axis):
        return None
    if full[axis] not in (1, out_shape[axis]):
        return None
    return np.broadcast_to(c.reshape(-1), (out_shape[axis],)).astype(np.float64)


def fold_channel_affine(m: Model) -> bool:
    """Fold one constant per-channel affine op into its producer; True when something folded."""
    prod, cons = m.producer(), m.consumers()
    outputs = set(m.outputs)
    for n in m.nodes:
        if n.op not in (Op.MUL, Op.ADD, Op.SUB, Op.DIV) or len(n.inputs) != 2:
            continue
        for pos in (0, 1):
            src, other = n.inputs[pos], n.inputs[1 - pos]
            c = m.constants.get(other)
            p = prod.get(src)
            if c is None or p is None or src in outputs or len(cons.get(src, [])) != 1:
                continue
            if pos == 1 and n.op in (Op.SUB, Op.DIV):
                continue  # c - y and c / y are not affine in y's weights
            if p.op is Op.CONV2D and _fold_into_conv(m, p, n, c):
                return True
            if p.op is Op.MATMUL and n.op in (Op.MUL, Op.DIV) and _fold_into_matmul(m, p, n, c):
                return True
    return False


def _fold_into_conv(m: Model, conv: Node, n: Node, c: np.ndarray) -> bool:
    w = m.constants.get(conv.inputs[1])
    b = m.constants.get(conv.inputs[2]) if len(conv.inputs) > 2 else None
    if "layout" in conv.attrs:  # converted by the layout pass: not OIHW, channels not axis 1
        return False
    if w is None or (len(conv.inputs) > 2 and b is None) or not w.dtype.kind == "f":
        return False
    out_shape = m.values[conv.output].shape
    vec = _channel_vector(c, out_shape, 1)
    if vec is None or m.values[n.output].shape != out_shape:
        return False
    bias = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
    w64 = w.astype(np.float64)
    if n.op is Op.MUL:
        w64, bias = w64 * vec[:, None, None, None], bias * vec
    elif n.op is Op.DIV:
        w64, bias = w64 / vec[:, None, None, None], bias / vec
    elif n.op is Op.ADD:
        bias = bias + vec
    else:
        bias = bias - vec
    wn = m.fresh_name(f"{conv.output}_w")
    m.add_constant(wn, w64.astype(w.dtype))
    bn = m.fresh_name(f"{conv.output}_b")
    m.add_constant(bn, bias.astype(w.dtype))
    _absorb(m, conv, n, [conv.inputs[0], wn, bn])
    return True


def _fold_into_matmul(m: Model, mm: Node, n: Node, c: np.ndarray) -> bool:
    w = m.constants.get(mm.inputs[1])
    if w is None or w.ndim != 2 or w.dtype.kind != "f":
        return False
    out_shape = m.values[mm.output].shape
    vec = _channel_vector(c, out_shape, len(out_shape) - 1)
    if vec is None or m.values[n.output].shape != out_shape:
        return False
    w64 = w.astype(np.float64)
    w64 = w64 * vec[None, :] if n.op is Op.MUL else w64 / vec[None, :]
    wn = m.fresh_name(f"{mm.output}_w")
    m.add_constant(wn, w64.astype(w.dtype))
    _absorb(m, mm, n, [mm.inputs[0], wn])
    return True


def _absorb(m: Model, producer: Node, n: Node, inputs: list) -> None:
    """``producer`` (with new ``inputs``) now computes ``n``'s output; ``n`` is removed."""
    old = producer.output
    producer.inputs = inputs
    producer.outputs = [n.output]
    m.nodes = [x for x in m.nodes if x is not n]
    del m.values[old]


def eliminate_dead(m: Model) -> None:
    live = set(m.outputs)
    keep = []
    for n in reversed(m.nodes):
        if any(o in live for o in n.outputs):
            keep.append(n)
            live.update(n.inputs)
    m.nodes = keep[::-1]
    for name in [k for k in m.constants if k not in live]:
        del m.constants[name]
        del m.values[name]


def _scalar(m: Model, name: str):
    c = m.constants.get(name)
    return None if c is None or c.size != 1 else float(c.reshape(()))


def _only(cons: dict, name: str, outputs: set):
    """The single node reading ``name`` (None when several do or it is a model output)."""
    readers = cons.get(name, [])
    return readers[0] if len(readers) == 1 and name not in outputs else None


def fuse_layer_norms(m: Model) -> None:
    """Replace each written-out layer normalization by one ``Op.LAYER_NORM`` node."""
    from .lower_nn import Reduction
    cons, outputs = m.consumers(), set(m.outputs)
    for mean in list(m.nodes):
        if mean.op is not Op.REDUCE or mean.attrs["kind"] is not Reduction.MEAN \
                or not mean.attrs["keepdims"]:
            continue
        x = mean.inputs[0]
        rank = len(m.values[x].shape)
        axes = tuple(mean.attrs["axes"])
        if not axes or axes != tuple(range(rank - len(axes), rank)):
            continue
        sub = _only(cons, mean.output, outputs)
        if sub is None or sub.op is not Op.SUB or sub.inputs != [x, mean.output]:
            continue
        readers = cons.get(sub.output, [])
        sq = next((r for r in readers if r.op is Op.POW and r.inputs[0] == sub.output
                   and _scalar(m, r.inputs[1]) == 2.0), None)
        div = next((r for r in readers if r.op is Op.DIV and r.inputs[0] == sub.output), None)
        if sq is None or div is None or len(readers) != 2 or sub.output in outputs:
            continue
        var = _only(cons, sq.output, outputs)
        if var is None or var.op is not Op.REDUCE or var.attrs != mean.attrs:
            continue
        add = _only(cons, var.output, outputs)
        eps = _scalar(m, add.inputs[1]) if add is not None and add.op is Op.ADD else None
        sqrt = _only(cons, add.output, outputs) if eps is not None else None
        if sqrt is None or sqrt.op is not Op.SQRT or div.inputs[1] != sqrt.output \
                or _only(cons, sqrt.output, outputs) is not div:
            continue
        norm = m.values[x].shape[rank - len(axes):]
        dtype = m.values[x].dtype
        last, scale, shift = div, None, None
        mul = _only(cons, div.output, outputs)
        if mul is not None and mul.op is Op.MUL and mul.inputs[0] == div.output and \
                _trailing(m, mul.inputs[1], norm):
            last, scale = mul, mul.inputs[1]
            bias = _only(cons, mul.output, outputs)
            if bias is not None and bias.op is Op.ADD and bias.inputs[0] == mul.output and \
                    _trailing(m, bias.inputs[1], norm):
                last, shift = bias, bias.inputs[1]
        if scale is None:
            scale = m.fresh_name(f"{last.output}_ones")
            m.add_constant(scale, np.ones(norm, dtype))
        chain = [mean, sub, sq, var, add, sqrt, div] + ([mul] if last is not div else []) + \
            ([last] if shift is not None else [])
        ln = Node(Op.LAYER_NORM, [x, scale] + ([shift] if shift else []), [last.output],
                  {"axis": rank - len(axes), "epsilon": eps}, mean.source)
        drop = {id(n) for n in chain}
        m.nodes = [ln if n is last else n for n in m.nodes if id(n) not in drop or n is last]
        cons = m.consumers()


def _trailing(m: Model, name: str, norm: tuple) -> bool:
    """A constant that broadcasts along the normalized (trailing) dimensions only."""
    c = m.constants.get(name)
    if c is None or c.ndim > len(norm):
        return False
    return all(s in (1, n) for s, n in zip(c.shape[::-1], norm[::-1]))
