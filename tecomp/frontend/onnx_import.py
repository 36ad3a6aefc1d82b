"""``tc.from_onnx``: an ONNX model (file or ``onnx.ModelProto``) to a :class:`~.graph.Model`.

The ``onnx`` package is imported here only (the ``tecomp[onnx]`` extra); a compiled model never
needs it. Nodes are converted in the file's (topological) order by the converters of
:mod:`.convert_nn` and :mod:`.convert_tensor`; a node whose inputs are all constants is evaluated
at once (shape computations, weight transposes), so what reaches the model are the operators that
depend on the network's inputs, with static shapes.
"""
from __future__ import annotations

import os

import numpy as np

from .graph import Layout, Model, ModelError, Node, Op, UnsupportedOperatorError
from .lowering import Imm, fold_node, inline_as_literal, lower_node

__all__ = ["from_onnx", "ImportContext"]

_INPUT_DTYPES = ("float32", "float64", "int64", "int32", "bool")
#: the largest tensor a model may describe (2**31 elements: 8 GiB of float32)
MAX_ELEMENTS = 1 << 31


class ImportContext:
    """What a converter sees: the model being built, the ONNX node and helpers to emit nodes."""

    def __init__(self, model: Model, opset: int):
        self.model, self.opset = model, opset
        self.node = None       # the ONNX node being converted
        self.where = ""        # its description for messages

    # ------------------------------------------------------------------ lookups
    def value(self, name: str):
        v = self.model.values.get(name)
        if v is None:
            raise ModelError(f"{self.where}: input {name!r} is not produced by any earlier node, "
                             f"initializer or graph input (the graph is not topologically sorted "
                             f"or is malformed)")
        return v

    def const(self, name: str):
        """The constant array of value ``name``, or None when it is computed at run time."""
        self.value(name)
        return self.model.constants.get(name)

    def need_const(self, name: str, what: str) -> np.ndarray:
        a = self.const(name)
        if a is None:
            raise UnsupportedOperatorError(f"{self.where}: {what} (input {name!r}) must be a "
                                           f"constant (an initializer or computed from shapes); a "
                                           f"value computed at run time is not supported")
        return a

    def check_size(self, shape) -> None:
        """A shape computed from the file's data must be a real tensor's (no negative sizes, at
        most ``MAX_ELEMENTS`` elements), before anything of that size is allocated."""
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims) or int(np.prod(dims, dtype=object)) > MAX_ELEMENTS:
            self.fail(f"shape {dims} is negative or has more than {MAX_ELEMENTS} elements")

    def fail(self, msg: str, unsupported: bool = False):
        cls = UnsupportedOperatorError if unsupported else ModelError
        raise cls(f"{self.where}: {msg}")

    # ------------------------------------------------------------------ emitting
    def add_const(self, array, base: str) -> str:
        name = self.model.fresh_name(base)
        self.model.add_constant(name, np.asarray(array))
        return name

    def alias(self, out: str, src: str) -> str:
        """Make ``out`` the same value as ``src`` (Identity, Dropout, no-op reshapes)."""
        if src in self.model.constants:
            self.model.add_constant(out, self.model.constants[src])
            return out
        return self.emit(Op.IDENTITY, [src], {}, out)

    def emit(self, op: Op, inputs: list, attrs: dict, out: str | None = None) -> str:
        """Add a node (or its folded constant) computing ``out``; returns the value name."""
        out = out or self.model.fresh_name(f"{self.node.output[0]}_{op.label}")
        node = Node(op, list(inputs), [out], dict(attrs), self.where)
        consts = [self.const(i) for i in inputs]
        try:
            if all(c is not None for c in consts):
                try:  # the result's size first: a constant is allocated in full
                    shape = lower_node(node, self.operands(node), "probe").shape
                except Exception:  # noqa: BLE001 - numpy's evaluation below decides
                    shape = ()
                self.check_size(shape)
                self.model.add_constant(out, fold_node(node, consts))
                return out
            t = lower_node(node, self.operands(node), "probe")
        except (ValueError, TypeError, IndexError) as e:
            raise ModelError(f"{self.where}: {e}") from e
        self.check_size(t.shape)
        self.model.add_value(out, t.shape, t.dtype.np)
        self.model.nodes.append(node)
        return out

    def operands(self, node: Node) -> list:
        """Placeholders (or literals) standing for ``node``'s inputs, for shape inference."""
        from .. import ir
        out = []
        for k, name in enumerate(node.inputs):
            v, c = self.model.values[name], self.model.constants.get(name)
            if c is not None and inline_as_literal(node, k, c):
                out.append(Imm(c))
            else:
                out.append(ir.placeholder(v.shape, v.dtype, name=f"in{k}"))
        return out


def _load(model):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model, "<ModelProto>"
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"from_onnx expects a path or an onnx.ModelProto, got "
                        f"{type(model).__name__}")
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no ONNX file at {path!r}")
    try:
        proto = onnx.load(path)
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds for garbage
        raise ModelError(f"{path!r} is not a readable ONNX model ({type(e).__name__}: "
                         f"{str(e)[:200]})") from e
    return proto, path


def _check(proto, where: str) -> None:
    import onnx
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{where}: the ONNX model has an empty graph")
    try:
        onnx.checker.check_model(proto)
    except Exception as e:  # noqa: BLE001 - ValidationError, or protobuf errors on odd fields
        raise ModelError(f"{where}: the ONNX model is malformed: {str(e).strip()[:400]}") from e


