"""Zero-region trimming: a reduction loop whose iterations past a linear bound only add zeros
stops at the bound.

A lower-triangular matmul written as ``sum_k Select(k <= i, A[i, k], 0) * B[k, j]``, a causal
mask on attention probabilities, or a cumulative sum ``sum_k Select(k <= i, x[k], 0)`` adds
zeros for half its points. When

- every store inside a serial loop ``L`` (over ``v``, of constant range) accumulates,
  ``B[i] = B[i] + t`` with ``t`` zero unless a conjunct ``a <= b`` (or ``<``, ``>=``, ``>``) of a
  select holds (:func:`~.stride_phase.zero_conditions`), the same linear bound ``c*v + M <= 0``
  in every store,
- ``M``'s terms are loops outside ``L`` (any linear or non-linear form of them, no loads) and
  loops inside ``L`` of constant range (linearly),

then an iteration of ``v`` adds anything only if ``c*v + min(M) <= 0`` for the smallest ``M``
the inner loops reach; ``L``'s range is cut to those iterations (its bound an expression of the
outer loops), and the select stays for the iterations on the boundary. An upper and a lower
bound (a band, ``i - w <= k <= i + w``) cut both ends. A cut that would skip less than
:data:`MIN_SKIPPED` of ``L`` on average is not made. Skipping ``acc + x * 0``
treats the product as an exact zero, as the numpy reference (``np.tril(a) @ b``) does.

Only the outermost such loop of a nest is cut: that skips the whole tiles past the bound, and the
loops inside keep their constant ranges, which LLVM unrolls into a register tile (a register
tile's row loop cut to a variable range would keep its accumulators in memory); the tiles on
the boundary keep their selects.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt
from ..ir.arith import Linear, bound, from_linear, to_linear
from ..ir.expr import BinOp, BinOpKind, Const, Load, Select, Var, binary
from ..ir.loop import For, ForKind, PrimFunc, Seq, Stmt, Store, map_loops, stmts, with_body
from ..ir.traverse import free_vars, transform, walk
from .stride_phase import (
    conjuncts,
    every_store,
    loop_range,
    map_exprs,
    masking_conjuncts,
    select_all,
)

__all__ = ["zero_trim", "zero_trim_func", "bound_form", "MIN_SKIPPED"]

#: the least share of a loop's iterations, averaged over the loops outside it, that a cut must
#: skip. A triangle skips half; a padded convolution's taps past the image border are a few
#: percent of its reduction (1/3 of the taps on 2 of 56 rows), where a cut would only turn the
#: tap loop's constant range, which LLVM unrolls, into a variable one.
MIN_SKIPPED = 0.25

_FLIP = {BinOpKind.LE: (False, 0), BinOpKind.LT: (False, 1),
         BinOpKind.GE: (True, 0), BinOpKind.GT: (True, 1)}


def bound_form(c, ranges: dict) -> Linear | None:
    """``L`` with ``c`` true exactly when ``L <= 0``, for a comparison of index expressions."""
    if not isinstance(c, BinOp) or c.op not in _FLIP or c.a.dtype is not dt.INDEX \
            or c.b.dtype is not dt.INDEX:
        return None
    flip, strict = _FLIP[c.op]
    lo, hi = (c.b, c.a) if flip else (c.a, c.b)
    form = to_linear(lo, ranges).add(to_linear(hi, ranges), -1)
    form.const += strict
    return form


def _key(form: Linear) -> tuple:
    return (form.const, tuple(sorted((k, c) for k, (_, c) in form.terms.items())))


def _forms(s: Store, ranges: dict) -> list:
    """The bound forms of a store's addend's zero conditions (empty: not an accumulation)."""
    return [f for f in (bound_form(c, ranges) for c in masking_conjuncts(s)) if f is not None]


def _common_forms(body: Stmt) -> dict:
    """Key -> bound form, of the bounds every store under ``body`` masks its addend with (in
    the first store's order); empty when some store has none or something else writes there."""
    common = None

    def pred(s, _ranges):
        nonlocal common
        keys = {_key(f): f for f in _forms(s, {})}
        common = keys if common is None else {k: f for k, f in common.items() if k in keys}
        return bool(common)
    return common if every_store(body, pred, {}) and common else {}


def _inner_ranges(body: Stmt) -> dict:
    """Loop variable -> constant range (or None) of every loop under ``body``."""
    return {s.var: loop_range(s) for s in stmts(body) if isinstance(s, For)}


def _skipped(c: int, m_range, lo: int, hi: int) -> float:
    """The mean share of ``v in [lo, hi]`` with ``c*v + m > 0`` for ``m`` evenly over
    ``m_range`` (counted per ``m``: the iterations kept are a run from one end)."""
    m = np.unique(np.linspace(m_range[0], m_range[1], 4097).round().astype(np.int64))
    if c > 0:   # kept: v <= floor(-m / c)
        kept = (-m) // c - lo + 1
    else:       # kept: v >= ceil(m / -c)
        kept = hi + 1 + (-m) // -c
    return 1.0 - float(np.clip(kept, 0, hi - lo + 1).mean()) / (hi - lo + 1)


def _new_range(loop: For, form: Linear, outside: dict, inner: dict):
    """``(upper, some, every)``: ``form <= 0`` bounds ``loop`` from above (``upper``) or below,
    at ``some`` for the iterations where some inner iteration adds, at ``every`` where every one
    does; None when there is no bound or it skips less than :data:`MIN_SKIPPED`. ``outside``:
    the loops around ``loop`` (variable -> constant range or None)."""
    v = loop.var
    c, rest, low, high = 0, Linear(), 0, 0
    for k, (atom, coef) in form.terms.items():
        if atom is v:
            c = coef
        elif isinstance(atom, Var) and atom in inner:
            r = inner[atom]
            if r is None:
                return None
            low += coef * (r[0] if coef > 0 else r[1])
            high += coef * (r[1] if coef > 0 else r[0])
        elif any(isinstance(x, Load) for x in walk(atom)) \
                or not all(u in outside for u in free_vars(atom)):
            return None   # a loaded value, v non-linearly or an inner loop in a non-linear term
        else:
            rest.terms[k] = [atom, coef]
    if c == 0:
        return None
    lo, hi = loop_range(loop)
    some = rest.add(Linear(const=form.const + low))    # c*v + some <= 0: some iteration adds
    every = rest.add(Linear(const=form.const + high))  # c*v + every <= 0: every iteration does
    m_range = bound(from_linear(some), {u: r for u, r in outside.items() if r is not None})
    if m_range is None or not all(isinstance(x, Const) for x in m_range) \
            or _skipped(c, (int(m_range[0].value), int(m_range[1].value)), lo, hi) < MIN_SKIPPED:
        return None
    if c > 0:  # v <= floor(-m / c): the iterations up to this bound
        def last(m):
            return binary(BinOpKind.ADD, binary(BinOpKind.FLOORDIV, from_linear(m.scale(-1)), c), 1)
        return True, last(some), last(every)
    d = -c  # v >= ceil(m / d): the iterations from this bound

    def start(m):
        return binary(BinOpKind.FLOORDIV, from_linear(m.add(Linear(const=d - 1))), d)
    return False, start(some), start(every)


def _clamp(e, a, b):
    return binary(BinOpKind.MIN, b, binary(BinOpKind.MAX, a, e))


def _parts(loop: For, upper, lower) -> list:
    """``[(begin, end, masked)]`` of a loop cut by an upper and/or a lower bound (each
    ``(some, every)``: where some / every inner iteration adds), clamped into each other: the
    boundary below, the part where both hold throughout (no select needed), the boundary above."""
    lo, hi = loop_range(loop)
    first, stop = Const(lo, dt.INDEX), Const(hi + 1, dt.INDEX)
    begin = first if lower is None else _clamp(lower[0], first, stop)
    end = stop if upper is None else _clamp(upper[0], begin, stop)
    whole_b = begin if lower is None else _clamp(lower[1], begin, end)
    whole_e = end if upper is None else _clamp(upper[1], whole_b, end)
    parts = [(begin, whole_b, True)] if lower is not None else []
    parts.append((whole_b, whole_e, False))
    return parts + ([(whole_e, end, True)] if upper is not None else [])


def _without(body: Stmt, keys: list) -> Stmt:
    """``body`` with the conjuncts of the bounds ``keys`` dropped from its selects (they hold
    there)."""
    def sel(x):
        if not isinstance(x, Select):
            return None
        keep = [c for c in conjuncts(x.cond)
                if (f := bound_form(c, {})) is None or _key(f) not in keys]
        return select_all(keep, transform(x.t, sel), transform(x.f, sel))
    return map_exprs(body, lambda e, _r: transform(e, sel), {})


def _trim_loop(loop: For, outside: dict):
    """``loop`` cut and split (its whole part without the bound's selects), or None when no
    bound applies to it."""
    if loop.kind is not ForKind.SERIAL or loop_range(loop) is None:
        return None
    forms = _common_forms(loop.body)
    if not forms:
        return None
    inner = _inner_ranges(loop.body)
    bounds, keys = {}, []   # upper (True) / lower (False) -> (some, every): the first of each
    for key, form in forms.items():
        cut = _new_range(loop, form, outside, inner)
        if cut is not None and cut[0] not in bounds:
            bounds[cut[0]] = cut[1:]
            keys.append(key)
    if not bounds:
        return None
    plain = _without(loop.body, keys)
    return Seq([For(loop.var, b, binary(BinOpKind.SUB, e, b), loop.kind,
                    loop.body if masked else plain, loop.thread, loop.pragmas)
                for b, e, masked in _parts(loop, bounds.get(True), bounds.get(False))])


def _walk(s: Stmt, outside: dict) -> Stmt:
    def on_for(loop):
        cut = _trim_loop(loop, outside)
        if cut is not None:
            return cut  # (its inner loops keep constant ranges: see the module's docstring)
        return with_body(loop, _walk(loop.body, {**outside, loop.var: loop_range(loop)}))
    return map_loops(s, on_for)


def _has_bound(stmt: Stmt) -> bool:
    """Cheap pre-check: some accumulation's addend is zero outside a comparison."""
    return any(isinstance(c, BinOp) and c.op in _FLIP for s in stmts(stmt)
               if isinstance(s, Store) for c in masking_conjuncts(s))


def zero_trim(body: Stmt) -> Stmt:
    """Cut every serial loop whose iterations past a linear bound only add zeros (see the
    module's docstring); ``body`` unchanged when there is none."""
    return _walk(body, {}) if _has_bound(body) else body


def zero_trim_func(func: PrimFunc) -> PrimFunc:
    """:func:`zero_trim` on a function's body."""
    body = zero_trim(func.body)
    return func if body is func.body else PrimFunc(func.name, func.params, body, func.n_outputs)
