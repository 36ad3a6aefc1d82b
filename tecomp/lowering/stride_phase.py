"""Stride-phase splitting: a loop whose every iteration but one in ``s`` adds zero iterates only
the ones that do not.

A transposed (or fractionally strided) convolution written as TVM writes it reads its input
through a zero-inserting stage, ``Select((y + ry - p) % s == 0 & ..., x[(y + ry - p) // s], 0)``;
inlined into the convolution, ``s - 1`` of every ``s`` reduction taps multiply a zero. When

- every store inside a loop ``L`` (over ``v``, from 0, of constant extent ``E``) accumulates,
  ``B[i] = B[i] + t`` with ``t`` zero unless a conjunct ``e % s == 0`` of a select holds (``t`` is
  a product, cast or negation with a factor ``Select(c, _, 0)`` whose condition has that conjunct),
- every such ``e``, modulo ``s``, is the same linear form ``a*v + rest`` with ``gcd(a, s) == 1`` and
  ``rest`` a function of the loops outside ``L`` only (no loads, no loop inside ``L``),

the iterations with ``a*v + rest`` not divisible by ``s`` only add zeros. ``L`` becomes
``for v' in [0, ceil(E / s)): v = r0 + s*v'`` with ``r0 = (-rest * a^-1) mod s`` (a guard
``v < E`` when ``s`` does not divide ``E``), and the conjunct, now always true inside, is
dropped. Skipping ``acc + w * 0`` treats the product as an exact zero (as the numpy reference of
the operator does, which never multiplies the inserted zeros), so a non-finite weight at a
skipped tap no longer turns the sum into NaN.

The loop rewritten for a conjunct is the innermost loop whose variable it mentions; it must be a
serial or unrolled loop (a vectorized or thread-bound loop is left alone), so which loops the
rewrite can reach depends on the schedule: the search scores the lowered program, and finds the
tilings (e.g. the output rows' innermost tile of length 1) where the phase is fixed outside a
reduction loop.
"""
from __future__ import annotations

import math

from ..ir import dtype as dt
from ..ir.arith import Linear, from_linear, to_linear
from ..ir.expr import (
    BinOp,
    BinOpKind,
    Cast,
    Const,
    Expr,
    Load,
    Select,
    UnOp,
    UnOpKind,
    Var,
    binary,
    select,
)
from ..ir.loop import (
    Allocate,
    Barrier,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    map_loops,
    stmts,
    with_body,
)
from ..ir.traverse import free_vars, structural_key, substitute, transform, walk

__all__ = ["stride_phase", "stride_phase_func", "phase_conjuncts", "is_zero_insertion", "PhaseForm",
           "conjuncts", "zero_conditions", "accumulated_term", "loop_range", "every_store",
           "map_exprs", "masking_conjuncts", "select_all"]

#: the most loops one function has rewritten (each rewrite removes a conjunct; a bound against
#: pathological programs)
MAX_REWRITES = 16


class PhaseForm:
    """``e mod s`` of a conjunct ``e % s == 0``, as a linear form: ``{key: (atom, coef mod s)}``
    plus a constant mod ``s``; two conjuncts with equal forms hold for the same values."""

    __slots__ = ("modulus", "terms", "const")

    def __init__(self, modulus: int, lin: Linear, ranges: dict):
        self.modulus = s = modulus
        self.terms = {}
        for k, (atom, c) in lin.terms.items():
            if c % s == 0 or isinstance(atom, Var) and ranges.get(atom) == (0, 0):
                continue  # a multiple of s, or a loop of one iteration: adds nothing mod s
            self.terms[k] = (atom, c % s)
        self.const = lin.const % s

    @property
    def key(self) -> tuple:
        return (self.modulus, self.const, tuple(sorted((k, c) for k, (_, c) in self.terms.items())))

    def vars(self) -> set:
        return {v for atom, _ in self.terms.values() for v in free_vars(atom)}


def select_all(conds: list, t: Expr, f: Expr) -> Expr:
    """``t`` where every condition of ``conds`` holds, else ``f`` (``t`` when there is none)."""
    if not conds:
        return t
    cond = conds[0]
    for c in conds[1:]:
        cond = binary(BinOpKind.AND, cond, c)
    return select(cond, t, f)


def conjuncts(c: Expr) -> list:
    """The conjuncts of ``a & b & ...`` (``[c]`` for any other condition)."""
    if isinstance(c, BinOp) and c.op is BinOpKind.AND:
        return conjuncts(c.a) + conjuncts(c.b)
    return [c]


def _divisibility(c: Expr):
    """``(e, s)`` when ``c`` is ``e % s == 0`` (either side) with a constant ``s >= 2``."""
    if not (isinstance(c, BinOp) and c.op is BinOpKind.EQ):
        return None
    for m, z in ((c.a, c.b), (c.b, c.a)):
        if isinstance(z, Const) and z.value == 0 and isinstance(m, BinOp) \
                and m.op is BinOpKind.MOD and isinstance(m.b, Const) and m.b.dtype.is_int \
                and m.b.value >= 2 and m.a.dtype is dt.INDEX:
            return m.a, int(m.b.value)
    return None


