"""Guard versioning: a loop whose body holds guards of non-divisible splits runs an unguarded copy of
its body on every iteration whose inner tile is whole, and the guarded body only on the tail.

A non-divisible split ``for jo: for ji in [0, 24): if (jo*24 + ji < 100)`` guards every element;
when the guard sits in a vectorized loop the vector code is masked (or scalar) for every tile, not
only the last one, and non-divisible register tiles (6 rows, 24 lanes) lose most of their speed.
For each such guard, the predicate "the guard holds for every value of the loops inside ``jo``"
(``jo*24 + 23 < 100``, from the symbolic bound of the guard over those loops) depends only on
``jo`` and the loops around it; the body of ``jo`` becomes ``if (P) body-without-the-guards else
body``. Guards that hold on every iteration are dropped outright.

The conditions of selects in stored values are versioned the same way: an inlined zero padding
reads ``(h >= 1 && h < H + 1 && ...) ? data[.., h - 1, ..] : 0`` for every element, a masked load
per vector; on the tiles that lie inside the image (all but the border ones) it is a plain load.

Only upper/lower-bound comparisons of index expressions whose inner loops have constant bounds are
versioned (not data-dependent guards such as a sparse row's end). GPU functions are left alone:
their guards can differ between the threads of a block and sit around barriers.
"""
from __future__ import annotations

from ..ir.arith import bound, simplify_index, to_linear
from ..ir.expr import BinOp, BinOpKind, Const, Load, Select, binary, select
from ..ir.loop import Allocate, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store, stmts
from ..ir.traverse import free_vars, structural_key, transform, walk

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


def _guards(body: Stmt, var, ranges: dict, outer: bool = False, selects: set | None = None):
    """{(id of an IfThenElse, conjunct key): predicate} for the guards in ``body`` that version at
    the loop of ``var``, and the set of such keys that hold everywhere; ``selects`` (with
    ``outer``) collects the ids of the selects among them.

    A select versions only at a parallel loop (``outer``: the outermost tile loop) whose variable
    indexes a store inside it: a version in a reduction loop (the kernel window's ``rx``) splits
    its accumulation chains around a branch, and versions in the inner tile loops of a padding
    computed per tile measured up to 14% slower (MobileNet-V2's C576 H14 depthwise layer)
    where the parallel loop's were 9-11% faster (its stem and stride-2 depthwise layers). A
    predicate that no iteration of the loop satisfies versions nothing."""
    found, always = {}, set()
    tile = []  # whether var indexes a store: worked out at the first select (lowering is hot)

    def tile_loop() -> bool:
        if not tile:
            tile.append(any(isinstance(st, Store) and any(v is var for i in st.indices
                                                          for v in free_vars(i))
                            for st in stmts(body)))
        return tile[0]

    def go(s, inner, unknown):
        if isinstance(s, For):
            if isinstance(s.begin, Const) and isinstance(s.extent, Const):
                lo = int(s.begin.value)
                go(s.body, {**inner, s.var: (lo, lo + int(s.extent.value) - 1)}, unknown)
            else:
                go(s.body, inner, unknown | {s.var})
            return
        if isinstance(s, IfThenElse) and s.else_ is None:
            conditional(s, inner, unknown)
        elif isinstance(s, Store) and outer:  # the selects of an inlined padding
            for e in (s.value, *s.indices):
                for x in walk(e):
                    if isinstance(x, Select) and tile_loop():
                        conditional(x, inner, unknown)
                        if selects is not None:
                            selects.add(id(x))
        for ch in s.children():
            go(ch, inner, unknown)

    def conditional(node, inner, unknown):
        for c in _conjuncts(node.cond):
            vs = set(free_vars(c))
            if vs & unknown or not vs & set(inner):
                continue
            p = _whole_tile_predicate(c, inner, {**ranges, **inner})
            if p is None:
                continue
            if isinstance(p, Const):
                if p.value:
                    always.add((id(node), _key(c)))
            elif any(v is var for v in free_vars(p)) and _can_hold(p, var, ranges):
                found[(id(node), _key(c))] = p

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
    if isinstance(s, Store):
        value = _drop_selects(s.value, keys)
        indices = tuple(_drop_selects(i, keys) for i in s.indices)
        if value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            return s
        return Store(s.buffer, indices, value)
    if isinstance(s, Seq):
        items = [_drop(c, keys) for c in s.stmts]
        return s if all(a is b for a, b in zip(items, s.stmts)) else Seq(items)
    return s


