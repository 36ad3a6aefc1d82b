"""A ComputeDAG as plain JSON data: what an export stores instead of a pickle.

Loading a pickle runs whatever code it names; this format is data only. The DAG is one flat list
of items, each a JSON array whose first element says what it is, and which refers to earlier
items by position only (so it has no cycles and decoding needs no recursion)::

    ["ph", name, shape, dtype]                         a placeholder (input) tensor
    ["op", name, shape, dtype, [axes], body, [out_index] or null, [checks], tag]
                                                       a compute tensor; a check is
                                                       [indptr, nnz, indices or null, ncols or null]
    ["c", dtype, value, weak]                          a constant
    ["v", name, dtype]                                 a variable
    ["iv", name, begin, end, kind]                     an iteration variable ("spatial"/"reduce")
    ["b", op, a, b, dtype]    ["u", op, a, dtype]      binary / unary operations (BinOpKind names)
    ["cast", dtype, a]        ["sel", cond, t, f]
    ["rd", tensor, [indices]]                          a read of a tensor
    ["red", kind, source, [axes]]                      a reduction (ReduceKind names)

``{"items": [...], "args": [tensor items of the kernel's arguments], "flops": number or null}``.
:func:`dag_from_json` checks every field's type and every reference's kind and position, and
raises ValueError naming the item for anything else: a crafted file gives an error, not a DAG.
"""
from __future__ import annotations

import math

from ..ir import dtype as dt
from ..ir.dag import ComputeDAG
from ..ir.expr import (
    BinOp,
    BinOpKind,
    Cast,
    Const,
    Expr,
    IterVar,
    Reduce,
    ReduceKind,
    Select,
    TensorRead,
    UnOp,
    UnOpKind,
    Var,
)
from ..ir.opkind import IterKind
from ..ir.tensor import MAX_EXPR_DEPTH, ComputeOp, CSRCheck, PlaceholderOp, Tensor, expr_depth

__all__ = ["dag_to_json", "dag_from_json", "MAX_ITEMS"]

#: the most items a DAG file may hold (a guard against a file made to exhaust memory)
MAX_ITEMS = 1_000_000
_MAX_DIM = 2**31 - 1


