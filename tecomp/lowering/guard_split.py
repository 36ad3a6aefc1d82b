"""Guard versioning: a loop whose body holds guards of non-divisible splits runs an unguarded copy of
its body on every iteration whose inner tile is whole, and the guarded body only on the tail.

A non-divisible split ``for jo: for ji in [0, 24): if (jo*24 + ji < 100)`` guards every element;
when the guard sits in a vectorized loop the vector code is masked (or scalar) for every tile, not
only the last one, and non-divisible register tiles (6 rows, 24 lanes) lose most of their speed.
For each such guard, the predicate "the guard holds for every value of the loops inside ``jo``"
(``jo*24 + 23 < 100``, from the symbolic bound of the guard over those loops) depends only on
``jo`` and the loops around it; the body of ``jo`` becomes ``if (P) body-without-the-guards else
body``. Guards that hold on every iteration are dropped outright.

Only upper/lower-bound comparisons of index expressions whose inner loops have constant bounds are
versioned (not data-dependent guards such as a sparse row's end). GPU functions are left alone:
their guards can differ between the threads of a block and sit around barriers.
"""
from __future__ import annotations

from ..ir.arith import bound, simplify_index
from ..ir.expr import BinOp, BinOpKind, Const, Load, binary
from ..ir.loop import Allocate, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt
from ..ir.traverse import free_vars, structural_key, walk

__all__ = ["version_guards", "MAX_VERSION_DEPTH"]

#: at most this many nested versionings on one path (each doubles the code below it)
MAX_VERSION_DEPTH = 3
_FLIP = {BinOpKind.GT: BinOpKind.LT, BinOpKind.GE: BinOpKind.LE}
_VERSIONED = (ForKind.SERIAL, ForKind.PARALLEL)


def version_guards(func: PrimFunc) -> PrimFunc:
    """``func`` with the guards of non-divisible tiles versioned out of whole tiles (see the
    module docstring); the same function object when nothing changes or it is a GPU function."""
    if func.is_gpu:
        return func
    body = _visit(func.body, {}, 0)
    if body is func.body:
        return func
    return PrimFunc(func.name, func.params, body, func.n_outputs)


def _conjuncts(c):
    if isinstance(c, BinOp) and c.op is BinOpKind.AND:
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _and(conds):
    out = conds[0]
    for c in conds[1:]:
        out = binary(BinOpKind.AND, out, c)
    return out


def _key(e):
    return structural_key(e, id)


def _whole_tile_predicate(c, inner: dict, ranges: dict):
    """The condition on the outer variables under which ``c`` holds for every value of the
    ``inner`` loops ({Var: (lo, hi)}), or None when ``c`` is not a comparison of index
    expressions that the bound analysis can handle."""
    if not isinstance(c, BinOp) or c.op not in (BinOpKind.LT, BinOpKind.LE, *_FLIP):
        return None
    a, b, op = c.a, c.b, c.op
    if op in _FLIP:
        a, b, op = b, a, _FLIP[op]
    if not (a.dtype.is_int and b.dtype.is_int):
        return None
    if any(isinstance(x, Load) for x in walk(c)):
        return None  # data-dependent (a sparse row's end): not a tile boundary
    r = bound(a - b, inner, ranges)
    if r is None:
        return None
    hi = simplify_index(r[1], ranges)
    if any(v in inner for v in free_vars(hi)):
        return None
    return binary(op, hi, Const(0, hi.dtype))


def _guards(body: Stmt, var, ranges: dict):
    """{(id of an IfThenElse, conjunct key): predicate} for the guards in ``body`` that version at
    the loop of ``var``, and the set of such keys that hold everywhere."""
    found, always = {}, set()

    def go(s, inner, unknown):
        if isinstance(s, For):
            if isinstance(s.begin, Const) and isinstance(s.extent, Const):
                lo = int(s.begin.value)
                go(s.body, {**inner, s.var: (lo, lo + int(s.extent.value) - 1)}, unknown)
            else:
                go(s.body, inner, unknown | {s.var})
            return
        if isinstance(s, IfThenElse) and s.else_ is None:
            for c in _conjuncts(s.cond):
                vs = set(free_vars(c))
                if vs & unknown or not vs & set(inner):
                    continue
                p = _whole_tile_predicate(c, inner, {**ranges, **inner})
                if p is None:
                    continue
                if isinstance(p, Const):
                    if p.value:
                        always.add((id(s), _key(c)))
                elif any(v is var for v in free_vars(p)):
                    found[(id(s), _key(c))] = p
        for ch in s.children():
            go(ch, inner, unknown)

    go(body, {}, set())
    return found, always


def _drop(s: Stmt, keys: set) -> Stmt:
    """``s`` without the guard conjuncts named by ``keys`` (rebuilt only where something changes)."""
    if isinstance(s, IfThenElse):
        then = _drop(s.then, keys)
        else_ = None if s.else_ is None else _drop(s.else_, keys)
        conds = _conjuncts(s.cond)
        keep = [c for c in conds if (id(s), _key(c)) not in keys]
        if len(keep) == len(conds):
            if then is s.then and else_ is s.else_:
                return s
            return IfThenElse(s.cond, then, else_)
        return then if not keep else IfThenElse(_and(keep), then, else_)
    if isinstance(s, For):
        body = _drop(s.body, keys)
        return s if body is s.body else For(s.var, s.begin, s.extent, s.kind, body, s.thread,
                                            s.pragmas)
    if isinstance(s, Allocate):
        body = _drop(s.body, keys)
        return s if body is s.body else Allocate(s.buffer, body)
    if isinstance(s, Seq):
        items = [_drop(c, keys) for c in s.stmts]
        return s if all(a is b for a, b in zip(items, s.stmts)) else Seq(items)
    return s


def _visit(s: Stmt, ranges: dict, depth: int) -> Stmt:
    if isinstance(s, For):
        known = isinstance(s.begin, Const) and isinstance(s.extent, Const)
        inner_ranges = ranges
        if known:
            lo = int(s.begin.value)
            inner_ranges = {**ranges, s.var: (lo, lo + int(s.extent.value) - 1)}
        body = s.body
        if s.kind in _VERSIONED:
            found, always = _guards(body, s.var, inner_ranges)
            if found and depth < MAX_VERSION_DEPTH:
                preds = {}
                for p in found.values():
                    preds.setdefault(_key(p), p)
                whole = _drop(body, set(found) | always)
                body = IfThenElse(_and(list(preds.values())),
                                  _visit(whole, inner_ranges, depth + 1),
                                  _visit(_drop(body, always), inner_ranges, depth + 1))
            else:
                body = _visit(_drop(body, always), inner_ranges, depth)
        else:
            body = _visit(body, inner_ranges, depth)
        return s if body is s.body else For(s.var, s.begin, s.extent, s.kind, body, s.thread,
                                            s.pragmas)
    if isinstance(s, Allocate):
        body = _visit(s.body, ranges, depth)
        return s if body is s.body else Allocate(s.buffer, body)
    if isinstance(s, Seq):
        items = [_visit(c, ranges, depth) for c in s.stmts]
        return s if all(a is b for a, b in zip(items, s.stmts)) else Seq(items)
    if isinstance(s, IfThenElse):
        then = _visit(s.then, ranges, depth)
        else_ = None if s.else_ is None else _visit(s.else_, ranges, depth)
        if then is s.then and else_ is s.else_:
            return s
        return IfThenElse(s.cond, then, else_)
    return s
