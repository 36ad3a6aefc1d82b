"""``tc.Model``: a network as a graph of tecomp operators with static shapes.

A model is built by a frontend (:func:`tecomp.from_onnx`) and holds:

- ``values``: every tensor of the graph (``Value``: name, static shape, numpy dtype);
- ``constants``: value name -> numpy array (weights, folded shapes); a constant is never computed;
- ``nodes``: the operators in topological order (``Node``: an :class:`Op`, input and output value
  names, plain attributes, and where it came from, for error messages);
- ``inputs`` / ``outputs``: the names of the network's arguments and results.

Nodes name tecomp operators, not ONNX ones: a frontend lowers each source operator to one or more
of them (a BatchNormalization becomes a per-channel multiply and add, which a pass folds into the
preceding convolution). :mod:`.lowering` turns each node into tecomp computes.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Op", "Pattern", "Layout", "Value", "Node", "Model", "ModelError",
           "UnsupportedOperatorError"]


class ModelError(ValueError):
    """A model the frontend cannot take: malformed, dynamic where it must be static, or
    inconsistent. The message names the node (its name, operator and position) where it can."""


class UnsupportedOperatorError(ModelError, NotImplementedError):
    """A source operator (or attribute value) tecomp has no lowering for."""


class Pattern(enum.IntEnum):
    """How an operator fuses (after Relay's op patterns). Ordered: lower is cheaper to fuse."""
    ELEMWISE = 0    # out[i] = f(in[i]) (broadcast inputs included): fuses anywhere
    INJECTIVE = 1   # out[i] = in[g(i)] (reshape, transpose, concat, gather): an index map
    REDUCE = 2      # reductions, softmax, pools, layer norm: an anchor of its own
    COMPLEX = 3     # conv2d, matmul: an anchor whose elementwise epilogue fuses into it


class Layout(enum.Enum):
    """The data layout a model's convolutions run in (:func:`tecomp.from_onnx` ``layout=``).

    ``NCHW`` keeps the source model's layout. ``NHWC`` runs convolutions, and the operators
    between them, channels-last, with weights transposed once at import and layout transposes
    only where the layout must change (see :mod:`tecomp.frontend.layout`). ``AUTO`` is NHWC for
    a model with convolutions (on CPU tecomp's NHWC convolutions are the faster ones: the
    output channels are the contiguous, vectorized axis), else NCHW.
    """
    AUTO = "auto"
    NCHW = "NCHW"
    NHWC = "NHWC"


class Op(enum.Enum):
    """The operators of a :class:`Model` (their lowering is in :mod:`.lowering`)."""
    CONV2D = ("conv2d", Pattern.COMPLEX)
    MATMUL = ("matmul", Pattern.COMPLEX)
    ADD = ("add", Pattern.ELEMWISE)
    SUB = ("sub", Pattern.ELEMWISE)
    MUL = ("mul", Pattern.ELEMWISE)
    DIV = ("div", Pattern.ELEMWISE)
    POW = ("pow", Pattern.ELEMWISE)
    MOD = ("mod", Pattern.ELEMWISE)    # the sign of the divisor (numpy's mod, ONNX fmod=0)
    FMOD = ("fmod", Pattern.ELEMWISE)  # the sign of the dividend (C's fmod, ONNX fmod=1)
    MAXIMUM = ("maximum", Pattern.ELEMWISE)
    MINIMUM = ("minimum", Pattern.ELEMWISE)
    RELU = ("relu", Pattern.ELEMWISE)
    CLIP = ("clip", Pattern.ELEMWISE)
    SIGMOID = ("sigmoid", Pattern.ELEMWISE)
    TANH = ("tanh", Pattern.ELEMWISE)
    ERF = ("erf", Pattern.ELEMWISE)
    GELU = ("gelu", Pattern.ELEMWISE)
    EXP = ("exp", Pattern.ELEMWISE)
    LOG = ("log", Pattern.ELEMWISE)
    SQRT = ("sqrt", Pattern.ELEMWISE)
    NEG = ("neg", Pattern.ELEMWISE)
    ABS = ("abs", Pattern.ELEMWISE)
    FLOOR = ("floor", Pattern.ELEMWISE)
    CEIL = ("ceil", Pattern.ELEMWISE)
    ROUND = ("round", Pattern.ELEMWISE)
    SIN = ("sin", Pattern.ELEMWISE)
    COS = ("cos", Pattern.ELEMWISE)
    RECIPROCAL = ("reciprocal", Pattern.ELEMWISE)
    CAST = ("cast", Pattern.ELEMWISE)
    EQUAL = ("equal", Pattern.ELEMWISE)
    LESS = ("less", Pattern.ELEMWISE)
    LESS_EQUAL = ("less_equal", Pattern.ELEMWISE)
    GREATER = ("greater", Pattern.ELEMWISE)
    GREATER_EQUAL = ("greater_equal", Pattern.ELEMWISE)
    AND = ("and", Pattern.ELEMWISE)
    OR = ("or", Pattern.ELEMWISE)
    XOR = ("xor", Pattern.ELEMWISE)
    NOT = ("not", Pattern.ELEMWISE)
    ISNAN = ("isnan", Pattern.ELEMWISE)
    ACTIVATION = ("activation", Pattern.ELEMWISE)  # attrs kind (activations.Activation), alpha, beta
    WHERE = ("where", Pattern.ELEMWISE)
    IDENTITY = ("identity", Pattern.ELEMWISE)
    RESHAPE = ("reshape", Pattern.INJECTIVE)
    TRANSPOSE = ("transpose", Pattern.INJECTIVE)
    CONCAT = ("concat", Pattern.INJECTIVE)
    GATHER = ("gather", Pattern.INJECTIVE)
    GATHER_ELEMENTS = ("gather_elements", Pattern.INJECTIVE)
    SLICE = ("slice", Pattern.INJECTIVE)
    EXPAND = ("expand", Pattern.INJECTIVE)
    PAD = ("pad", Pattern.INJECTIVE)
    REDUCE = ("reduce", Pattern.REDUCE)
    SOFTMAX = ("softmax", Pattern.REDUCE)
    LAYER_NORM = ("layer_norm", Pattern.REDUCE)
    POOL = ("pool", Pattern.REDUCE)
    CUMSUM = ("cumsum", Pattern.REDUCE)  # attrs axis, exclusive, reverse
    EINSUM = ("einsum", Pattern.REDUCE)  # attrs spec (einsum.EinsumSpec), equation

    def __init__(self, label: str, pattern: Pattern):
        self.label, self.pattern = label, pattern


@dataclass(frozen=True)
class Value:
    """A tensor of the graph: static ``shape`` and numpy ``dtype``."""
    name: str
    shape: tuple
    dtype: np.dtype

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Node:
    """One operator application.

    Attributes
    ----------
    op : Op
    inputs, outputs : list of str
        Value names (a node has one output).
    attrs : dict
        Plain attributes (ints, floats, tuples, enums), as :mod:`.lowering` expects them.
    source : str
        Where it came from, for messages: ``"node 'conv_3' (Conv, #12)"``.
    """
    op: Op
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    source: str = ""

    @property
    def output(self) -> str:
        return self.outputs[0]

    def describe(self) -> str:
        return self.source or f"{self.op.label} -> {self.output}"


class Model:
    """A network: tecomp operator nodes over static-shape values, with constant weights.

    Build one with :func:`tecomp.from_onnx`; compile it with :func:`tecomp.compile_model`, list its
    tuning tasks with :meth:`tasks`, tune it with :func:`tecomp.tune_model`.
    """

    def __init__(self, name: str = "model"):
        self.name = name
        self.values: dict = {}
        self.constants: dict = {}
        self.nodes: list = []
        self.inputs: list = []
        self.outputs: list = []
        #: the layout the convolutions run in (set by the layout pass; the source's until then)
        self.layout: Layout = Layout.NCHW

    # ------------------------------------------------------------------ building
    def add_value(self, name: str, shape, dtype) -> Value:
        v = Value(name, tuple(int(s) for s in shape), np.dtype(dtype))
        self.values[name] = v
        return v

    def add_constant(self, name: str, array: np.ndarray) -> Value:
        a = np.array(array, order="C", copy=True)
        a.flags.writeable = False
        self.constants[name] = a
        return self.add_value(name, a.shape, a.dtype)

    def fresh_name(self, base: str) -> str:
        """A value name not yet used, derived from ``base``."""
        if base not in self.values:
            return base
        n = 1
        while f"{base}_{n}" in self.values:
            n += 1
        return f"{base}_{n}"

    # ------------------------------------------------------------------ queries
    def consumers(self) -> dict:
        """Value name -> list of nodes reading it."""
        out: dict = {}
        for n in self.nodes:
            for i in n.inputs:
                out.setdefault(i, []).append(n)
        return out

    def producer(self) -> dict:
        """Value name -> the node computing it."""
        return {o: n for n in self.nodes for o in n.outputs}

    def input_values(self) -> list:
        return [self.values[n] for n in self.inputs]

    def output_values(self) -> list:
        return [self.values[n] for n in self.outputs]

    def tasks(self, target="llvm", include_simple: bool = False) -> list:
        """The model's distinct fused subgraphs as tuning tasks.

        Parameters
        ----------
        target : str or Target
        include_simple : bool
            Also list subgraphs without a reduction (elementwise/injective only), which have
            little to tune (as TVM's ``extract_tasks`` leaves them out by default).

        Returns
        -------
        list of (SearchTask, int)
            One task per distinct workload key, with how many times the model runs it.
        """
        from .tasks import model_tasks
        return model_tasks(self, target, include_simple)

    def summary(self) -> str:
        """One line per node: operator, inputs, output shape."""
        lines = [f"model {self.name!r} ({self.layout.value}): inputs "
                 + ", ".join(f"{v.name}{list(v.shape)}:{v.dtype}" for v in self.input_values())]
        for n in self.nodes:
            v = self.values[n.output]
            lines.append(f"  {n.op.label:10s} {', '.join(n.inputs)} -> {v.name}{list(v.shape)}")
        lines.append("outputs " + ", ".join(self.outputs))
        return "\n".join(lines)

    def __repr__(self):
        return (f"<tc.Model {self.name!r}: {len(self.nodes)} nodes, {len(self.constants)} "
                f"constants, inputs {self.inputs}, outputs {self.outputs}>")