def dag_to_json(dag: ComputeDAG) -> dict:
    """The plain-data form of ``dag`` (see the module docstring)."""
    items: list = []
    ids: dict = {}

    def ref(x) -> int:
        # post-order without recursion: a node's children get their positions before it
        stack = [(x, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in ids:
                continue
            deps = _deps(node)
            if not ready and any(id(d) not in ids for d in deps):
                stack.append((node, True))
                stack.extend((d, False) for d in reversed(deps) if id(d) not in ids)
                continue
            ids[id(node)] = len(items)
            items.append(_encode(node, lambda d: ids[id(d)]))
        return ids[id(x)]

    args = [ref(t) for t in dag.tensors]
    flops = dag.flop_override
    return {"items": items, "args": args, "flops": None if flops is None else float(flops)}


def _deps(x) -> list:
    if isinstance(x, Tensor):
        op = x.op
        if isinstance(op, PlaceholderOp):
            return []
        out = list(op.axes) + list(op.reduce_axes) + [op.body]
        if op.is_ragged:
            out += list(op.out_index)
        for c in op.checks:
            out += [c.indptr] + ([] if c.indices is None else [c.indices])
        return out
    if isinstance(x, IterVar):
        return [x.begin, x.end]
    if isinstance(x, TensorRead):
        return [x.tensor] + list(x.indices)
    if isinstance(x, Reduce):
        return [x.source] + list(x.axes)
    return list(x.children())


def _encode(x, pos) -> list:
    if isinstance(x, Tensor):
        shape, t = [int(d) for d in x.shape], x.dtype.name
        if isinstance(x.op, PlaceholderOp):
            return ["ph", x.name, shape, t]
        op = x.op
        checks = [[pos(c.indptr), int(c.nnz), None if c.indices is None else pos(c.indices),
                   None if c.ncols is None else int(c.ncols)] for c in op.checks]
        return ["op", x.name, shape, t, [pos(a) for a in op.axes], pos(op.body),
                [pos(i) for i in op.out_index] if op.is_ragged else None, checks, op.tag]
    if isinstance(x, Const):
        return ["c", x.dtype.name, x.value, bool(x.weak)]
    if isinstance(x, IterVar):
        return ["iv", x.name, pos(x.begin), pos(x.end), x.kind.value]
    if isinstance(x, Var):
        return ["v", x.name, x.dtype.name]
    if isinstance(x, BinOp):
        return ["b", x.op.name, pos(x.a), pos(x.b), x.dtype.name]
    if isinstance(x, UnOp):
        return ["u", x.op.name, pos(x.a), x.dtype.name]
    if isinstance(x, Cast):
        return ["cast", x.dtype.name, pos(x.a)]
    if isinstance(x, Select):
        return ["sel", pos(x.cond), pos(x.t), pos(x.f)]
    if isinstance(x, TensorRead):
        return ["rd", pos(x.tensor), [pos(i) for i in x.indices]]
    if isinstance(x, Reduce):
        return ["red", x.kind.name, pos(x.source), [pos(a) for a in x.axes]]
    raise TypeError(f"a {type(x).__name__} cannot be stored in an export's DAG")


# ------------------------------------------------------------------------------ decoding
_ARITY = {"ph": 4, "op": 9, "c": 4, "v": 3, "iv": 5, "b": 5, "u": 4, "cast": 3, "sel": 4, "rd": 3,
          "red": 4}


class _Decoder:
    def __init__(self, where: str):
        self.where, self.out, self.n = where, [], 0

    def fail(self, msg: str):
        raise ValueError(f"{self.where}: item {self.n}: {msg}")

    def ref(self, v, kind, what: str):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < len(self.out):
            self.fail(f"{what} must refer to an earlier item, got {v!r}")
        x = self.out[v]
        if not isinstance(x, kind):
            self.fail(f"{what} must be a {getattr(kind, '__name__', 'value')}, item {v} is a "
                      f"{type(x).__name__}")
        return x

    def refs(self, v, kind, what: str) -> tuple:
        if not isinstance(v, list):
            self.fail(f"{what} must be a list")
        return tuple(self.ref(x, kind, what) for x in v)

    def dtype(self, v) -> dt.DType:
        if not isinstance(v, str):
            self.fail(f"dtype must be a string, got {v!r}")
        try:
            return dt.dtype(v)
        except TypeError:
            self.fail(f"unknown dtype {v!r}")

    def name(self, v) -> str:
        if not isinstance(v, str) or not 0 < len(v) <= 256:
            self.fail(f"a name must be a string of 1 to 256 characters, got {v!r:.40}")
        return v

    def enum(self, cls, v):
        try:
            return cls[v] if isinstance(v, str) else self.fail(f"{cls.__name__} {v!r}")
        except KeyError:
            self.fail(f"unknown {cls.__name__} {v!r}")

    def shape(self, v) -> tuple:
        if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                              and 0 < d <= _MAX_DIM for d in v):
            self.fail(f"a shape must be a list of positive int32 sizes, got {v!r:.60}")
        return tuple(v)

    def item(self, it):
        if not isinstance(it, list) or not it or not isinstance(it[0], str) \
                or _ARITY.get(it[0]) != len(it):
            self.fail(f"not an item of a known kind and length: {it!r:.60}")
        k = it[0]
        if k == "ph":
            name = self.name(it[1])
            return Tensor(PlaceholderOp(name), self.shape(it[2]), self.dtype(it[3]), name)
        if k == "op":
            return self.compute(it)
        if k == "c":
            t, v = self.dtype(it[1]), it[2]
            ok = (isinstance(v, bool) if t.is_bool else
                  isinstance(v, int) and not isinstance(v, bool) if t.is_int else
                  isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok or not isinstance(it[3], bool):
                self.fail(f"a {t} constant cannot be {v!r:.40}")
            if t.is_int and not -2**(t.bits - 1) <= v < 2**(t.bits - 1):
                self.fail(f"constant {v} does not fit {t}")
            return Const(v, t, it[3])
        if k == "v":
            return Var(self.name(it[1]), self.dtype(it[2]))
        if k == "iv":
            kind = {e.value: e for e in IterKind}.get(it[4]) or self.fail(f"iter kind {it[4]!r}")
            return IterVar(self.name(it[1]), self.ref(it[2], Expr, "begin"),
                           self.ref(it[3], Expr, "end"), kind)
        if k == "b":
            return BinOp(self.enum(BinOpKind, it[1]), self.ref(it[2], Expr, "operand"),
                         self.ref(it[3], Expr, "operand"), self.dtype(it[4]))
        if k == "u":
            return UnOp(self.enum(UnOpKind, it[1]), self.ref(it[2], Expr, "operand"),
                        self.dtype(it[3]))
        if k == "cast":
            return Cast(self.dtype(it[1]), self.ref(it[2], Expr, "operand"))
        if k == "sel":
            return Select(*(self.ref(v, Expr, "operand") for v in it[1:]))
        if k == "rd":
            t = self.ref(it[1], Tensor, "tensor")
            idx = self.refs(it[2], Expr, "index")
            if len(idx) != len(t.shape) or any(not i.dtype.is_int for i in idx):
                self.fail(f"a read of '{t.name}' needs {len(t.shape)} integer indices")
            return TensorRead(t, idx)
        return Reduce(self.enum(ReduceKind, it[1]), self.ref(it[2], Expr, "source"),
                      self.refs(it[3], IterVar, "reduce axis"))

    def compute(self, it) -> Tensor:
        _, name, shape, t, axes, body, out_index, checks, tag = it
        name, shape, t = self.name(name), self.shape(shape), self.dtype(t)
        axes, body = self.refs(axes, IterVar, "axis"), self.ref(body, Expr, "body")
        if not isinstance(tag, str) or not isinstance(checks, list):
            self.fail("tag must be a string and checks a list")
        out_index = None if out_index is None else self.refs(out_index, Expr, "output index")
        cs = []
        for c in checks:
            if not isinstance(c, list) or len(c) != 4:
                self.fail(f"a check is [indptr, nnz, indices, ncols], got {c!r:.60}")
            ints = [v for v in (c[1], c[3]) if v is not None]
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
                self.fail("a check's nnz and ncols must be integers >= 0")
            cs.append(CSRCheck(self.ref(c[0], Tensor, "indptr"), c[1],
                               None if c[2] is None else self.ref(c[2], Tensor, "indices"), c[3]))
        if out_index is None and len(axes) != len(shape):
            self.fail(f"compute '{name}' has {len(axes)} axes for a shape of rank {len(shape)}")
        depth = expr_depth(body)
        if depth > MAX_EXPR_DEPTH:
            self.fail(f"compute '{name}' is {depth} operations deep (limit {MAX_EXPR_DEPTH})")
        op = ComputeOp(name, axes, body, out_index=out_index, checks=tuple(cs), tag=tag)
        return Tensor(op, shape, t, name)


def dag_from_json(obj, where: str = "DAG") -> ComputeDAG:
    """The ComputeDAG of :func:`dag_to_json`'s data; ValueError for anything else."""
    if not isinstance(obj, dict) or set(obj) != {"items", "args", "flops"}:
        raise ValueError(f"{where}: not an export DAG (an object of items, args and flops)")
    items, args, flops = obj["items"], obj["args"], obj["flops"]
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise ValueError(f"{where}: items must be a list of at most {MAX_ITEMS}")
    if flops is not None and (not isinstance(flops, (int, float)) or isinstance(flops, bool)
                              or not math.isfinite(flops) or flops < 0):
        raise ValueError(f"{where}: flops must be a finite number >= 0 or null")
    d = _Decoder(where)
    for d.n, it in enumerate(items):
        d.out.append(d.item(it))
    d.n = "args"
    tensors = d.refs(args, Tensor, "argument")
    try:
        return ComputeDAG(list(tensors), flop_count=flops)
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{where}: not a valid ComputeDAG: {e}") from None
