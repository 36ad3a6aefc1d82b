"""Fusion: partition a model's nodes into groups, each compiled as ONE ComputeDAG (one kernel).

A group has at most one *anchor* (an operator with a reduction: convolution, matrix product,
reduction, softmax, layer norm, pooling) and is grown in topological order (after Relay's
FuseOps, simplified to chains):

- an elementwise node joins the group of the value it reads when that value has no other reader
  and is not a model output; after an anchor only when it keeps the anchor's shape (an epilogue:
  bias, relu / clip / gelu, residual add, scaling);
- an injective node (reshape, transpose, gather, ...) joins only an anchor-free group;
- an anchor joins an anchor-free group of pure index maps (a reshape or transpose feeding a
  matrix product, read through its index expression) or, for the light anchors (reductions,
  softmax, layer norm), of elementwise ops too (a residual add before a layer norm);
  a convolution always starts its own group (its input is read KH*KW*O times: recomputing an
  elementwise producer per read would cost more than the round trip through memory).

:func:`group_dag` lowers a group to a ComputeDAG whose inputs are the run-time values first,
then the constant tensors (weights), in order of first use, so that structurally identical groups
(the same layer shape) get the same workload key whatever their weights.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import ir
from ..ops.winograd import winograd_applies
from .flat import flat_eligible, flat_shapes
from .graph import Layout, Model, Node, Op, Pattern
from .lower_nn import ConvAlgorithm
from .lowering import Imm, inline_as_literal, lower_node

__all__ = ["Group", "partition", "group_dag", "group_variants", "GroupDAG", "ConvAlgorithm",
           "winograd_eligible", "blocked_eligible"]


@dataclass
class Group:
    """Nodes (in order) computing ``output``; ``anchor`` is its reduction node, if any."""
    nodes: list = field(default_factory=list)
    anchor: Node | None = None

    @property
    def output(self) -> str:
        return self.nodes[-1].output

    @property
    def name(self) -> str:
        """A readable name for messages: the anchor's (or first node's) source and the fused
        operators."""
        head = self.anchor or self.nodes[0]
        ops = "+".join(n.op.label for n in self.nodes)
        return f"{ops} ({head.describe()})"

    def external_inputs(self) -> list:
        made = {n.output for n in self.nodes}
        out = []
        for n in self.nodes:
            for i in n.inputs:
                if i not in made and i not in out:
                    out.append(i)
        return out


#: the operators whose reads are data-dependent (their index input is a value)
GATHERS = (Op.GATHER, Op.GATHER_ELEMENTS)


def _accepts(g: Group, n: Node, m: Model, via: str) -> bool:
    pat = n.op.pattern
    if pat is Pattern.ELEMWISE:
        if g.anchor is None:
            return True
        return m.values[n.output].shape == m.values[via].shape
    if pat is Pattern.INJECTIVE:
        return g.anchor is None and not (n.op in GATHERS and n.inputs[0] != via)
    if g.anchor is not None or n.op is Op.CONV2D:
        return False
    pure_index_maps = all(x.op.pattern is Pattern.INJECTIVE and x.op not in (*GATHERS, Op.CONCAT)
                          for x in g.nodes)
    if pat is Pattern.COMPLEX:
        return pure_index_maps
    return pure_index_maps or all(x.op.pattern is Pattern.ELEMWISE for x in g.nodes)


_MAX_DIAMOND = 16


def _diamonds(m: Model, cons: dict) -> dict:
    """Value -> the elementwise nodes (in order) of a closed diamond after it: ``x`` read by
    several elementwise nodes whose results meet again in one value, as GELU's
    ``x * 0.5 * (1 + erf(x / sqrt 2))``. Fusion takes such a region whole or not at all, since
    its inner values are read only inside it."""
    outputs, consts = set(m.outputs), m.constants
    out: dict = {}
    for k, p in enumerate(m.nodes):
        i = p.output
        readers = cons.get(i, [])
        if len({id(c) for c in readers}) < 2 or i in outputs or \
                any(c.op.pattern is not Pattern.ELEMWISE for c in readers):
            continue
        region, avail, members = [], {i}, set()
        for n in m.nodes[k + 1:]:
            reads = [x for x in n.inputs if x not in consts]
            if not any(x in avail for x in reads):
                continue
            if n.op.pattern is not Pattern.ELEMWISE or not all(x in avail for x in reads) \
                    or len(region) == _MAX_DIAMOND:
                break
            region.append(n)
            members.add(id(n))
            avail.add(n.output)
            open_ = [v for v in avail if v in outputs
                     or any(id(c) not in members for c in cons.get(v, []))]
            if open_ == [n.output]:
                out[i] = region
                break
    return out


def partition(m: Model) -> list:
    """The model's nodes as fusion groups, in an order that runs them (each group after the
    groups its inputs come from)."""
    cons = m.consumers()
    outputs = set(m.outputs)
    group_of: dict = {}  # value name -> its group
    groups: list = []
    diamonds = _diamonds(m, cons)
    taken: set = set()  # nodes already placed with their diamond
    for n in m.nodes:
        if id(n) in taken:
            continue
        target = None
        for i in dict.fromkeys(n.inputs):  # each distinct input once, in order
            g = group_of.get(i)
            if g is None or g.output != i or i in outputs:
                continue
            if len({id(c) for c in cons.get(i, [])}) != 1:
                continue
            if _accepts(g, n, m, i):
                target = g
                break
        if target is None:
            target = Group()
            groups.append(target)
        else:  # the group now runs where its new last node is
            groups.remove(target)
            groups.append(target)
        target.nodes.append(n)
        if n.op.pattern >= Pattern.REDUCE:
            target.anchor = n
        group_of[n.output] = target
        region = diamonds.get(n.output)
        if region and all(_accepts(target, r, m, n.output) for r in region):
            for r in region:
                target.nodes.append(r)
                taken.add(id(r))
                group_of[r.output] = target
    return groups


@dataclass
class GroupDAG:
    """A group lowered: ``dag`` takes ``runtime`` values then the ``constants`` (placeholder name
    -> array) and computes the group's output."""
    dag: object
    runtime: list
    constants: dict
    group: Group
    #: how the group's convolution is computed (DIRECT also for groups without one)
    algorithm: ConvAlgorithm = ConvAlgorithm.DIRECT

    @property
    def name(self) -> str:
        """The group's name, and its algorithm where that is not the plain one."""
        if self.algorithm is ConvAlgorithm.DIRECT:
            return self.group.name
        return f"{self.group.name} [{self.algorithm.value}]"


