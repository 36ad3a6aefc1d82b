"""A direct, schedule-free numpy evaluation of a ComputeDAG (an oracle independent of the loop IR).

Each compute stage is evaluated in ``dag.stages`` order with :func:`tecomp.ir.evaluate.eval_np`,
broadcasting over all its axes at once:

- rectangular stages: spatial axes are broadcast ``arange``s; reduce axes are trailing dimensions.
  A reduce axis with data-dependent bounds (CSR row ranges) is evaluated over offsets
  ``begin + t`` for ``t < max(end - begin)`` and points with ``t >= end - begin`` are masked out
  (masked reads read index 0 and their values are replaced by the reduction's identity);
- ragged stages (``compute_csr``): the points of the ragged domain are enumerated row by row into
  flat arrays, evaluated, and scattered to ``out_index``.

The outermost dimension is processed in chunks so the broadcast temporaries stay small.
Reductions run in the stage dtype (``np.sum(..., dtype=...)``, ``np.max``, ``np.min``).
"""
from __future__ import annotations

import numpy as np

from ..ir.dag import ComputeDAG
from ..ir.evaluate import eval_np
from ..ir.expr import Const, Reduce, ReduceKind
from ..ir.tensor import CSRCheck

__all__ = ["evaluate_dag", "check_inputs"]

_CHUNK_ELEMS = 1 << 22  # elements of the largest broadcast temporary per chunk


def evaluate_dag(dag: ComputeDAG, inputs, check: bool = True) -> list:
    """Evaluate ``dag`` on ``inputs`` (one array per ``dag.inputs``, in order).

    Parameters
    ----------
    dag : ComputeDAG
    inputs : sequence of array_like
        Converted to the placeholders' dtypes; shapes must match exactly.
    check : bool
        Validate the DAG's CSR checks (``indptr`` monotone from 0 to nnz, indices in range) first.

    Returns
    -------
    list of numpy.ndarray
        One array per ``dag.outputs``.
    """
    inputs = list(inputs)
    if len(inputs) != len(dag.inputs):
        raise TypeError(f"evaluate_dag: the DAG has {len(dag.inputs)} inputs "
                        f"({', '.join(t.name for t in dag.inputs)}), got {len(inputs)} arrays")
    data: dict = {}
    for t, a in zip(dag.inputs, inputs):
        a = np.asarray(a)
        if a.shape != t.shape:
            raise ValueError(f"evaluate_dag: input '{t.name}' must have shape {t.shape}, "
                             f"got {a.shape}")
        data[t] = np.ascontiguousarray(a, dtype=t.dtype.np)
    if check:
        check_inputs(dag, data)
    for s in dag.stages:
        if s.is_placeholder:
            continue
        data[s.tensor] = _eval_stage(s.op, s.tensor, data)
    return [data[t] for t in dag.outputs]


def check_inputs(dag: ComputeDAG, data: dict) -> None:
    """Raise ValueError when the index data violates one of the DAG's CSR checks."""
    for c in dag.checks:
        if not isinstance(c, CSRCheck):
            continue
        ptr = data[c.indptr].astype(np.int64)
        if ptr.size == 0 or ptr[0] != 0 or ptr[-1] != c.nnz or np.any(np.diff(ptr) < 0):
            raise ValueError(f"evaluate_dag: '{c.indptr.name}' must be non-decreasing from 0 to "
                             f"nnz={c.nnz}")
        if c.indices is not None and c.ncols is not None:
            idx = data[c.indices]
            if idx.size and (idx.min() < 0 or idx.max() >= c.ncols):
                raise ValueError(f"evaluate_dag: '{c.indices.name}' values must lie in "
                                 f"[0, {c.ncols})")


# ----------------------------------------------------------------------------- stages

