"""The layout pass: run an NCHW model's convolutions, and the operators between them, in NHWC.

ONNX models arrive NCHW; tecomp's convolutions are faster channels-last on CPU (the output
channels are the contiguous axis its schedules vectorize). :func:`convert_layout` walks the
nodes in order and keeps, per value, whether it is stored NHWC (its :class:`~.graph.Value` shape
is then the NHWC one):

- a convolution with constant weights (grouped and depthwise included) takes its input in NHWC
  and its weight transposed once, here, to HWIO (a new constant); its output is NHWC;
- the operators that follow the layout run in it: elementwise ones (a constant operand is
  transposed once; a one-element one stays a literal), pooling, reductions (global average
  pooling; axes renumbered), concatenation on the channel axis, padding, and a transpose (its
  permutation composed with the layout's);
- a reshape of an NHWC value whose spatial size or channel count is 1 (``Flatten`` after global
  pooling) reads it as it is: both layouts store such a tensor in the same order;
- every other reader gets an NCHW copy (one TRANSPOSE node per value, shared by its readers),
  and so do the model's outputs; an input is transposed once for all its NHWC readers.

So ResNet-50 gets one transpose, of its input image, and none per convolution.
"""
from __future__ import annotations

from .graph import Layout, Model, Node, Op, Pattern, Value

__all__ = ["Layout", "resolve_layout", "convert_layout", "count_transposes", "TO_NHWC",
           "TO_NCHW"]

TO_NHWC = (0, 2, 3, 1)   # NCHW -> NHWC
TO_NCHW = (0, 3, 1, 2)   # NHWC -> NCHW
_POS = {0: 0, 1: 3, 2: 1, 3: 2}  # NCHW axis -> its position in NHWC


def _nhwc_conv(m: Model, n: Node) -> bool:
    """A convolution this pass runs in NHWC: constant weights (transposed here)."""
    return n.op is Op.CONV2D and n.inputs[1] in m.constants and \
        n.attrs.get("layout", Layout.NCHW) is Layout.NCHW


def resolve_layout(m: Model, layout) -> Layout:
    """``layout`` (a :class:`Layout` or its name) with AUTO resolved for model ``m``: NHWC when
    it has a convolution with constant weights, else NCHW."""
    if isinstance(layout, str):
        try:
            layout = Layout.AUTO if layout.lower() == "auto" else Layout(layout.upper())
        except ValueError:
            raise ValueError(f"unknown layout {layout!r}; expected one of "
                             f"{[x.value for x in Layout]}") from None
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a tc.Layout, got {type(layout).__name__}")
    if layout is Layout.AUTO:
        return Layout.NHWC if any(_nhwc_conv(m, n) for n in m.nodes) else Layout.NCHW
    return layout


def count_transposes(m: Model) -> int:
    """How many TRANSPOSE nodes ``m`` runs (layout transforms and the model's own)."""
    return sum(1 for n in m.nodes if n.op is Op.TRANSPOSE)