# Winograd pays off where the matrix products are large enough to run near the FMA peak; below
# this many input or output channels the transforms (memory-bound) cost more than it saves
WINOGRAD_MIN_CHANNELS = 16


def winograd_eligible(m: Model, n: Node) -> bool:
    """Whether convolution ``n`` of ``m`` may run as Winograd F(m x m, 3 x 3): a 3x3 kernel,
    stride 1, no dilation, one group, float32, constant weights (their transform then runs once,
    at compile time) and at least WINOGRAD_MIN_CHANNELS channels in and out."""
    if n.op is not Op.CONV2D or n.inputs[1] not in m.constants:
        return False
    w = m.values[n.inputs[1]]
    nhwc = n.attrs.get("layout", Layout.NCHW) is Layout.NHWC
    kh, kw, ci, co = w.shape if nhwc else (w.shape[2], w.shape[3], w.shape[1], w.shape[0])
    return (winograd_applies((kh, kw), n.attrs["strides"], n.attrs["dilations"], n.attrs["groups"])
            and str(w.dtype) == "float32" and min(ci, co) >= WINOGRAD_MIN_CHANNELS)


def blocked_eligible(m: Model, n: Node) -> bool:
    """Whether convolution ``n`` of ``m`` may run in a blocked channel layout (NCHW[x]c,
    :mod:`tecomp.ops.blocked`): an NCHW convolution (a model kept in NCHW) with constant weights,
    whose packing into blocks then runs once, at compile time."""
    return (n.op is Op.CONV2D and n.inputs[1] in m.constants
            and n.attrs.get("layout", Layout.NCHW) is Layout.NCHW)