def phase_conjuncts(cond: Expr) -> list:
    """The ``(e, s)`` of every conjunct ``e % s == 0`` (``s >= 2``) of a condition."""
    return [d for d in map(_divisibility, conjuncts(cond)) if d is not None]


def is_zero_insertion(body: Expr) -> bool:
    """Whether an elementwise body is ``Select(c, x, 0)`` with a divisibility conjunct in ``c``
    (an input dilated by a stride: the zero-inserting stage of a transposed convolution)."""
    return isinstance(body, Select) and _is_zero(body.f) and bool(phase_conjuncts(body.cond))


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def zero_conditions(e: Expr) -> list:
    """Conditions ``c`` such that ``e`` is zero whenever ``c`` is false."""
    if isinstance(e, Select):
        out = zero_conditions(e.t)
        if _is_zero(e.f):
            out = conjuncts(e.cond) + out
        return out
    if isinstance(e, BinOp) and e.op is BinOpKind.MUL:
        return zero_conditions(e.a) + zero_conditions(e.b)
    if isinstance(e, Cast) or isinstance(e, UnOp) and e.op is UnOpKind.NEG:
        return zero_conditions(e.a)
    return []


def accumulated_term(s: Store):
    """``t`` of an accumulation ``B[i] = B[i] + t``, else None."""
    v = s.value
    if not (isinstance(v, BinOp) and v.op is BinOpKind.ADD):
        return None
    key = tuple(structural_key(i, id) for i in s.indices)
    for acc, t in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, Load) and acc.buffer is s.buffer \
                and tuple(structural_key(i, id) for i in acc.indices) == key:
            return t
    return None


def masking_conjuncts(s: Store) -> list:
    """The conjuncts ``c`` such that the store is an accumulation ``B[i] = B[i] + t`` whose ``t``
    is zero whenever ``c`` is false (empty: not an accumulation)."""
    t = accumulated_term(s)
    return [] if t is None else zero_conditions(t)


def _forms(s: Store, ranges: dict) -> list:
    """The phase forms of a store's addend's zero conditions (empty: not an accumulation)."""
    return [PhaseForm(d[1], to_linear(d[0], ranges), ranges)
            for d in map(_divisibility, masking_conjuncts(s)) if d is not None]


def loop_range(loop: For):
    """``(first, last)`` of a loop of constant begin and extent, else None."""
    if isinstance(loop.begin, Const) and isinstance(loop.extent, Const):
        b = int(loop.begin.value)
        return (b, b + int(loop.extent.value) - 1)
    return None


# ----------------------------------------------------------------------------- the analysis

def _find(stmt: Stmt):
    """The first ``(loop, form)`` that can be rewritten, or None."""
    def go(s, loops, ranges):
        if isinstance(s, For):
            r = loop_range(s)
            inner = {**ranges, s.var: r} if r is not None else ranges
            return go(s.body, loops + [s], inner)
        if isinstance(s, Store):
            for form in _forms(s, ranges):
                hit = _candidate(form, loops, ranges)
                if hit is not None:
                    return hit
            return None
        for c in s.children():
            hit = go(c, loops, ranges)
            if hit is not None:
                return hit
        return None
    return go(stmt, [], {})


def _candidate(form: PhaseForm, loops: list, ranges: dict):
    """The loop ``form`` can be rewritten at (checked over its whole body), or None."""
    used = form.vars()
    pos = max((k for k, lp in enumerate(loops) if lp.var in used), default=None)
    if pos is None:
        return None
    loop = loops[pos]
    v, outside = loop.var, {lp.var for lp in loops[:pos]}
    coef = None
    for atom, c in form.terms.values():
        if atom is v:
            coef = c
        elif any(x is v for x in walk(atom)) or any(isinstance(x, Load) for x in walk(atom)) \
                or not all(u in outside for u in free_vars(atom)):
            return None  # v non-linearly, a loaded value, or a loop inside L in the phase
    if coef is None or math.gcd(coef, form.modulus) != 1:
        return None
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not _zero_begin(loop) \
            or not isinstance(loop.extent, Const):
        return None
    outer = {u: r for u, r in ranges.items() if u in outside}
    if r := loop_range(loop):
        outer[v] = r
    return (loop, form) if _all_skippable(loop.body, form, outer) else None


def _zero_begin(loop: For) -> bool:
    return isinstance(loop.begin, Const) and loop.begin.value == 0


def _all_skippable(body: Stmt, form: PhaseForm, ranges: dict) -> bool:
    """Every store under ``body`` adds zero unless ``form`` is divisible; nothing else writes."""
    key = form.key
    return every_store(body, lambda s, r: any(f.key == key for f in _forms(s, r)), ranges)


