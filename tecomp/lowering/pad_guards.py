"""Padding computed instead of masked: the tail guards a private tile may drop.

A register tile whose lanes do not divide the columns (a 4x24 tile over 1024 columns: the last
panel holds 16 real columns of 24) guards every statement of its tail with the column's bound.
The guard depends on the vectorized loop, so the tail's accumulation is masked: masked loads and
stores of the tile that LLVM cannot keep in registers. On Zen 1 a 1024^3 matmul with that tile
ran at 62 GFLOP/s with its one tail panel masked and at 74 with the padding computed (as fast as
1008 columns, which 24 divides).

When a stage computes into a private buffer (``local``, per thread, allocated at its attach
point) and a guard of its vectorized loop only bounds its spatial axes (:func:`spatial_bound`;
a guard of a scalar loop is a branch that skips the padded points' work, and stays), the points
it skips are padding: each stores to a slot of the tile that no valid point stores to, and that the consumer
reads only for points its own guards skip. Computing them is harmless when nothing they read or
write lies outside its buffer, so lowering drops such a guard when every load and store under it
stays inside its buffer over the loops' whole ranges (:func:`harmless`; packed panels are
allocated padded and zero-filled, an input read past its edge keeps the guard). Guards that read
memory (a sparse row's end), that bound a reduction axis (whose padded points would add to valid
sums) or that wrap a store to anything but a private buffer stay; so do those of a ragged stage
(it stores at computed indices) and of GPU functions.
"""
from __future__ import annotations

from ..ir.expr import BinOp, BinOpKind, Const, Load
from ..ir.interval import interval
from ..ir.loop import Scope, Stmt, Store, stmt_exprs, stmts
from ..ir.traverse import free_vars, walk

__all__ = ["spatial_bound", "harmless"]

_TRAPS = (BinOpKind.FLOORDIV, BinOpKind.MOD)


def spatial_bound(guard, reduce_vars: set) -> bool:
    """Whether ``guard`` bounds spatial loops only: it reads no memory (a sparse row's end) and no
    loop of ``reduce_vars`` (a reduction's padded points would add to valid sums)."""
    if any(isinstance(x, Load) for x in walk(guard)):
        return False
    return not any(v in reduce_vars for v in free_vars(guard))


def harmless(stmt: Stmt, ranges: dict) -> bool:
    """Every store in ``stmt`` goes to a private buffer, and every index of every load and store
    lies inside its buffer for all values of the loop variables in ``ranges`` (a variable without
    a range, or an index the interval analysis cannot bound, says no); no integer division or
    remainder by anything but a positive constant (a padded point must not trap)."""
    for s in stmts(stmt):
        if isinstance(s, Store):
            if s.buffer.scope is not Scope.LOCAL or not _inside(s.buffer, s.indices, ranges):
                return False
        for e in stmt_exprs(s):
            for x in walk(e):
                if isinstance(x, Load) and not _inside(x.buffer, x.indices, ranges):
                    return False
                if isinstance(x, BinOp) and x.op in _TRAPS and x.dtype.is_int \
                        and not (isinstance(x.b, Const) and x.b.value > 0):
                    return False
    return True


def _inside(buffer, indices, ranges: dict) -> bool:
    if len(indices) != len(buffer.shape):
        return False
    for i, n in zip(indices, buffer.shape):
        r = interval(i, ranges)
        if not isinstance(n, int) or r is None or r[0] < 0 or r[1] >= n:
            return False
    return True
