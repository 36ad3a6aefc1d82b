"""ComputeDAG: the stages of a computation, their dependencies and access analysis."""
from __future__ import annotations

import hashlib
import json

import numpy as np

from .evaluate import eval_np
from .expr import BinOp, Expr, IterVar, Reduce, Select, TensorRead, UnOp, Var
from .tensor import CSRCheck, PlaceholderOp, Tensor
from .traverse import structural_key, walk

__all__ = ["ComputeDAG", "Stage"]

KEY_VERSION = 1


class Stage:
    """One operation of the DAG with its access analysis.

    Attributes
    ----------
    reads : dict
        Tensor -> list of index tuples with which this stage reads it.
    is_reduce : bool
    has_branch : bool
        The body contains ``if_then_else``.
    has_expensive_op : bool
        The body calls exp/log/sqrt/tanh/sigmoid.
    inlineable : bool
        A compute without reduction or ragged domain that is not a kernel output.
    strictly_inlineable : bool
        Inlineable, without branches or expensive ops: inlining it never costs recomputation of
        anything expensive (the always-inline sketch rule uses this).
    """

    def __init__(self, tensor: Tensor, index: int, is_output: bool):
        self.tensor, self.op, self.index = tensor, tensor.op, index
        self.name = tensor.name
        self.is_output = is_output
        self.producers: list = []
        self.consumers: list = []
        self.reads: dict = {}
        op = self.op
        self.is_placeholder = isinstance(op, PlaceholderOp)
        if self.is_placeholder:
            self.is_reduce = self.has_branch = self.has_expensive_op = False
            self.inlineable = self.strictly_inlineable = False
            return
        for e in [op.body] + [b for a in op.axes + op.reduce_axes for b in (a.begin, a.end)]:
            for x in walk(e):
                if isinstance(x, TensorRead):
                    self.reads.setdefault(x.tensor, []).append(x.indices)
        nodes = list(walk(op.body))
        self.is_reduce = isinstance(op.body, Reduce)
        self.has_branch = any(isinstance(x, Select) for x in nodes)
        self.has_expensive_op = any(isinstance(x, UnOp) and x.op.is_math for x in nodes)
        self.inlineable = not self.is_reduce and not op.is_ragged and not is_output
        self.strictly_inlineable = (self.inlineable and not self.has_branch
                                    and not self.has_expensive_op)

    @property
    def axes(self) -> tuple:
        return () if self.is_placeholder else self.op.axes

    @property
    def reduce_axes(self) -> tuple:
        return () if self.is_placeholder else self.op.reduce_axes

    def elementwise_matched(self, tensor: Tensor) -> bool:
        """Every read of ``tensor`` here uses exactly this stage's axes, and the shapes agree."""
        if tensor not in self.reads or self.is_placeholder or self.op.is_ragged:
            return False
        axes = self.op.axes
        return tensor.shape == self.tensor.shape and all(
            len(ix) == len(axes) and all(a is b for a, b in zip(ix, axes))
            for ix in self.reads[tensor])

    def __repr__(self):
        return f"Stage({self.name!r}, {'placeholder' if self.is_placeholder else 'compute'})"


