"""Checks of data-dependent indices against the real index arrays, run before native code runs.

What is checked, for every read whose index, or whose enclosing iteration bounds, depend on
loaded values (sparse indices, row pointers, gathers), and every write to a ragged output:

- Interval arithmetic with the actual min/max of the index arrays, computed as the compiled code
  computes: each integer node in its own type, wrapping on overflow (an ``int32`` product that may
  overflow can be anything in ``int32``). Index data computed by an intermediate stage is bounded
  through that stage's expression (``sum``/``max``/``min`` included).
- When the intervals cannot prove a read in range and its iteration domain is rectangular (at most
  :data:`EXACT_POINTS` points) and it reads only the kernel's inputs, the index is evaluated exactly
  over the whole domain (numpy, wrapping like the compiled code), only where the ``if_then_else``
  conditions guarding the read hold: a guarded gather accepts every index it never reads.

A read that could leave its tensor raises ValueError naming the arguments, so no index data makes
the compiled kernel (or the interpreter) touch memory outside its buffers. CSR structures declared
by the ops are checked exactly (non-decreasing pointers from 0 to nnz).
"""
from __future__ import annotations

import numpy as np

from .dag import ComputeDAG
from .evaluate import eval_np
from .expr import Expr, Reduce, ReduceKind, Select, TensorRead
from .interval import interval, wrapped
from .tensor import CSRCheck, PlaceholderOp
from .traverse import walk

__all__ = ["IndexValidator", "EXACT_POINTS"]

#: the largest iteration domain evaluated exactly when intervals cannot prove a read in range
EXACT_POINTS = 1 << 22


class _NoExact(Exception):
    """A stage the exact check needs is not a small rectangular one."""


class _Empty(Exception):
    """An index array of the read is empty: the read never executes."""