def _eval_stage(op, tensor, data: dict) -> np.ndarray:
    dtype = tensor.dtype.np
    if op.is_ragged:
        return _eval_ragged(op, tensor, data)
    shape = tensor.shape
    out = np.empty(shape, dtype=dtype)
    if out.size == 0:
        return out
    nd = len(shape)
    if nd == 0:
        out[()] = _eval_points(op, {}, (), data, dtype)
        return out
    inner = int(np.prod(shape[1:], dtype=np.int64))
    red = _reduce_size_hint(op, data)
    step = max(1, _CHUNK_ELEMS // max(1, inner * red))
    for lo in range(0, shape[0], step):
        hi = min(shape[0], lo + step)
        lead = (hi - lo,) + shape[1:]
        env = {}
        for d, a in enumerate(op.axes):
            r = np.arange(lo, hi) if d == 0 else np.arange(shape[d])
            env[a] = r.reshape((-1,) + (1,) * (nd - d - 1))
        out[lo:hi] = _eval_points(op, env, lead, data, dtype)
    return out


def _reduce_size_hint(op, data) -> int:
    """Product of the constant reduce extents (data-dependent ones are estimated as 64)."""
    n = 1
    for a in op.reduce_axes:
        e = a.const_extent
        n *= max(1, e) if e is not None else 64
    return n


def _eval_points(op, env: dict, lead: tuple, data: dict, dtype) -> np.ndarray:
    """Evaluate the body at the points described by ``env`` (arrays broadcastable to ``lead``)."""
    body = op.body
    if not isinstance(body, Reduce):
        return np.broadcast_to(np.asarray(eval_np(body, env, data)).astype(dtype), lead)
    nl, nr = len(lead), len(body.axes)
    env = {k: np.asarray(v).reshape(np.shape(v) + (1,) * nr) for k, v in env.items()}
    mask = None
    red_shape = []
    for j, a in enumerate(body.axes):
        tail = (1,) * (nr - j - 1)
        if isinstance(a.begin, Const) and isinstance(a.end, Const):
            ext = max(0, a.end.value - a.begin.value)
            env[a] = (a.begin.value + np.arange(ext)).reshape((1,) * (nl + j) + (-1,) + tail)
            red_shape.append(ext)
            continue
        # data-dependent bounds: offsets from begin, masked beyond end
        begin = np.asarray(eval_np(a.begin, env, data, mask)).astype(np.int64)
        end = np.asarray(eval_np(a.end, env, data, mask)).astype(np.int64)
        ext = np.maximum(end - begin, 0)
        if mask is not None:
            ext = np.where(mask, ext, 0)
        tmax = int(ext.max()) if ext.size else 0
        t = np.arange(tmax).reshape((1,) * (nl + j) + (-1,) + tail)
        # begin/ext have size 1 in this axis' and later dimensions
        env[a] = begin + t
        m = t < ext
        mask = m if mask is None else (mask & m)
        red_shape.append(tmax)
    full = tuple(lead) + tuple(red_shape)
    if mask is not None:
        mask = np.broadcast_to(mask, full)
    if 0 in full:
        vals = np.zeros(full, dtype=dtype)
    else:
        vals = np.asarray(eval_np(body.source, env, data, mask)).astype(dtype)
    vals = np.broadcast_to(vals, full)
    ident = body.identity.value
    if mask is not None:
        vals = np.where(mask, vals, np.asarray(ident, dtype=dtype))
    axes = tuple(range(nl, nl + nr))
    if body.kind is ReduceKind.SUM:
        return np.sum(vals, axis=axes, dtype=dtype)
    if 0 in red_shape:  # empty reduction: the identity
        return np.full(lead, ident, dtype=dtype)
    fn = np.max if body.kind is ReduceKind.MAX else np.min
    return fn(vals, axis=axes).astype(dtype)


def _eval_ragged(op, tensor, data: dict) -> np.ndarray:
    """Enumerate the ragged domain's points (each axis' range evaluated at the points of the axes
    before it), evaluate the body there and scatter to ``out_index``."""
    out = np.zeros(tensor.shape, dtype=tensor.dtype.np)
    env: dict = {}
    n = 1
    for a in op.axes:
        lo = np.broadcast_to(np.asarray(eval_np(a.begin, env, data)).astype(np.int64), (n,))
        hi = np.broadcast_to(np.asarray(eval_np(a.end, env, data)).astype(np.int64), (n,))
        ext = np.maximum(hi - lo, 0)
        parent = np.repeat(np.arange(n), ext)
        first = np.repeat(np.cumsum(ext) - ext, ext)
        offs = np.arange(parent.size) - first
        env = {k: np.broadcast_to(v, (n,))[parent] for k, v in env.items()}
        env[a] = np.repeat(lo, ext) + offs
        n = parent.size
    if n == 0:
        return out
    step = max(1, _CHUNK_ELEMS // _reduce_size_hint(op, data))
    for s in range(0, n, step):
        sub = {k: v[s:s + step] for k, v in env.items()}
        m = next(iter(sub.values())).size
        vals = _eval_points(op, sub, (m,), data, tensor.dtype.np)
        idx = tuple(np.broadcast_to(np.asarray(eval_np(e, sub, data)).astype(np.int64), (m,))
                    for e in op.out_index)
        out[idx] = vals
    return out