class ComputeDAG:
    """The computation behind a kernel: its stages in dependency order, their accesses, FLOPs and
    a workload key that identifies it independently of names.

    Parameters
    ----------
    tensors : list of Tensor
        The kernel's arguments: input placeholders first, then the computed outputs. Intermediate
        computes they depend on are found and become stages too.
    flop_count : float, optional
        Overrides the FLOP count (e.g. for sparse work whose real count the caller knows).

    Attributes
    ----------
    inputs, outputs : list of Tensor
        The arguments, split where the computes start.
    stages : list of Stage
        Every placeholder and compute, producers before consumers.
    workload_key : str
        A structural hash: equal for DAGs that compute the same thing with other names.

    Examples
    --------
    >>> A = tc.placeholder((64, 32), name="A")
    >>> k = tc.reduce_axis(32, name="k")
    >>> S = tc.compute((64,), lambda i: tc.sum(A[i, k], axis=k), name="S")
    >>> dag = tc.ComputeDAG([A, S])
    >>> dag.flop_count()
    2048.0
    """

    def __init__(self, tensors, flop_count: float | None = None):
        tensors = list(tensors)
        if not tensors:
            raise ValueError("ComputeDAG needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"ComputeDAG arguments must be tensors, got {type(t).__name__}")
        if len({id(t) for t in tensors}) != len(tensors):
            raise ValueError("ComputeDAG: a tensor appears twice among the arguments")
        n_in = 0
        while n_in < len(tensors) and isinstance(tensors[n_in].op, PlaceholderOp):
            n_in += 1
        self.inputs, self.outputs = tensors[:n_in], tensors[n_in:]
        for t in self.outputs:
            if isinstance(t.op, PlaceholderOp):
                raise ValueError(f"ComputeDAG: placeholder '{t.name}' comes after a compute; list "
                                 f"inputs first and outputs last")
        if not self.outputs:
            raise ValueError("ComputeDAG has no compute output")
        self.tensors = tensors
        self._flop_override = flop_count
        order = self._topo_order()
        out_ids = {id(t) for t in self.outputs}
        self.stages = [Stage(t, n, id(t) in out_ids) for n, t in enumerate(order)]
        self._by_tensor = {id(s.tensor): s for s in self.stages}
        arg_ids = {id(t) for t in self.inputs}
        for s in self.stages:
            if s.is_placeholder and id(s.tensor) not in arg_ids:
                raise ValueError(f"ComputeDAG: placeholder '{s.name}' is read but is not among the "
                                 f"arguments")
            for t in s.op.inputs:
                p = self._by_tensor[id(t)]
                s.producers.append(p)
                p.consumers.append(s)
        self.checks = [c for s in self.stages if not s.is_placeholder for c in s.op.checks]
        self._key = None

    def _topo_order(self) -> list:
        order, state = [], {}
        for t in self.inputs:  # inputs keep argument order at the front
            state[id(t)] = 2
            order.append(t)
        for root in self.outputs:
            stack = [(root, False)]
            while stack:
                t, done = stack.pop()
                if done:
                    if state.get(id(t)) != 2:
                        state[id(t)] = 2
                        order.append(t)
                    continue
                if state.get(id(t)) == 2:
                    continue
                if state.get(id(t)) == 1:
                    raise ValueError(f"ComputeDAG: cycle through '{t.name}'")
                state[id(t)] = 1
                stack.append((t, True))
                for p in reversed(t.op.inputs):
                    if state.get(id(p)) != 2:
                        stack.append((p, False))
        return order

    # ------------------------------------------------------------------ lookup
    def stage(self, key) -> Stage:
        """The stage of a tensor, a stage name, or an index."""
        if isinstance(key, Tensor):
            s = self._by_tensor.get(id(key))
            if s is None:
                raise KeyError(f"tensor '{key.name}' is not part of this DAG")
            return s
        if isinstance(key, int):
            return self.stages[key]
        matches = [s for s in self.stages if s.name == key]
        if len(matches) != 1:
            raise KeyError(f"{'no' if not matches else 'several'} stages named {key!r}")
        return matches[0]

    @property
    def compute_stages(self) -> list:
        return [s for s in self.stages if not s.is_placeholder]

    @property
    def flop_override(self) -> float | None:
        """The FLOP count given at construction (None: counted from the computation)."""
        return self._flop_override

    # ------------------------------------------------------------------ workload key
    @property
    def workload_key(self) -> str:
        """A structural hash of the computation: stable across processes and Python versions,
        independent of tensor and variable names and of printed text."""
        if self._key is None:
            pos = {id(s.tensor): s.index for s in self.stages}
            desc = [KEY_VERSION, [pos[id(t)] for t in self.tensors]]
            for s in self.stages:
                if s.is_placeholder:
                    desc.append(["ph", list(s.tensor.shape), s.tensor.dtype.name])
                    continue
                op = s.op
                var_pos = {id(a): ("a", n) for n, a in enumerate(op.axes)}
                var_pos.update({id(a): ("r", n) for n, a in enumerate(op.reduce_axes)})

                def names(x, var_pos=var_pos):
                    if isinstance(x, Var):
                        return var_pos[id(x)]
                    return ("t", pos[id(x)])
                axes = [[structural_key(a.begin, names), structural_key(a.end, names)]
                        for a in op.axes]
                desc.append(["c", list(s.tensor.shape), s.tensor.dtype.name, axes,
                             [structural_key(e, names) for e in op.out_index] if op.is_ragged else 0,
                             structural_key(op.body, names),
                             [_check_key(c, pos) for c in op.checks]])
            text = json.dumps(desc, separators=(",", ":"), default=_json_default)
            self._key = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self._key

    # ------------------------------------------------------------------ FLOPs
    def flop_count(self, inputs: dict | None = None) -> float:
        """Floating-point operations of one run.

        Exact for dense stages (each float op of the body counts 1, a reduction's combine counts 1,
        index arithmetic and casts count 0). Data-dependent trip counts (sparse) come from
        ``inputs`` (tensor or name -> array) when given, else from a uniform pattern with the
        declared nnz. The ``flop_count=`` given to the constructor overrides all of this.
        """
        if self._flop_override is not None:
            return float(self._flop_override)
        data = self.index_data(inputs)
        total = 0.0
        for s in self.compute_stages:
            op = s.op
            body = op.body
            per_point = _float_ops(body.source if isinstance(body, Reduce) else body)
            if isinstance(body, Reduce):
                per_point += 1
            total += per_point * _trip_count(op.axes + op.reduce_axes, data)
        return total

    def index_data(self, inputs: dict | None = None) -> dict:
        """The index arrays that data-dependent loop bounds read (CSR row pointers), by tensor.

        Parameters
        ----------
        inputs : dict, optional
            Real index data, tensor or input name -> array; it is used where given.

        Returns
        -------
        dict
            Tensor -> numpy array: the given data, and for every other tensor a loop bound reads, a
            uniform stand-in with the declared nnz (what FLOP counts and features assume).
        """
        data = {}
        by_name = {t.name: t for t in self.inputs}
        for k, v in (inputs or {}).items():
            t = by_name.get(k) if isinstance(k, str) else k
            if t is not None:
                data[t] = np.asarray(v)
        for s in self.compute_stages:
            for a in s.op.axes + s.op.reduce_axes:
                for b in (a.begin, a.end):
                    for x in walk(b):
                        if isinstance(x, TensorRead) and x.tensor not in data:
                            data[x.tensor] = _uniform_pointer(x.tensor, a, s)
        return data

    def __repr__(self):
        lines = []
        for s in self.stages:
            if s.is_placeholder:
                lines.append(f"{s.name} = placeholder({s.tensor.shape}, {s.tensor.dtype})")
            else:
                ax = ", ".join(a.name for a in s.op.axes)
                lines.append(f"{s.name}[{ax}] = {s.op.body!r}")
        return "\n".join(lines)


def _json_default(x):
    if isinstance(x, float):
        return repr(x)
    raise TypeError(type(x).__name__)


def _check_key(c, pos) -> list:
    if isinstance(c, CSRCheck):
        return ["csr", pos[id(c.indptr)], c.nnz,
                pos[id(c.indices)] if c.indices is not None else -1, c.ncols or -1]
    raise TypeError(f"unknown check {c!r}")


def _float_ops(e: Expr) -> int:
    """Float-valued arithmetic nodes of ``e``, outside index expressions."""
    n = 0
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, TensorRead):
            continue
        if isinstance(x, (BinOp, UnOp)) and x.dtype.is_float:
            n += 1
        stack.extend(x.children())
    return n