def _can_hold(p, var, ranges: dict) -> bool:
    """Whether ``p`` (``x < 0`` or ``x <= 0``) may hold for some value of ``var`` in its range
    (the other variables symbolic); True when that is not known."""
    if var not in ranges:
        return True
    r = bound(p.a, {var: ranges[var]}, ranges)
    if r is None or not isinstance(r[0], Const):
        return True
    lo = r[0].value
    return lo < 0 or (lo == 0 and p.op is BinOpKind.LE)


def _drop_selects(e, keys: set):
    """``e`` with the select conjuncts named by ``keys`` dropped (a select left without any takes
    its true branch)."""
    def fix(x):
        if not isinstance(x, Select):
            return None
        conds = _conjuncts(x.cond)
        keep = [c for c in conds if (id(x), _key(c)) not in keys]
        if len(keep) == len(conds):
            return None  # kept whole: transform goes on into its branches
        t = transform(x.t, fix)
        return t if not keep else select(_and(keep), t, transform(x.f, fix))
    return transform(e, fix)


def _visit(s: Stmt, ranges: dict, depth: int) -> Stmt:
    if isinstance(s, For):
        known = isinstance(s.begin, Const) and isinstance(s.extent, Const)
        inner_ranges = ranges
        if known:
            lo = int(s.begin.value)
            inner_ranges = {**ranges, s.var: (lo, lo + int(s.extent.value) - 1)}
        body = s.body
        # below a version, a loop of one iteration splits nothing: its version repeats the one
        # above (a tail tile's guarded copy re-versioned at each unit tile loop and spent the
        # depth before the loop that splits the tail's whole vectors from its last one)
        unit = known and int(s.extent.value) == 1 and depth > 0
        if s.kind in _VERSIONED and not unit:
            sel = set()  # a serial loop sees the selects too: it may split at them (_split)
            found, always = _guards(body, s.var, inner_ranges, True, sel)
            if s.kind is ForKind.SERIAL:
                if known and depth < MAX_VERSION_DEPTH:
                    pieces = _split(s, found, always, sel)
                    if pieces is not None:
                        return Seq([_visit(x, ranges, depth + 1) for x in pieces])
                found = {k: p for k, p in found.items() if k[0] not in sel}  # see _guards
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


def _split(s: For, found: dict, always: set, sel: set):
    """``s`` (a serial loop of constant bounds; ``found``, ``always`` and ``sel`` its guards, as
    :func:`_guards` gives them) as up to three loops over consecutive ranges of its variable when
    the selects of an inlined padding inside it hold on every lane, tap and inner iteration for
    one range of it (the padding's interior): that range's loop without them, the ranges before
    and after it with them (None when there is no such range).

    Why: a select versions only at the parallel loop (:func:`_guards`), so the column loop of a
    padded convolution's row tile (``x.0``, with the vector lanes and the window's taps inside)
    tested the padding on every chunk, masked loads and the branches around them included.
    Split, the tile's interior columns run as one plain loop and the border chunks as loops of
    their own, with nothing tested per iteration."""
    v, lo = s.var, int(s.begin.value)
    hi = lo + int(s.extent.value) - 1
    keys, a, b = set(), lo, hi
    for (nid, ck), p in found.items():
        r = _solve(p, v) if nid in sel else None
        if r is None:
            continue
        keys.add((nid, ck))
        a, b = max(a, r[0]), min(b, r[1])
    if not keys or a > b or (a, b) == (lo, hi):
        return None
    out = []
    for first, last, drop in ((lo, a - 1, always), (a, b, keys | always), (b + 1, hi, always)):
        if first <= last:
            out.append(For(v, Const(first, s.begin.dtype), Const(last - first + 1, s.extent.dtype),
                           s.kind, _drop(s.body, drop), s.thread, s.pragmas))
    return out


def _solve(p, v):
    """The values ``lo <= v <= hi`` of variable ``v`` for which ``p`` (``e < 0`` or ``e <= 0``,
    ``e`` linear in ``v`` alone) holds, as ``(lo, hi)`` (an open end: +-2**62); None when ``e``
    is not such a form."""
    lin = to_linear(p.a)
    if len(lin.terms) != 1:
        return None
    (atom, coef), = lin.terms.values()
    if atom is not v or not coef:
        return None
    k = -lin.const - (1 if p.op is BinOpKind.LT else 0)  # coef * v <= k
    if coef > 0:
        return (-(1 << 62), k // coef)
    return (-((-k) // coef), 1 << 62)