class _Pass:
    def __init__(self, m: Model):
        self.m = m
        self.nhwc: set = set()    # values stored NHWC
        self.copies: dict = {}    # (value, Layout) -> its transposed copy
        self.nodes: list = []
        self.made: dict = {}      # value -> the node (already placed) computing it

    # ------------------------------------------------------------------ values
    def is_nhwc(self, name: str) -> bool:
        return name in self.nhwc

    def as_layout(self, name: str, want: Layout) -> str:
        """``name`` stored in ``want`` (a transposed constant, or a TRANSPOSE node's output)."""
        m = self.m
        if (name in self.nhwc) == (want is Layout.NHWC):
            return name
        key = (name, want)
        if key not in self.copies:
            perm = TO_NHWC if want is Layout.NHWC else TO_NCHW
            out = m.fresh_name(f"{name}_{want.value.lower()}")
            if name in m.constants:
                m.add_constant(out, m.constants[name].transpose(perm))
            else:
                src, v = name, m.values[name]
                prev = self.made.get(name)
                if prev is not None and prev.op is Op.TRANSPOSE and prev.inputs[0] not in self.nhwc:
                    # the model's own transpose then the layout's: one transpose of its input
                    # (none when they cancel, as around the convolutions of an NHWC export)
                    src = prev.inputs[0]
                    perm = tuple(prev.attrs["perm"][k] for k in perm)
                    if perm == tuple(range(4)):
                        self.copies[key] = src
                        return src
                m.add_value(out, tuple(v.shape[p] for p in (TO_NHWC if want is Layout.NHWC
                                                            else TO_NCHW)), v.dtype)
                self.place(Node(Op.TRANSPOSE, [src], [out], {"perm": perm},
                                f"layout transform of {name!r} to {want.value}"))
            if want is Layout.NHWC:
                self.nhwc.add(out)
            self.copies[key] = out
        return self.copies[key]

    def broadcast_const(self, name: str) -> str:
        """A constant operand of a 4-d elementwise node, broadcast like NHWC data."""
        m = self.m
        c = m.constants[name]
        if c.size == 1 or c.ndim > 4:
            return name
        key = (name, "bcast")
        if key not in self.copies:
            full = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(TO_NHWC)
            out = m.fresh_name(f"{name}_nhwc")
            m.add_constant(out, full)
            self.copies[key] = out
        return self.copies[key]

    def emit(self, n: Node, nhwc_out: bool) -> None:
        """Append ``n``; an NHWC output's value takes the NHWC shape."""
        if nhwc_out:
            v = self.m.values[n.output]
            self.m.values[n.output] = Value(v.name, tuple(v.shape[p] for p in TO_NHWC), v.dtype)
            self.nhwc.add(n.output)
        self.place(n)

    def place(self, n: Node) -> None:
        self.nodes.append(n)
        self.made[n.output] = n

    def rank4(self, name: str) -> bool:
        return len(self.m.values[name].shape) == 4

    # ------------------------------------------------------------------ nodes
    def node(self, n: Node) -> None:
        m, op = self.m, n.op
        runtime = [i for i in n.inputs if i not in m.constants]
        if _nhwc_conv(m, n):
            wname = n.inputs[1]
            key = (wname, "hwio")
            if key not in self.copies:
                self.copies[key] = m.fresh_name(f"{wname}_hwio")
                m.add_constant(self.copies[key], m.constants[wname].transpose(2, 3, 1, 0))
            n.inputs = [self.as_layout(n.inputs[0], Layout.NHWC), self.copies[key]] + n.inputs[2:]
            n.attrs = {**n.attrs, "layout": Layout.NHWC}
            return self.emit(n, True)
        if not any(i in self.nhwc for i in runtime):
            return self.emit(n, False)
        if op.pattern is Pattern.ELEMWISE and self.rank4(n.output) and \
                all(self.rank4(i) for i in runtime):
            n.inputs = [self.broadcast_const(i) if i in m.constants
                        else self.as_layout(i, Layout.NHWC) for i in n.inputs]
            return self.emit(n, True)
        x = n.inputs[0]
        if op is Op.POOL:
            n.attrs = {**n.attrs, "layout": Layout.NHWC}
            return self.emit(n, True)
        if op is Op.REDUCE and x in self.nhwc and self._reduce(n):
            return
        if op is Op.CONCAT and n.attrs["axis"] == 1 and all(self.rank4(i) for i in n.inputs):
            n.inputs = [self.as_layout(i, Layout.NHWC) for i in n.inputs]
            n.attrs = {**n.attrs, "axis": 3}
            return self.emit(n, True)
        if op is Op.PAD and x in self.nhwc:
            at = n.attrs
            n.attrs = {**at, "before": tuple(at["before"][p] for p in TO_NHWC),
                       "after": tuple(at["after"][p] for p in TO_NHWC)}
            return self.emit(n, True)
        if op is Op.TRANSPOSE and x in self.nhwc:
            n.attrs = {**n.attrs, "perm": tuple(TO_NCHW[p] for p in n.attrs["perm"])}
            return self.emit(n, False)
        if op is Op.RESHAPE and x in self.nhwc:
            _, h, w, c = m.values[x].shape
            if h * w == 1 or c == 1:  # both layouts store it in the same order
                return self.emit(n, False)
        n.inputs = [self.as_layout(i, Layout.NCHW) if i in self.nhwc else i for i in n.inputs]
        return self.emit(n, False)

    def _reduce(self, n: Node) -> bool:
        axes, keep = tuple(n.attrs["axes"]), n.attrs["keepdims"]
        phys = tuple(sorted(_POS[a] for a in axes))
        if keep:
            n.attrs = {**n.attrs, "axes": phys}
            self.emit(n, True)
            return True
        kept = [d for d in range(4) if d not in axes]
        if sorted(kept, key=lambda d: _POS[d]) != kept:
            return False  # the result's axes would come out in another order
        n.attrs = {**n.attrs, "axes": phys}
        self.emit(n, False)
        return True

    def finish(self) -> None:
        m = self.m
        m.nodes = self.nodes
        for k, name in enumerate(m.outputs):
            if name not in self.nhwc:
                continue
            # the producer writes an NHWC value under a new name; the output is its transpose
            inner = m.fresh_name(f"{name}_nhwc")
            v = m.values.pop(name)
            m.values[inner] = Value(inner, v.shape, v.dtype)
            for nd in m.nodes:
                nd.inputs = [inner if i == name else i for i in nd.inputs]
                nd.outputs = [inner if o == name else o for o in nd.outputs]
            self.nhwc.discard(name)
            self.nhwc.add(inner)
            m.add_value(name, tuple(v.shape[p] for p in TO_NCHW), v.dtype)
            copy = self.copies.get((name, Layout.NCHW))
            if copy is not None:  # an NCHW copy made for a reader: it is the output too
                del m.values[copy]
                for nd in m.nodes:
                    nd.inputs = [name if i == copy else i for i in nd.inputs]
                    nd.outputs = [name if o == copy else o for o in nd.outputs]
                continue
            m.nodes.append(Node(Op.TRANSPOSE, [inner], [name], {"perm": TO_NCHW},
                                f"layout transform of output {name!r} to NCHW"))


def convert_layout(m: Model, layout=Layout.AUTO) -> Model:
    """Run ``m``'s convolutions in ``layout`` (a :class:`Layout`), in place; returns ``m``.

    Call it once, after the graph passes that assume NCHW (BatchNorm folding), before fusion;
    :func:`tecomp.from_onnx` does (its ``layout=``), so that ``model.tasks()``,
    ``tc.tune_model`` and ``tc.compile_model`` all see the same graph and the tuning records
    match. The model's inputs and outputs keep their shapes and layout.
    """
    from .passes import eliminate_dead
    resolved = resolve_layout(m, layout)
    if m.layout is not Layout.NCHW:
        raise ValueError(f"model {m.name!r} is already converted to {m.layout.value}")
    m.layout = resolved
    if resolved is Layout.NCHW:
        return m
    p = _Pass(m)
    for n in m.nodes:
        p.node(n)
    p.finish()
    eliminate_dead(m)
    return m