def every_store(body: Stmt, pred, ranges: dict) -> bool:
    """Whether ``pred(store, ranges)`` holds for every store under ``body`` (``ranges``: the
    constant ranges of the loops around each) and nothing else there writes or synchronizes."""
    def go(s, ranges):
        if isinstance(s, For):
            r = loop_range(s)
            return go(s.body, {**ranges, s.var: r} if r is not None else ranges)
        if isinstance(s, Store):
            return pred(s, ranges)
        if isinstance(s, Barrier):
            return False
        if isinstance(s, (Seq, IfThenElse, Allocate)):
            return all(go(c, ranges) for c in s.children())
        return False
    return go(body, ranges)


# ----------------------------------------------------------------------------- the rewrite

def map_exprs(s: Stmt, fn, ranges: dict) -> Stmt:
    """Rebuild ``s`` with ``fn(expr, ranges)`` applied to every expression it holds (``ranges``:
    the constant ranges of the loops around it, extended at each loop)."""
    if isinstance(s, For):
        r = loop_range(s)
        inner = {**ranges, s.var: r} if r is not None else ranges
        return For(s.var, fn(s.begin, ranges), fn(s.extent, ranges), s.kind,
                   map_exprs(s.body, fn, inner), s.thread, s.pragmas)
    if isinstance(s, Store):
        return Store(s.buffer, tuple(fn(i, ranges) for i in s.indices), fn(s.value, ranges))
    if isinstance(s, IfThenElse):
        return IfThenElse(fn(s.cond, ranges), map_exprs(s.then, fn, ranges),
                          None if s.else_ is None else map_exprs(s.else_, fn, ranges))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, map_exprs(s.body, fn, ranges))
    if isinstance(s, Seq):
        return Seq([map_exprs(c, fn, ranges) for c in s.stmts])
    return s


def _drop_conjunct(key: tuple):
    """An expression map that drops every conjunct ``e % s == 0`` of phase ``key`` from select
    conditions (inside the rewritten loop it always holds)."""
    def fn(e, ranges):
        def sel(x):
            if not isinstance(x, Select):
                return None
            kept, dropped = [], False
            for c in conjuncts(x.cond):
                d = _divisibility(c)
                if d is not None and PhaseForm(d[1], to_linear(d[0], ranges), ranges).key == key:
                    dropped = True
                else:
                    kept.append(c)
            t, f = transform(x.t, sel), transform(x.f, sel)
            if not dropped:
                return select(transform(x.cond, sel), t, f)
            return select_all(kept, t, f)
        return transform(e, sel)
    return fn


def _rewrite(stmt: Stmt, loop: For, form: PhaseForm, ranges_at: dict) -> Stmt:
    s = form.modulus
    v = loop.var
    coef = next(c for atom, c in form.terms.values() if atom is v)
    inv = pow(coef, -1, s)
    rest = Linear({k: [atom, c] for k, (atom, c) in form.terms.items() if atom is not v},
                  form.const)
    r0 = binary(BinOpKind.MOD, binary(BinOpKind.MUL, from_linear(rest), (-inv) % s), s)
    nv = Var(f"{v.name}.ph", v.dtype)
    new_v = binary(BinOpKind.ADD, r0, binary(BinOpKind.MUL, nv, s))
    extent = int(loop.extent.value)
    body = map_exprs(loop.body, _drop_conjunct(form.key), ranges_at)
    body = map_exprs(body, lambda e, _r: substitute(e, {v: new_v}), {})
    if extent % s:
        body = IfThenElse(binary(BinOpKind.LT, new_v, extent), body)
    return For(nv, Const(0, dt.INDEX), Const(-(-extent // s), dt.INDEX), loop.kind, body,
               loop.thread, loop.pragmas)


def _replace(stmt: Stmt, loop: For, form: PhaseForm, ranges: dict) -> Stmt:
    def on_for(s):
        r = loop_range(s)
        inner = {**ranges, s.var: r} if r is not None else ranges
        if s is loop:
            return _rewrite(s, loop, form, inner)
        return with_body(s, _replace(s.body, loop, form, inner))
    return map_loops(stmt, on_for)


def _has_phase(stmt: Stmt) -> bool:
    """Cheap pre-check: some store's value has a select with a divisibility conjunct."""
    for s in stmts(stmt):
        if isinstance(s, Store):
            for x in walk(s.value):
                if isinstance(x, Select) and phase_conjuncts(x.cond):
                    return True
    return False


def stride_phase(body: Stmt) -> Stmt:
    """Rewrite every loop that only some stride phase of its iterations contributes to (see the
    module's docstring); ``body`` unchanged when there is none."""
    if not _has_phase(body):
        return body
    for _ in range(MAX_REWRITES):
        hit = _find(body)
        if hit is None:
            break
        body = _replace(body, hit[0], hit[1], {})
    return body


def stride_phase_func(func: PrimFunc) -> PrimFunc:
    """:func:`stride_phase` on a function's body."""
    body = stride_phase(func.body)
    if body is func.body:
        return func
    return PrimFunc(func.name, func.params, body, func.n_outputs)