def _static_shape(vi, shapes: dict, where: str) -> tuple:
    if vi.name in shapes:
        dims = shapes[vi.name]
        if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__") or any(
                isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
            raise ModelError(f"{where}: shapes[{vi.name!r}] must be a sequence of integers, got "
                             f"{dims!r}")
        return tuple(int(s) for s in dims)
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise ModelError(f"{where}: graph input {vi.name!r} has no shape; pass "
                         f"shapes={{{vi.name!r}: (...)}}")
    dims = []
    for d, dim in enumerate(tt.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(int(dim.dim_value))
        else:
            sym = dim.dim_param or "?"
            raise ModelError(f"{where}: graph input {vi.name!r} has a dynamic dimension {d} "
                             f"({sym!r}); tecomp compiles static shapes: pass "
                             f"shapes={{{vi.name!r}: (...)}} to from_onnx")
    return tuple(dims)


def from_onnx(model, shapes: dict | None = None, name: str | None = None,
              layout: Layout = Layout.AUTO) -> Model:
    """Parse an ONNX model into a :class:`tc.Model <tecomp.frontend.graph.Model>`.

    Parameters
    ----------
    model : str, path or onnx.ModelProto
    shapes : dict, optional
        Input name -> static shape, for inputs with dynamic (symbolic) dimensions.
    name : str, optional
        The model's name (default: the file name or the graph's name).
    layout : Layout, optional
        The layout the convolutions run in (:class:`tc.Layout <tecomp.frontend.graph.Layout>`):
        AUTO (default: NHWC for a model with convolutions, the faster ones on CPU), NCHW (as the
        file) or NHWC. The inputs and outputs keep the file's layout either way. Tuning and
        compiling see the same graph, so tune and compile a model imported with one choice.

    Returns
    -------
    Model

    Raises
    ------
    UnsupportedOperatorError
        An operator (or attribute value) tecomp does not lower, naming the operator, the node
        and its position in the graph.
    ModelError
        A malformed file or graph, a dynamic input shape without ``shapes=``, inconsistent shapes.
    FileNotFoundError
        No file at the path.
    """
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        raise ImportError("tc.from_onnx needs the onnx package: pip install 'tecomp[onnx]'") from e
    from onnx import numpy_helper

    from .convert import CONVERTERS
    proto, where = _load(model)
    _check(proto, where)
    g = proto.graph
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=1)
    m = Model(name or (os.path.splitext(os.path.basename(where))[0] if where[0] != "<"
                       else g.name or "model"))
    if shapes is not None and not isinstance(shapes, dict):
        raise TypeError(f"shapes= must be a dict {{input name: shape}}, got "
                        f"{type(shapes).__name__}")
    shapes = dict(shapes or {})
    for init in g.initializer:
        try:
            arr = numpy_helper.to_array(init)
        except Exception as e:  # noqa: BLE001 - external data missing, bad raw bytes
            raise ModelError(f"{where}: initializer {init.name!r} cannot be read: {e}") from e
        m.add_constant(init.name, arr)
    names = [vi.name for vi in g.input if vi.name not in m.constants]
    unknown = set(shapes) - set(names)
    if unknown:
        raise ModelError(f"{where}: shapes= names {sorted(unknown)}, which are not graph inputs "
                         f"(inputs: {names})")
    for vi in g.input:
        if vi.name in m.constants:
            continue  # an initializer listed as an input (old exporters): a constant
        elem = vi.type.tensor_type.elem_type
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"{where}: graph input {vi.name!r} has an unknown element type "
                             f"{elem}") from e
        if dtype.name not in _INPUT_DTYPES:
            raise UnsupportedOperatorError(f"{where}: graph input {vi.name!r} has dtype "
                                           f"{dtype.name}; supported: {', '.join(_INPUT_DTYPES)}")
        shape = _static_shape(vi, shapes, where)
        if any(d < 1 for d in shape) or int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
            raise ModelError(f"{where}: graph input {vi.name!r} has shape {list(shape)}: sizes "
                             f"must be positive, at most {MAX_ELEMENTS} elements in all")
        m.add_value(vi.name, shape, dtype)
        m.inputs.append(vi.name)
    ctx = ImportContext(m, opset)
    n_nodes = len(g.node)
    for idx, node in enumerate(g.node):
        ctx.node = node
        dom = f", domain {node.domain}" if node.domain not in ("", "ai.onnx") else ""
        ctx.where = (f"node {node.name!r} ({node.op_type}, #{idx} of {n_nodes}{dom})" if node.name
                     else f"node #{idx} of {n_nodes} ({node.op_type}{dom} -> "
                          f"{node.output[0] if node.output else ''!r})")
        conv = CONVERTERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if conv is None:
            raise UnsupportedOperatorError(
                f"unsupported ONNX operator {node.op_type!r} at {ctx.where}, inputs "
                f"{list(node.input)}; supported: {', '.join(sorted(CONVERTERS))}")
        conv(ctx, node, _attrs(node))
        for o in node.output:
            if o and o not in m.values:
                ctx.fail(f"output {o!r} was not produced")
    for vi in g.output:
        if vi.name not in m.values:
            raise ModelError(f"{where}: graph output {vi.name!r} is not computed by any node")
        m.outputs.append(vi.name)
    from .layout import convert_layout, resolve_layout
    from .passes import simplify
    layout = resolve_layout(m, layout)  # a bad value fails before the passes run
    simplify(m)
    convert_layout(m, layout)
    return m


def _attrs(node) -> dict:
    from onnx import helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list):
            v = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out
