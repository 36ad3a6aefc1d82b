"""Integer index arithmetic: linear canonical forms and range-aware simplification.

Splits, fuses and bound inference produce index expressions like ``(io * 32 + ii) // 32``; the
simplifier turns them back into ``io`` when ``ii`` is known to lie in ``[0, 31]``, so that loop
extents of attached stages become constants and inner loops keep unit-stride, division-free
indices that vectorize.
"""
from __future__ import annotations

from .dtype import INDEX
from .expr import BinOp, BinOpKind, Cast, Const, Expr, UnOp, UnOpKind, Var, binary
from .interval import interval
from .traverse import simplify, structural_key

__all__ = ["Linear", "to_linear", "from_linear", "simplify_index", "bound", "merge_fused_dims"]


class Linear:
    """``sum(coef * atom) + const`` over int64 atoms (variables or non-linear sub-expressions)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const: int = 0):
        self.terms = dict(terms or {})  # key -> [atom, coef]
        self.const = const

    def add(self, other: "Linear", scale: int = 1) -> "Linear":
        out = Linear({k: list(v) for k, v in self.terms.items()}, self.const + scale * other.const)
        for k, (atom, c) in other.terms.items():
            if k in out.terms:
                out.terms[k][1] += scale * c
                if out.terms[k][1] == 0:
                    del out.terms[k]
            elif c:
                out.terms[k] = [atom, scale * c]
        return out

    def scale(self, s: int) -> "Linear":
        if s == 0:
            return Linear()
        return Linear({k: [a, c * s] for k, (a, c) in self.terms.items()}, self.const * s)

    @property
    def is_const(self) -> bool:
        return not self.terms


def _key(e: Expr):
    return structural_key(e, id)


def _atom(e: Expr) -> Linear:
    return Linear({_key(e): [e, 1]}, 0)


def to_linear(e: Expr, ranges: dict | None = None) -> Linear:
    """Canonical linear form of an int64 expression (non-linear parts simplified and kept as atoms)."""
    ranges = ranges or {}
    if isinstance(e, Const):
        return Linear(const=int(e.value))
    if isinstance(e, Var):
        return _atom(e)
    if isinstance(e, Cast) and e.dtype is INDEX and e.a.dtype.is_int:
        inner = simplify_index(e.a, ranges) if e.a.dtype is INDEX else e.a
        return to_linear(inner, ranges) if e.a.dtype is INDEX else _atom(Cast(INDEX, inner))
    if isinstance(e, UnOp) and e.op is UnOpKind.NEG:
        return to_linear(e.a, ranges).scale(-1)
    if isinstance(e, BinOp) and e.dtype is INDEX:
        op = e.op
        if op in (BinOpKind.ADD, BinOpKind.SUB):
            return _merge_divmod(to_linear(e.a, ranges).add(to_linear(e.b, ranges),
                                                            1 if op is BinOpKind.ADD else -1),
                                 ranges)
        if op is BinOpKind.MUL:
            a, b = to_linear(e.a, ranges), to_linear(e.b, ranges)
            if b.is_const:
                return a.scale(b.const)
            if a.is_const:
                return b.scale(a.const)
            return _atom(binary(op, from_linear(a), from_linear(b)))
        if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
            return _divmod(op, to_linear(e.a, ranges), to_linear(e.b, ranges), ranges)
        if op in (BinOpKind.MIN, BinOpKind.MAX):
            a, b = from_linear(to_linear(e.a, ranges)), from_linear(to_linear(e.b, ranges))
            ra, rb = interval(a, ranges), interval(b, ranges)
            if ra is not None and rb is not None:
                if op is BinOpKind.MIN and ra[1] <= rb[0] or op is BinOpKind.MAX and ra[0] >= rb[1]:
                    return to_linear(a, ranges)
                if op is BinOpKind.MIN and rb[1] <= ra[0] or op is BinOpKind.MAX and rb[0] >= ra[1]:
                    return to_linear(b, ranges)
            return _atom(binary(op, a, b))
    return _atom(simplify(e))


def _merge_divmod(lin: Linear, ranges) -> Linear:
    """``k*c*(x // c) + k*(x % c)`` -> ``k*x`` (what a fuse followed by a split leaves behind)."""
    for key, (atom, coef) in list(lin.terms.items()):
        if key not in lin.terms or not (isinstance(atom, BinOp) and atom.op is BinOpKind.MOD
                                         and isinstance(atom.b, Const)):
            continue
        c = atom.b.value
        dkey = _key(binary(BinOpKind.FLOORDIV, atom.a, c))
        if dkey in lin.terms and lin.terms[dkey][1] == coef * c:
            rest = Linear({k: v for k, v in lin.terms.items() if k not in (key, dkey)}, lin.const)
            return _merge_divmod(rest.add(to_linear(atom.a, ranges), coef), ranges)
    return lin


def _divmod(op, a: Linear, b: Linear, ranges) -> Linear:
    if not b.is_const or b.const <= 0:
        return _atom(binary(op, from_linear(a), from_linear(b)))
    c = b.const
    q = Linear({k: [atom, coef // c] for k, (atom, coef) in a.terms.items() if coef % c == 0},
               a.const // c)
    r = Linear({k: [atom, coef] for k, (atom, coef) in a.terms.items() if coef % c}, a.const % c)
    rex = from_linear(r)
    rr = interval(rex, ranges)
    if op is BinOpKind.FLOORDIV:
        if rr is not None and rr[0] // c == rr[1] // c:
            return q.add(Linear(const=rr[0] // c))
        if r.is_const:
            return q.add(Linear(const=r.const // c))
        nested = _nested_divmod(op, r, c, ranges)
        return q.add(nested if nested is not None else _atom(binary(BinOpKind.FLOORDIV, rex, c)))
    if rr is not None and rr[0] // c == rr[1] // c:
        return r.add(Linear(const=-(rr[0] // c) * c))
    if r.is_const:
        return Linear(const=r.const % c)
    nested = _nested_divmod(op, r, c, ranges)
    return nested if nested is not None else _atom(binary(BinOpKind.MOD, rex, c))


def _nested_divmod(op, r: Linear, c: int, ranges):
    """``(m*X + Y) // c -> X // (c/m)`` and ``(m*X + Y) % c -> (X % (c/m))*m + Y`` when ``m``
    divides ``c`` and ``0 <= Y < m`` (a split of a fused/im2col index by a divisor of its radix)."""
    for m in sorted({abs(coef) for _, coef in r.terms.values()}, reverse=True):
        if m <= 1 or c % m:
            continue
        x = Linear({k: [a, co // m] for k, (a, co) in r.terms.items() if co % m == 0})
        y = Linear({k: [a, co] for k, (a, co) in r.terms.items() if co % m}, r.const)
        ry = interval(from_linear(y), ranges)
        if ry is None or ry[0] < 0 or ry[1] >= m:
            continue
        xe = from_linear(x)
        if op is BinOpKind.FLOORDIV:
            return to_linear(binary(BinOpKind.FLOORDIV, xe, c // m), ranges)
        return to_linear(binary(BinOpKind.MOD, xe, c // m), ranges).scale(m).add(y)
    return None


def merge_fused_dims(indices, strides) -> list:
    """``[(index, stride)]`` of a row-major access with each pair of adjacent dimensions indexed
    ``(A // c, A % c)`` whose strides are ``c * s`` and ``s`` merged into ``(A, s)``: the same
    address (floor division and modulo recombine exactly), affine in ``A``. Loops fused before
    they were tiled index a buffer so (the rows of an NHWC image run as one pixel axis); summed
    per dimension, LLVM could not tell two rows of a register tile apart, and kept every
    accumulator in memory."""
    out, d = [], 0
    while d < len(indices):
        if d + 1 < len(indices):
            a, b = indices[d], indices[d + 1]
            sa, sb = strides[d], strides[d + 1]
            if (isinstance(a, BinOp) and a.op is BinOpKind.FLOORDIV and isinstance(b, BinOp)
                    and b.op is BinOpKind.MOD and isinstance(a.b, Const) and isinstance(b.b, Const)
                    and a.b.value == b.b.value > 0 and isinstance(sa, int) and isinstance(sb, int)
                    and sa == a.b.value * sb and _key(a.a) == _key(b.a)):
                out.append((a.a, sb))
                d += 2
                continue
        out.append((indices[d], strides[d]))
        d += 1
    return out


def from_linear(lin: Linear) -> Expr:
    """Back to an expression: terms in first-appearance order, then the constant."""
    out = None
    for atom, coef in lin.terms.values():
        if coef == 0:
            continue
        if coef == 1:
            term, neg = atom, False
        elif coef == -1:
            term, neg = atom, True
        else:
            term, neg = (binary(BinOpKind.MUL, atom, abs(coef)), coef < 0)
        if out is None:
            out = binary(BinOpKind.SUB, 0, term) if neg else term
        else:
            out = binary(BinOpKind.SUB if neg else BinOpKind.ADD, out, term)
    k = Const(lin.const, INDEX)
    if out is None:
        return k
    if lin.const > 0:
        return binary(BinOpKind.ADD, out, k)
    if lin.const < 0:
        return binary(BinOpKind.SUB, out, -lin.const)
    return out


def simplify_index(e: Expr, ranges: dict | None = None) -> Expr:
    """Simplify an int64 index expression given variable ranges ``{Var: (lo, hi)}`` (inclusive)."""
    if not e.dtype.is_int or e.dtype is not INDEX:
        return simplify(e)
    return from_linear(to_linear(e, ranges))


def bound(e: Expr, inner: dict, ranges: dict | None = None):
    """Symbolic ``(lo, hi)`` (inclusive) of ``e`` over the variables of ``inner`` ({Var: (lo, hi)}
    with constant bounds); other variables stay symbolic. ``ranges`` gives every variable's range for
    simplification. Returns None when ``e`` is not monotone-decomposable."""
    ranges = {**(ranges or {}), **inner}
    lin = to_linear(e, ranges)
    lo, hi = Linear(const=lin.const), Linear(const=lin.const)
    for k, (atom, coef) in lin.terms.items():
        if isinstance(atom, Var) and atom not in inner:
            part = Linear({k: [atom, coef]})
            lo, hi = lo.add(part), hi.add(part)
            continue
        if not any(v in inner for v in _vars(atom)):
            part = Linear({k: [atom, coef]})
            lo, hi = lo.add(part), hi.add(part)
            continue
        r = _atom_bound(atom, inner, ranges)
        if r is None:
            return None
        alo, ahi = r
        if coef < 0:
            alo, ahi = ahi, alo
        lo, hi = lo.add(alo, coef), hi.add(ahi, coef)
    return from_linear(lo), from_linear(hi)


def _vars(e: Expr):
    from .traverse import free_vars
    return free_vars(e)


def _atom_bound(atom: Expr, inner: dict, ranges: dict):
    """Linear (lo, hi) of an atom that mentions inner variables."""
    if isinstance(atom, Var):
        lo, hi = inner[atom]
        return Linear(const=lo), Linear(const=hi)
    if isinstance(atom, BinOp) and atom.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) \
            and isinstance(atom.b, Const) and atom.b.value > 0:
        c = atom.b.value
        sub = bound(atom.a, inner, ranges)
        if sub is None:
            return None
        if atom.op is BinOpKind.FLOORDIV:  # monotone
            return (to_linear(binary(BinOpKind.FLOORDIV, sub[0], c), ranges),
                    to_linear(binary(BinOpKind.FLOORDIV, sub[1], c), ranges))
        r = interval(atom.a, ranges)
        if r is not None and r[0] // c == r[1] // c:
            return (to_linear(sub[0] - (r[0] // c) * c, ranges),
                    to_linear(sub[1] - (r[0] // c) * c, ranges))
        return Linear(const=0), Linear(const=c - 1)
    if isinstance(atom, BinOp) and atom.op in (BinOpKind.MIN, BinOpKind.MAX):
        a, b = bound(atom.a, inner, ranges), bound(atom.b, inner, ranges)
        if a is None or b is None:
            return None
        return (to_linear(binary(atom.op, a[0], b[0]), ranges),
                to_linear(binary(atom.op, a[1], b[1]), ranges))
    r = interval(atom, ranges)  # anything else: a constant range if one is known
    if r is None:
        return None
    return Linear(const=r[0]), Linear(const=r[1])
