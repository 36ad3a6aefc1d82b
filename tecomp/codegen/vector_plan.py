"""Which vectorized loops the CPU emitter can turn into vector code (:mod:`.llvm_vector`), and how wide.

Vector execution runs the body statement by statement over all lanes of a chunk instead of lane by
lane. That equals the loop's serial semantics when no element of memory is touched by two lanes
with one of them writing it: every buffer the body writes must be accessed only at
``base + stride * lane`` with one stride != 0 and bases that never map one lane onto another's
element. :func:`vector_plan` checks that, and the statement kinds the emitter handles; anything
else falls back to the scalar loop.
"""
from __future__ import annotations

import contextlib

from ..ir import dtype as dt
from ..ir.arith import to_linear
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Var, binary, cast
from ..ir.loop import For, ForKind, IfThenElse, Seq, Stmt, Store
from ..ir.traverse import walk
from .llvm_jit import host_cpu

__all__ = ["register_bits", "shuffle_bits", "pinned_register_bits", "pinned_shuffle_bits",
           "access_form", "vector_plan", "interval_condition"]

#: a width that :func:`pinned_register_bits` set, in place of the host's (None: the host's)
_PINNED: list = [None]

# loops that may run inside a vectorized loop, as scalar loops of vector values
_INNER = (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED)


def register_bits() -> int:
    """Width in bits of the host's vector registers (from LLVM's feature string), or the width
    :func:`pinned_register_bits` holds."""
    if _PINNED[0] is not None:
        return _PINNED[0]
    feats = set(host_cpu()[1].split(","))
    if "+avx512f" in feats:
        return 512
    if "+avx2" in feats:
        return 256
    return 128


#: LLVM CPU names whose vector units are 128 bits wide: they run each 256-bit operation as two
#: 128-bit halves, so a shuffle that crosses the halves costs several of them
HALF_WIDTH_CPUS = frozenset({"znver1", "bdver1", "bdver2", "bdver3", "bdver4", "btver2"})
#: a width that :func:`pinned_shuffle_bits` set (None: the host's)
_SHUFFLE: list = [None]


def shuffle_bits() -> int:
    """Width in bits that a shuffle should stay within: 128 on a host of
    :data:`HALF_WIDTH_CPUS`, else :func:`register_bits` (with a register width pinned, that
    width; with a shuffle width pinned, the smaller of the two)."""
    bits = register_bits()
    if _SHUFFLE[0] is not None:
        return min(bits, _SHUFFLE[0])
    if _PINNED[0] is None and host_cpu()[0] in HALF_WIDTH_CPUS:
        return min(bits, 128)
    return bits


@contextlib.contextmanager
def pinned_shuffle_bits(bits: int):
    """Emit shuffles that stay within ``bits`` inside the ``with`` block, whatever the host is
    (the half-width code of a Zen 1 tested on any host)."""
    old, _SHUFFLE[0] = _SHUFFLE[0], bits
    try:
        yield bits
    finally:
        _SHUFFLE[0] = old


@contextlib.contextmanager
def pinned_register_bits(bits: int):
    """Emit code for ``bits``-wide vector registers inside the ``with`` block, whatever the host
    has: code that is meant to be the same on every machine (golden files) emits under it. Code
    emitted this way is for inspection; it runs only where the host has registers that wide."""
    if bits not in (128, 256, 512):
        raise ValueError(f"register width must be 128, 256 or 512 bits, got {bits}")
    old, _PINNED[0] = _PINNED[0], bits
    try:
        yield bits
    finally:
        _PINNED[0] = old


# ----------------------------------------------------------------------------- analysis

def _uses(e: Expr, vs) -> bool:
    ids = {id(v) for v in vs}
    return any(isinstance(x, Var) and id(x) in ids for x in walk(e))


def access_form(buf, indices, lane: Var):
    """``(linear form of the flat address, lane stride)``; the stride is None when the address is not
    affine in ``lane`` (the lane occurs inside a non-linear or data-dependent part)."""
    flat = Const(0, dt.INDEX)
    for ix, st in zip(indices, buf.strides):
        flat = binary(BinOpKind.ADD, flat, binary(BinOpKind.MUL, cast(ix, dt.INDEX), st))
    lin = to_linear(flat)
    stride = 0
    for atom, coef in lin.terms.values():
        if atom is lane:
            stride = coef
        elif _uses(atom, (lane,)):
            return lin, None
    return lin, stride