def phased_eligible(n: Node) -> bool:
    """Whether convolution ``n`` may run on its input split into stride phases
    (:mod:`tecomp.ops.phased`): a strided NCHW convolution (an NHWC one vectorizes along the
    channels, which the stride does not touch)."""
    return (n.op is Op.CONV2D and n.attrs.get("layout", Layout.NCHW) is Layout.NCHW
            and max(n.attrs["strides"]) > 1)


def group_variants(m: Model, g: Group) -> list:
    """The ways to compute group ``g``, each a :class:`GroupDAG`: the plain one first, then its
    convolution by Winograd where :func:`winograd_eligible`, then in blocks of channels where
    :func:`blocked_eligible`, then on stride phases where :func:`phased_eligible`, then on the
    flattened image where :func:`~.flat.flat_eligible` (its kernel runs on views of the model's
    buffers). The tuner tunes each as a task of its own; ``compile_model`` runs the one whose
    best record is fastest."""
    out = [group_dag(m, g)]
    if g.anchor is not None and winograd_eligible(m, g.anchor):
        out.append(group_dag(m, g, ConvAlgorithm.WINOGRAD))
    if g.anchor is not None and blocked_eligible(m, g.anchor):
        out.append(group_dag(m, g, ConvAlgorithm.BLOCKED))
    if g.anchor is not None and phased_eligible(g.anchor):
        out.append(group_dag(m, g, ConvAlgorithm.PHASED))
    if flat_eligible(m, g):
        out.append(group_dag(m, g, ConvAlgorithm.FLAT))
    return out


def group_dag(m: Model, g: Group, algorithm: ConvAlgorithm = ConvAlgorithm.DIRECT) -> GroupDAG:
    """Lower group ``g`` of model ``m`` to one ComputeDAG (its convolution computed by
    ``algorithm``)."""
    made = {n.output for n in g.nodes}
    runtime, consts = [], []
    for n in g.nodes:
        for k, i in enumerate(n.inputs):
            if i in made or i in runtime or i in consts:
                continue
            c = m.constants.get(i)
            if c is None:
                runtime.append(i)
            elif not inline_as_literal(n, k, c):
                consts.append(i)
    phs = {}
    shapes = flat_shapes(m, g, runtime) if algorithm is ConvAlgorithm.FLAT else {}
    for k, name in enumerate(runtime):
        v = m.values[name]
        phs[name] = ir.placeholder(shapes.get(name, v.shape), v.dtype, name=f"in{k}")
    for k, name in enumerate(consts):
        v = m.values[name]
        phs[name] = ir.placeholder(v.shape, v.dtype, name=f"w{k}")
    tensors = dict(phs)
    out = None
    for s, n in enumerate(g.nodes):
        if n is g.anchor and algorithm is not ConvAlgorithm.DIRECT:
            n = replace(n, attrs={**n.attrs, "algorithm": algorithm})
        operands = []
        for k, i in enumerate(n.inputs):
            c = m.constants.get(i)
            if i not in tensors and c is not None and inline_as_literal(n, k, c):
                operands.append(Imm(c))
            else:
                operands.append(tensors[i])
        out = lower_node(n, operands, f"{n.op.label}{s}")
        tensors[n.output] = out
    dag = ir.ComputeDAG([phs[r] for r in runtime] + [phs[c] for c in consts] + [out])
    return GroupDAG(dag, runtime, {phs[c].name: m.constants[c] for c in consts}, g, algorithm)
