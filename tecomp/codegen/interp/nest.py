"""Vectorized loop nests (CPU): which nests may run as numpy operations, and their code.

A perfect loop nest around one (possibly guarded) store, with bounds that do not depend on the
nest, runs as numpy operations over all its iterations at once (each loop variable an array over
the flattened nest) when that provably gives the result of running it in order:

* a *map*: the stored location is affine in the loop variables and, by a mixed-radix check of the
  coefficients against the trip counts, different iterations store different elements; the stored
  buffer is read only at the stored element (the same iteration's);
* a *reduction* ``acc[I] = acc[I] op f`` (op in +, -, *, min, max; ``f`` does not read ``acc``):
  the loops ``I`` depends on form a map as above, the others the reduction; the values ``f`` are
  computed as one array and folded into each element in the loops' order with ``ufunc.accumulate``,
  which rounds exactly like the sequential loop (iterations a guard skips contribute the identity:
  ``-0.0`` for +, which leaves every value unchanged).

Otherwise (or when the nest has too few or too many iterations) the loops run serially.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtype as dt
from ...ir.evaluate import NP_BINARY
from ...ir.expr import BinOp, BinOpKind, Const, Expr, Load, UnOp, UnOpKind, Var
from ...ir.loop import For, ForKind, IfThenElse, Stmt, Store
from ...ir.traverse import structural_key, walk
from .exprs import py_tuple

# Reductions folded with ufunc.accumulate -> whether the op is commutative (the accumulator may be
# either operand).
_REDUCE_COMMUTES = {BinOpKind.ADD: True, BinOpKind.SUB: False, BinOpKind.MUL: True,
                    BinOpKind.MIN: True, BinOpKind.MAX: True}


def _strip_guards(s: Stmt):
    """``if a: if b: store`` -> ([a, b], store), or None when ``s`` is not of that form."""
    conds = []
    while isinstance(s, IfThenElse) and s.else_ is None:
        conds.append(s.cond)
        s = s.then
    return (conds, s) if isinstance(s, Store) else None


def _loads_of(e: Expr, buf) -> list:
    return [x for x in walk(e) if isinstance(x, Load) and x.buffer is buf]


def _linear_coef(e: Expr, v: Var):
    """The coefficient of ``v`` when ``e`` is ``c * v + rest`` (rest free of ``v``, c a constant
    int), else None."""
    if not any(x is v for x in walk(e)):
        return 0
    if e is v:
        return 1
    if isinstance(e, BinOp) and e.dtype.is_int:
        if e.op in (BinOpKind.ADD, BinOpKind.SUB):
            a, b = _linear_coef(e.a, v), _linear_coef(e.b, v)
            if a is None or b is None:
                return None
            return a + b if e.op is BinOpKind.ADD else a - b
        if e.op is BinOpKind.MUL:
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Const):
                    c = _linear_coef(x, v)
                    return None if c is None else c * y.value
        return None
    if isinstance(e, UnOp) and e.op is UnOpKind.NEG and e.dtype.is_int:
        c = _linear_coef(e.a, v)
        return None if c is None else -c
    return None


def _identity(op: BinOpKind, t: dt.DType):
    """The value ``x`` with ``acc op x == acc`` exactly for every ``acc`` (IEEE: -0.0 for +)."""
    if op is BinOpKind.ADD:
        return -0.0 if t.is_float else 0
    if op is BinOpKind.SUB:
        return 0.0 if t.is_float else 0
    if op is BinOpKind.MUL:
        return 1.0 if t.is_float else 1
    if t.is_bool:
        return op is BinOpKind.MIN
    if t.is_float:
        return float("inf") if op is BinOpKind.MIN else float("-inf")
    info = np.iinfo(t.np)
    return int(info.max) if op is BinOpKind.MIN else int(info.min)


def _same_index(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    return all(structural_key(x, id) == structural_key(y, id) for x, y in zip(a, b))


def nest_plan(s: For):
    """A plan to run the perfect loop nest rooted at ``s`` (loops around one guarded store) as
    numpy operations over all its iterations, when that provably gives the result of running it
    in order; else None. Kinds: "map" (every iteration stores its own element, the stored
    buffer is only read at the stored element) and "reduce" (``acc[I] = acc[I] op f``, the
    loops ``I`` does not depend on form the reduction, ``f`` does not read ``acc``)."""
    loops, body = [s], s.body
    while isinstance(body, For) and body.kind is not ForKind.THREAD_BOUND:
        loops.append(body)
        body = body.body
    if any(lp.var.dtype is not dt.INDEX for lp in loops):
        return None
    g = _strip_guards(body)
    if g is None:
        return None
    conds, st = g
    buf = st.buffer
    nest_vars = {id(lp.var) for lp in loops}
    for lp in loops[1:]:  # rectangular: inner bounds do not depend on the nest
        for e in (lp.begin, lp.extent):
            if any(isinstance(x, Var) and id(x) in nest_vars for x in walk(e)) or _loads_of(e, buf):
                return None
    if any(_loads_of(i, buf) for i in st.indices) or any(_loads_of(c, buf) for c in conds):
        return None
    coefs = []  # per loop: coefficient of its variable in each index
    for lp in loops:
        cs = [_linear_coef(i, lp.var) for i in st.indices]
        if any(c is None for c in cs):
            return None
        coefs.append(cs)
    flat = [sum(c * stride for c, stride in zip(cs, buf.strides)) for cs in coefs]
    map_loops = [d for d, cs in enumerate(coefs) if any(cs)]
    red_loops = [d for d, cs in enumerate(coefs) if not any(cs)]
    if any(flat[d] == 0 for d in map_loops):
        return None
    plan = {"loops": loops, "conds": conds, "store": st, "map": map_loops,
            "coefs": tuple(flat[d] for d in map_loops)}
    if not red_loops:
        for ld in _loads_of(st.value, buf):
            if not _same_index(ld.indices, st.indices):
                return None
        return dict(plan, kind="map")
    val = st.value
    if not isinstance(val, BinOp) or val.op not in _REDUCE_COMMUTES:
        return None
    for acc, f in [(val.a, val.b)] + ([(val.b, val.a)] if _REDUCE_COMMUTES[val.op] else []):
        if (isinstance(acc, Load) and acc.buffer is buf and _same_index(acc.indices, st.indices)
                and not _loads_of(f, buf)):
            return dict(plan, kind="reduce", op=val.op, value=f,
                        perm=tuple(map_loops + red_loops))
    return None


class NestGen:
    """Code generation of a vectorized nest (a mixin of the generator)."""

    def vector_nest(self, plan, b0: str, n0: str) -> None:
        """Emit ``if <the nest may run vectorized>: <vectorized nest>`` (the caller adds the
        ``else``)."""
        loops = plan["loops"]
        bs, ns = [b0], [n0]
        ok = self.fresh("ok")
        if len(loops) > 1:
            self.emit(f"{ok} = False")
        for lp in loops[1:]:  # inner bounds, evaluated only where the serial code would
            self.emit(f"if {ns[-1]} > 0:")
            self.ind += 1
            b, n = self.fresh("b"), self.fresh("n")
            self.emit(f"{b} = {self.ex(lp.begin)}")
            self.emit(f"{n} = {self.ex(lp.extent)}")
            bs.append(b)
            ns.append(n)
        min_trip, max_trip = self.vector_trips
        check = f"_nest_ok({py_tuple(ns)}, None, {min_trip}, {max_trip})"
        if plan["map"]:  # the map loops must store distinct elements
            check += (f" and _nest_ok({py_tuple(ns[d] for d in plan['map'])}, {plan['coefs']!r}, "
                      f"0, 1 << 62)")
        if len(loops) > 1:
            self.emit(f"{ok} = {check}")
            self.ind -= len(loops) - 1
            self.emit(f"if {ok}:")
        else:
            self.emit(f"if {check}:")
        self.ind += 1
        for lp in loops[1:]:
            self.set_range(lp.var, lp.begin, lp.extent)
        grid = self.fresh("g")
        total = self.fresh("N")
        self.emit(f"{grid} = _grid({py_tuple(ns)})")
        self.emit(f"{total} = {grid}[0].size")
        for d, lp in enumerate(loops):
            self.emit(f"{self.var_name(lp.var)} = {bs[d]} + {grid}[{d}]")
            self.bound.add(id(lp.var))
        saved = (self.lanes, self.varying, self.mask, self.lane_shape)
        self.lanes, self.mask, self.lane_shape = True, None, f"({total},)"
        self.varying = {lp.var for lp in loops}
        try:
            if plan["kind"] == "map":
                self.stmt(loops[-1].body)
            else:
                self.reduce_store(plan, ns, total)
        finally:
            self.lanes, self.varying, self.mask, self.lane_shape = saved
            for lp in loops[1:]:
                self.ranges.pop(lp.var, None)
                self.bound.discard(id(lp.var))
            self.ind -= 1

    def reduce_store(self, plan, ns: list, total: str) -> None:
        """The guarded ``acc[I] = acc[I] op f`` of a reduction nest, as one ``_reduce_nest``."""
        st = plan["store"]
        for c in plan["conds"]:
            self._vmemo = {}
            cond = self.ex(c)
            m = self.fresh("m")
            if self.is_varying(c):
                self.emit(f"{m} = {cond}" if self.mask is None else f"{m} = {self.mask} & {cond}")
            else:  # uniform: all iterations or none
                self.emit(f"{m} = np.full({total}, bool({cond}))" if self.mask is None
                          else f"{m} = {self.mask} & bool({cond})")
            self.mask = m
        self._vmemo = {}
        vals = self.fresh("vals")
        self.emit(f"{vals} = {self.ex(plan['value'])}")
        name, lead = self.buf(st.buffer)
        assert lead is None
        idx = [self.ex(i) for i in st.indices]
        t = st.buffer.dtype
        ident = _identity(plan["op"], t)
        self.emit(f"_reduce_nest({name}, {st.buffer.name!r}, {self.fn_name(NP_BINARY[plan['op']])}, "
                  f"{py_tuple(idx)}, {self.checks(st.buffer, st.indices)!r}, {vals}, {self.mask}, "
                  f"{py_tuple(ns)}, {plan['perm']!r}, {len(plan['map'])}, "
                  f"{self.np_type(t)}, {self.const_name(ident, t) if not t.is_bool else ident})")
