"""A bound on the code that unrolled loops emit, so that no candidate takes minutes to compile.

``auto_unroll_max_step`` bounds the iterations of one unrolled nest, not the code the function
ends up with: guard versioning copies a nest once per non-divisible split around it (up to 8
copies), and a statement can be one FMA or a conditional tap of sixty nodes. On a Zen 1 a matmul
512^3 candidate of unroll 512 over two non-divisible tiles with lanes of one emitted 284,952
distinct expression nodes (3904 scalar stores) and ran past the 30 s build limit; bounded to
145,886 it builds in 18.3 s. Past :data:`UNROLL_BUDGET` nodes, :func:`bound_unrolling` turns
the outermost unrolled loops back into serial loops, the largest first, until the function
fits: the inner loops (a register tile, its lanes) stay unrolled. The result is deterministic,
so a record replays to the program that was measured.

The budget is a guard against such outliers, not a tuning knob: fast programs can be large
(the best records of the shipped logs emit at most 140,292 nodes and build in 2-5 s), and a
budget of 24,000 slowed six of them by 5-130% (a MobileNet-V2 channels-last layer 0.93 -> 2.00 ms).
"""
from __future__ import annotations

from ..ir.expr import Const
from ..ir.loop import (
    MAX_UNROLL,
    For,
    ForKind,
    PrimFunc,
    Stmt,
    map_loops,
    stmt_exprs,
    with_body,
)

__all__ = ["UNROLL_BUDGET", "emitted_size", "bound_unrolling"]

#: expression nodes a CPU function may emit through unrolled and vectorized loops
UNROLL_BUDGET = 150_000
#: lanes a vectorized loop is counted in chunks of (an AVX2 register of fp32)
_CHUNK = 8


def _trips(loop: For) -> int:
    n = loop.extent.value if isinstance(loop.extent, Const) else 1
    if loop.kind is ForKind.UNROLLED:
        return max(1, int(n))
    if loop.kind is ForKind.VECTORIZED:
        return max(1, -(-int(n) // _CHUNK))
    return 1


def _distinct_nodes(exprs) -> int:
    """Nodes of ``exprs`` counted once each: the emitter caches a node's value by identity, and
    inlined stages share sub-expressions (a tree walk of a shared DAG grows exponentially)."""
    seen, stack = set(), list(exprs)
    while stack:
        x = stack.pop()
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.children())
    return len(seen)


def emitted_size(s: Stmt) -> int:
    """Expression nodes the emitter writes for ``s``: each statement's own nodes, times the
    trip counts of the unrolled loops (and the vector chunks of the vectorized ones) around it."""
    own = _distinct_nodes(stmt_exprs(s))
    if isinstance(s, For):
        return own + _trips(s) * emitted_size(s.body)
    return own + sum(emitted_size(c) for c in s.children())


def _copies(s: Stmt, copies: int = 1) -> int:
    """The most times unrolling repeats any statement of ``s`` (what :data:`MAX_UNROLL` bounds)."""
    if isinstance(s, For) and s.kind is ForKind.UNROLLED and isinstance(s.extent, Const):
        copies *= max(1, int(s.extent.value))
    return max([copies] + [_copies(c, copies) for c in s.children()])


def _outermost_unrolled(s: Stmt, out: list) -> list:
    """Unrolled loops of ``s`` with no unrolled loop around them, in pre-order."""
    if isinstance(s, For) and s.kind is ForKind.UNROLLED:
        out.append(s)
        return out
    for c in s.children():
        _outermost_unrolled(c, out)
    return out


def _demote(s: Stmt, target: For) -> Stmt:
    def on_for(loop):
        if loop is target:
            return For(loop.var, loop.begin, loop.extent, ForKind.SERIAL, loop.body, loop.thread,
                       loop.pragmas)
        return with_body(loop, _demote(loop.body, target))
    return map_loops(s, on_for)


def bound_unrolling(func: PrimFunc, budget: int | None = None) -> PrimFunc:
    """``func`` with its outermost unrolled loops made serial, the largest first, until
    :func:`emitted_size` of its body is at most ``budget`` (:data:`UNROLL_BUDGET` when None);
    the same object when it already is, when it is a GPU function (whose unrolled loops index
    register arrays), or when a nest unrolls past :data:`~tecomp.ir.loop.MAX_UNROLL` (an error
    of the schedule that the loop IR's check reports)."""
    budget = UNROLL_BUDGET if budget is None else budget
    if budget < 1:
        raise ValueError(f"the unroll budget must be positive, got {budget}")
    if func.is_gpu or emitted_size(func.body) <= budget or _copies(func.body) > MAX_UNROLL:
        return func  # (past MAX_UNROLL the loop IR's check refuses the unroll, saying why)
    body = func.body
    while emitted_size(body) > budget:
        loops = _outermost_unrolled(body, [])
        if not loops:
            break
        body = _demote(body, max(loops, key=emitted_size))
    return PrimFunc(func.name, func.params, body, func.n_outputs)