class IndexValidator:
    """Built once per DAG; ``check(arrays)`` validates one call's inputs (arrays in argument order)."""

    def __init__(self, dag: ComputeDAG):
        self.dag = dag
        self._passed = set()  # range tuples already found in bounds
        self.arg_pos = {id(t): n for n, t in enumerate(dag.tensors)
                        if isinstance(t.op, PlaceholderOp)}
        self.rules = []  # (stage, axes, tensor, dim, index expr, what, guards)
        for s in dag.compute_stages:
            op = s.op
            axes = op.axes + op.reduce_axes
            dyn_axes = any(_data_dependent(b) for a in axes for b in (a.begin, a.end))
            exprs = [op.body] + [b for a in axes for b in (a.begin, a.end)]
            for e in exprs:
                for read, guards in _guarded_reads(e):
                    for d, ix in enumerate(read.indices):
                        if _data_dependent(ix) or (dyn_axes and _uses(ix, axes)):
                            self.rules.append((s, axes, read.tensor, d, ix, "read", guards))
            if op.is_ragged:
                for d, ix in enumerate(op.out_index):
                    self.rules.append((s, axes, s.tensor, d, ix, "write", ()))
        for s, axes, t, d, ix, *_ in self.rules:  # fail at build time if a rule cannot be decided
            if self._bounds(axes, ix, self._reader(None)) is None:
                raise ValueError(f"compute '{s.name}': the data-dependent index {ix!r} of tensor "
                                 f"'{t.name}' cannot be bounds-checked; use integer index arithmetic "
                                 f"(+, -, *, //, %, min, max) on integer tensors, or integer stages "
                                 f"computed from them")
        self.needed = sorted({self.arg_pos[id(x)] for r in self.rules
                              for x in self._sources([r[4]] + _bound_exprs(r[1]))})

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
        read = self._reader(ranges)
        exact_used = False
        for s, axes, t, d, ix, what, guards in self.rules:
            try:
                r = self._bounds(axes, ix, read)
            except _Empty:
                continue
            if r is None:
                raise ValueError(f"compute '{s.name}': the index {ix!r} of tensor '{t.name}' "
                                 f"cannot be bounds-checked for this data")
            if r[0] > r[1]:
                continue  # the read never executes (empty domain)
            n = t.shape[d]
            if r[0] < 0 or r[1] >= n:
                exact = self._exact(axes, ix, guards, arrays)
                if exact is not None and (exact[0] > exact[1] or (exact[0] >= 0 and exact[1] < n)):
                    exact_used = True
                    continue
                if exact is not None:
                    r = exact
                srcs = sorted(x.name for x in self._sources([ix] + _bound_exprs(axes)))
                raise ValueError(
                    f"index data out of range: compute '{s.name}' would {what} {t.name}[...] at "
                    f"dimension {d} with indices in [{r[0]}, {r[1]}] but the dimension has size {n}"
                    f" (integer arithmetic wraps as in the compiled code); check argument(s) "
                    f"{', '.join(repr(x) for x in srcs)}")
        if not exact_used and len(self._passed) < 64:
            self._passed.add(key)

    # ------------------------------------------------------------------ intervals
    def _reader(self, ranges):
        """The ``read`` callback of :func:`interval`: an input's range from ``ranges`` (every
        integer input is ``(0, 0)`` when ``ranges`` is None: the build-time decidability probe),
        an intermediate stage's range from its expression."""
        memo = {}

        def read(x):
            t = x.tensor
            if id(t) in self.arg_pos:
                if ranges is None:
                    return (0, 0) if t.dtype.is_int or t.dtype.is_bool else None
                r = ranges.get(id(t), False)
                if r is None:
                    raise _Empty
                return None if r is False else r
            if id(t) not in memo:
                memo[id(t)] = None  # a cycle cannot occur in a DAG; guards the recursion anyway
                memo[id(t)] = self._stage_range(t, read)
            return memo[id(t)]
        return read

    def _stage_range(self, t, read):
        """Bounds of every value an intermediate (integer) stage ``t`` computes."""
        op = t.op
        if not (t.dtype.is_int or t.dtype.is_bool):
            return None
        body = op.body
        if not isinstance(body, Reduce):
            return self._bounds(op.axes, body, read)
        r = self._bounds(op.axes + op.reduce_axes, body.source, read)
        n = self._domain_size(body.axes, op.axes, read)
        if r is None or n is None:
            return None
        if body.kind is ReduceKind.SUM:
            p = [r[0] * n[0], r[0] * n[1], r[1] * n[0], r[1] * n[1]]
            r = (min(p), max(p))
        elif n[0] == 0:  # max/min over a possibly empty domain gives the identity
            ident = int(body.identity.value)
            r = (min(r[0], ident), max(r[1], ident))
        return wrapped(r, t.dtype) if t.dtype.is_int else (max(r[0], 0), min(r[1], 1))

    def _domain_size(self, red_axes, outer, read):
        env = self._env(outer, read)
        if env is None:
            return None
        lo, hi = 1, 1
        for a in red_axes:
            b, e = interval(a.begin, env, read, wrap=True), interval(a.end, env, read, wrap=True)
            if b is None or e is None:
                return None
            lo, hi = lo * max(0, e[0] - b[1]), hi * max(0, e[1] - b[0])
            env[a] = (b[0], e[1] - 1)
        return (lo, hi)

    def _env(self, axes, read):
        env = {}
        for a in axes:
            lo = interval(a.begin, env, read, wrap=True)
            hi = interval(a.end, env, read, wrap=True)
            if lo is None or hi is None:
                return None
            env[a] = (lo[0], hi[1] - 1)
        return env

    def _bounds(self, axes, ix: Expr, read):
        env = self._env(axes, read)
        if env is None:
            return None
        if any(lo > hi for lo, hi in env.values()):
            return (1, 0)  # empty domain: nothing is read
        return interval(ix, env, read, wrap=True)

    def _sources(self, exprs) -> list:
        """The input tensors whose values ``exprs`` depend on, through intermediate stages."""
        out, seen, stack = [], set(), list(exprs)
        while stack:
            for x in walk(stack.pop()):
                if not isinstance(x, TensorRead) or id(x.tensor) in seen:
                    continue
                seen.add(id(x.tensor))
                if id(x.tensor) in self.arg_pos:
                    out.append(x.tensor)
                else:
                    op = x.tensor.op
                    stack += [op.body] + _bound_exprs(op.axes + op.reduce_axes)
        return out

    # ------------------------------------------------------------------ exact evaluation
    def _exact(self, axes, ix: Expr, guards, arrays):
        """``(min, max)`` of ``ix`` over the points of a rectangular domain where ``guards``
        hold ((1, 0) when there are none), or None when it cannot be evaluated here."""
        grid = _grid(axes)
        if grid is None:
            return None
        env, full = grid
        data = {self.dag.tensors[n]: arrays[n] for n in self.arg_pos.values()
                if arrays[n] is not None}
        try:
            for e in [ix] + [g for g, _ in guards]:
                self._stage_values(e, data)
            mask = np.ones(full, dtype=bool)
            for g, polarity in guards:
                c = np.broadcast_to(np.asarray(eval_np(g, env, data, mask)).astype(bool), full)
                mask = mask & (c if polarity else ~c)
            v = np.broadcast_to(np.asarray(eval_np(ix, env, data, mask)), full)[mask]
        except (IndexError, _NoExact):
            # an index it needs is itself out of range, or data not at hand (a float input of a
            # device call is not copied to the host): the interval verdict stands
            return None
        return (int(v.min()), int(v.max())) if v.size else (1, 0)

    def _stage_values(self, e: Expr, data: dict) -> None:
        """Put the values of every intermediate stage ``e`` reads into ``data`` (numpy, wrapping
        like the compiled code), or raise _NoExact when one is not a small rectangular stage."""
        for x in walk(e):
            t = x.tensor if isinstance(x, TensorRead) else None
            if t is None or t in data:
                continue
            op = t.op
            if isinstance(op, PlaceholderOp) or op.is_ragged:
                raise _NoExact
            src = op.body.source if isinstance(op.body, Reduce) else op.body
            grid = _grid(op.axes + op.reduce_axes)
            if grid is None or any(
                    interval(a.begin, {}) != (0, 0) for a in op.axes):
                raise _NoExact
            self._stage_values(src, data)
            env, full = grid
            v = np.broadcast_to(np.asarray(eval_np(src, env, data)), full)
            if isinstance(op.body, Reduce):
                fn = {ReduceKind.SUM: np.sum, ReduceKind.MAX: np.max, ReduceKind.MIN: np.min}
                red = tuple(range(len(op.axes), len(full)))
                ident = op.body.identity.value
                with np.errstate(all="ignore"):
                    v = fn[op.body.kind](v, axis=red, dtype=t.dtype.np, initial=ident)
            data[t] = np.ascontiguousarray(v, dtype=t.dtype.np)

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