def _trip_count(axes: tuple, data: dict) -> float:
    """Number of points of a (possibly ragged) iteration domain."""
    ragged = [a for a in axes if a.const_extent is None or _depends(a, axes)]
    used = {id(x) for a in ragged for b in (a.begin, a.end) for x in walk(b)}
    rid = {id(a) for a in ragged}
    dep = [a for a in axes if id(a) in rid or id(a) in used]
    const = [a for a in axes if id(a) not in rid and id(a) not in used]
    total = 1.0
    for a in const:
        total *= max(a.const_extent, 0)
    if not dep:
        return total
    # enumerate the dependent axes in order, carrying a flat list of points (small: rows x ranges)
    env: dict = {}
    pts: dict = {}
    count = np.ones(1)
    for a in dep:
        lo = np.broadcast_to(eval_np(a.begin, {**env, **pts}, data), count.shape).astype(np.int64)
        hi = np.broadcast_to(eval_np(a.end, {**env, **pts}, data), count.shape).astype(np.int64)
        ext = np.maximum(hi - lo, 0)
        reps = np.repeat(np.arange(len(count)), ext)
        starts = np.repeat(lo, ext)
        offs = np.arange(len(reps)) - np.repeat(np.cumsum(ext) - ext, ext)
        pts = {k: v[reps] for k, v in pts.items()}
        pts[a] = starts + offs
        count = count[reps]
    return total * float(count.sum())


def _depends(a: IterVar, axes: tuple) -> bool:
    ids = {id(x) for x in axes}
    return any(isinstance(x, Var) and id(x) in ids for b in (a.begin, a.end) for x in walk(b))


def _uniform_pointer(t: Tensor, axis: IterVar, stage: Stage) -> np.ndarray:
    """Stand-in index pointer for FLOP counting without data: rows of equal length summing to the
    extent of the dimension that ``axis`` indexes (the nnz)."""
    nnz = None
    for tensor, idx_list in stage.reads.items():
        for ix in idx_list:
            for d, e in enumerate(ix):
                if e is axis:
                    nnz = tensor.shape[d]
    if nnz is None:
        for c in stage.op.checks:
            if isinstance(c, CSRCheck) and c.indptr is t:
                nnz = c.nnz
    n = t.shape[0] if t.ndim == 1 else 1
    nnz = n - 1 if nnz is None else nnz
    return np.round(np.linspace(0, nnz, n)).astype(t.dtype.np)