_INTERVAL_CMP = (BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE, BinOpKind.EQ)


def interval_condition(cond: Expr, lane: Var) -> bool:
    """Whether the lanes where ``cond`` holds form one interval: a conjunction of comparisons
    (not ``!=``) of integer expressions affine in ``lane``, without loads. Then ``cond`` holds on
    every lane of a chunk iff it holds on the chunk's first and last lane, which the emitter tests
    in scalar to run a padding copy's interior without masks."""
    if isinstance(cond, BinOp) and cond.op is BinOpKind.AND:
        return interval_condition(cond.a, lane) and interval_condition(cond.b, lane)
    if not (isinstance(cond, BinOp) and cond.op in _INTERVAL_CMP):
        return False
    for side in (cond.a, cond.b):
        if not side.dtype.is_int or any(isinstance(x, Load) for x in walk(side)):
            return False
        for atom, _ in to_linear(cast(side, dt.INDEX)).terms.values():
            if atom is not lane and _uses(atom, (lane,)):
                return False
    return True


class _NotVectorizable(Exception):
    pass


def vector_plan(s: For, reg_bits: int | None = None):
    """``(lanes, None)`` when loop ``s`` can be emitted as vector code of ``lanes`` lanes per chunk,
    else ``(None, reason)``."""
    if not isinstance(s.extent, Const):
        return None, "extent is not constant"
    lane, inner = s.var, set()
    accesses: dict = {}  # buffer -> [(indices, is_store)]
    try:
        _scan(s.body, lane, inner, accesses)
        for buf, acc in accesses.items():
            if any(w for _, w in acc):
                _check_private(buf, acc, lane, inner, s.extent.value)
    except _NotVectorizable as e:
        return None, str(e)
    widest = max((b.dtype.itemsize for b in accesses), default=4)
    lanes = max(1, (reg_bits or register_bits()) // (8 * widest))
    return max(1, min(lanes, s.extent.value)), None


def _scan(st: Stmt, lane, inner: set, accesses: dict) -> None:
    def see(e: Expr):
        for x in walk(e):
            if isinstance(x, Load):
                accesses.setdefault(x.buffer, []).append((x.indices, False))

    if isinstance(st, Seq):
        for c in st.stmts:
            _scan(c, lane, inner, accesses)
    elif isinstance(st, Store):
        accesses.setdefault(st.buffer, []).append((st.indices, True))
        for e in (*st.indices, st.value):
            see(e)
    elif isinstance(st, IfThenElse):
        see(st.cond)
        for c in st.children():
            _scan(c, lane, inner, accesses)
    elif isinstance(st, For):
        if st.kind not in _INNER:
            raise _NotVectorizable(f"a {st.kind.value} loop inside")
        for e in (st.begin, st.extent):
            if _uses(e, (lane,)):
                raise _NotVectorizable(f"bounds of loop '{st.var.name}' depend on the lane")
            see(e)
        inner.add(st.var)
        _scan(st.body, lane, inner, accesses)
    else:  # allocations (per-lane storage), barriers, anything new
        raise _NotVectorizable(f"{type(st).__name__} inside")


def _check_private(buf, acc: list, lane, inner: set, extent: int) -> None:
    """A buffer written in the loop: every access must address ``base + stride * lane`` with one
    stride != 0 and bases whose difference never maps one lane onto another's element, so that each
    element is touched by a single lane and the statement order across lanes does not matter."""
    forms = []
    for indices, _ in acc:
        lin, stride = access_form(buf, indices, lane)
        if not stride:
            raise _NotVectorizable(f"'{buf.name}' is written and accessed at a lane-invariant or "
                                   f"non-affine address")
        if any(atom is not lane and _uses(atom, inner) for atom, _ in lin.terms.values()):
            raise _NotVectorizable(f"'{buf.name}' is written at an address that moves with an "
                                   f"inner loop")
        forms.append((lin, stride))
    lin0, s0 = forms[0]
    for lin, _ in forms[1:]:
        diff = lin.add(lin0, -1)
        if not diff.is_const:
            raise _NotVectorizable(f"accesses of '{buf.name}' at unrelated addresses")
        d = diff.const
        if d and d % s0 == 0 and abs(d // s0) < extent:
            raise _NotVectorizable(f"lanes of '{buf.name}' overlap (offset {d})")