def _grid(axes):
    """``(env, shape)``: broadcastable index arrays of a rectangular domain of at most
    :data:`EXACT_POINTS` points, or None."""
    extents = []
    for a in axes:
        b, e = interval(a.begin, {}), interval(a.end, {})
        if b is None or e is None or b[0] != b[1] or e[0] != e[1]:
            return None
        extents.append((b[0], max(b[0], e[0])))
    full = tuple(e - b for b, e in extents)
    if float(np.prod(full, dtype=np.float64)) > EXACT_POINTS:
        return None
    env = {}
    for n, (a, (b, e)) in enumerate(zip(axes, extents)):
        shape = [1] * len(axes)
        shape[n] = e - b
        env[a] = np.arange(b, e, dtype=np.int64).reshape(shape)
    return env, full


def _guarded_reads(e: Expr, guards: tuple = ()):
    """``(read, guards)`` for every TensorRead in ``e``: ``guards`` are the ``(condition, taken)``
    of the ``if_then_else`` branches the read sits in."""
    out, stack = [], [(e, guards)]
    while stack:
        x, g = stack.pop()
        if isinstance(x, TensorRead):
            out.append((x, g))
        if isinstance(x, Select):
            stack += [(x.cond, g), (x.t, g + ((x.cond, True),)), (x.f, g + ((x.cond, False),))]
        else:
            stack += [(c, g) for c in x.children()]
    return out


def _bound_exprs(axes) -> list:
    return [b for a in axes for b in (a.begin, a.end)]


def _data_dependent(e: Expr) -> bool:
    return any(isinstance(x, TensorRead) for x in walk(e))


def _uses(e: Expr, axes) -> bool:
    ids = {id(a) for a in axes}
    return any(id(x) in ids for x in walk(e))
