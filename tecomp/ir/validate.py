"""Checks of data-dependent indices against the real index arrays, run before native code runs.

Every read whose index, or whose enclosing iteration bounds, depend on loaded values (sparse
indices, row pointers) is bounded by interval arithmetic with the actual min/max of the index
arrays; a read that could leave its tensor raises ValueError naming the argument. Writes to a
ragged output (SDDMM) are checked the same way. CSR structures declared by the ops are checked
exactly (non-decreasing pointers from 0 to nnz).
"""
from __future__ import annotations

import numpy as np

from .dag import ComputeDAG
from .expr import Expr, TensorRead
from .interval import interval
from .tensor import CSRCheck
from .traverse import walk

__all__ = ["IndexValidator"]


class IndexValidator:
    """Built once per DAG; ``check(arrays)`` validates one call's inputs (arrays in argument order)."""

    def __init__(self, dag: ComputeDAG):
        self.dag = dag
        self._passed = set()  # range tuples already found in bounds
        self.arg_pos = {id(t): n for n, t in enumerate(dag.tensors)}
        self.rules = []  # (stage, axes, tensor, dim, index expr, what)
        for s in dag.compute_stages:
            op = s.op
            axes = op.axes + op.reduce_axes
            dyn_axes = any(_data_dependent(b) for a in axes for b in (a.begin, a.end))
            exprs = [op.body] + [b for a in axes for b in (a.begin, a.end)]
            for e in exprs:
                for read in _reads(e):
                    for d, ix in enumerate(read.indices):
                        if _data_dependent(ix) or (dyn_axes and _uses(ix, axes)):
                            self.rules.append((s, axes, read.tensor, d, ix, "read"))
            if op.is_ragged:
                for d, ix in enumerate(op.out_index):
                    self.rules.append((s, axes, s.tensor, d, ix, "write"))
        for s, axes, t, d, ix, _ in self.rules:  # fail at build time if a rule cannot be decided
            if self._bounds(axes, ix, {}, probe=True) is None:
                raise ValueError(f"compute '{s.name}': the data-dependent index {ix!r} of tensor "
                                 f"'{t.name}' cannot be bounds-checked; use integer index arithmetic "
                                 f"(+, -, *, //, %, min, max) on integer tensors")
        self.needed = sorted({self.arg_pos[id(x.tensor)] for r in self.rules
                              for x in walk(r[4]) if isinstance(x, TensorRead)}
                             | {self.arg_pos[id(x.tensor)] for r in self.rules for a in r[1]
                                for b in (a.begin, a.end) for x in walk(b)
                                if isinstance(x, TensorRead)})

    @property
    def active(self) -> bool:
        return bool(self.rules or self.dag.checks)

    def check(self, arrays) -> None:
        for c in self.dag.checks:
            self._check_csr(c, arrays)
        if not self.rules:
            return
        ranges = {}
        for pos in self.needed:
            a = arrays[pos]
            ranges[id(self.dag.tensors[pos])] = (int(a.min()), int(a.max())) if a.size else None
        # the verdict depends only on the index arrays' ranges: repeated calls with the same ranges
        # (a kernel timed or run in a loop) skip the interval analysis, ~100 us per call in Python
        key = tuple(ranges.get(id(self.dag.tensors[pos])) for pos in self.needed)
        if key in self._passed:
            return
        for s, axes, t, d, ix, what in self.rules:
            r = self._bounds(axes, ix, ranges)
            if r is None or r[0] > r[1]:
                continue  # the read never executes (empty domain or empty index array)
            n = t.shape[d]
            if r[0] < 0 or r[1] >= n:
                srcs = sorted({x.tensor.name for x in walk(ix) if isinstance(x, TensorRead)} |
                              {x.tensor.name for a in axes for b in (a.begin, a.end)
                               for x in walk(b) if isinstance(x, TensorRead)})
                raise ValueError(
                    f"index data out of range: compute '{s.name}' would {what} {t.name}[...] at "
                    f"dimension {d} with indices in [{r[0]}, {r[1]}] but the dimension has size {n}; "
                    f"check argument(s) {', '.join(repr(x) for x in srcs)}")
        if len(self._passed) < 64:
            self._passed.add(key)

    def _bounds(self, axes, ix: Expr, ranges: dict, probe: bool = False):
        def read(x):
            if probe:
                return (0, 0)
            return ranges.get(id(x.tensor))
        env = {}
        for a in axes:
            lo, hi = interval(a.begin, env, read), interval(a.end, env, read)
            if lo is None or hi is None:
                if probe:
                    return None
                env[a] = (0, -1)
                continue
            env[a] = (lo[0], hi[1] - 1)
            if env[a][0] > env[a][1]:
                return (1, 0)  # empty domain: nothing is read
        return interval(ix, env, read)

    def _check_csr(self, c: CSRCheck, arrays) -> None:
        ptr = arrays[self.arg_pos[id(c.indptr)]]
        name = c.indptr.name
        if ptr.size == 0 or ptr[0] != 0:
            raise ValueError(f"CSR argument '{name}': indptr must start at 0")
        if ptr[-1] != c.nnz:
            raise ValueError(f"CSR argument '{name}': indptr ends at {int(ptr[-1])} but nnz is {c.nnz}")
        if ptr.size > 1 and np.any(np.diff(ptr.astype(np.int64)) < 0):
            raise ValueError(f"CSR argument '{name}': indptr must be non-decreasing")
        if c.indices is not None and c.ncols is not None:
            ind = arrays[self.arg_pos[id(c.indices)]]
            if ind.size and (ind.min() < 0 or ind.max() >= c.ncols):
                bad = int(ind.min()) if ind.min() < 0 else int(ind.max())
                raise ValueError(f"CSR argument '{c.indices.name}': column index {bad} out of range "
                                 f"[0, {c.ncols})")


def _reads(e: Expr):
    return [x for x in walk(e) if isinstance(x, TensorRead)]


def _data_dependent(e: Expr) -> bool:
    return any(isinstance(x, TensorRead) for x in walk(e))


def _uses(e: Expr, axes) -> bool:
    ids = {id(a) for a in axes}
    return any(id(x) in ids for x in walk(e))


