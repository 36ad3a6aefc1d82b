"""Walking and rewriting expression trees: pre-order walks, bottom-up rebuilds, substitution, free
variables and the structural key that identifies a tree independently of user-chosen names."""
from __future__ import annotations

from typing import Callable, Iterator

from .expr import BinOp, Cast, Const, Expr, Load, Reduce, Select, TensorRead, UnOp, Var

__all__ = ["walk", "transform", "substitute", "free_vars", "simplify", "structural_key"]


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order over ``e`` and its sub-expressions (a reduce's axes' bounds are not visited)."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children()))


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``e`` bottom-up; ``fn(node)`` returns a replacement or None to keep the node."""
    r = fn(e)
    if r is not None:
        return r
    ch = e.children()
    if not ch:
        return e
    new = tuple(transform(c, fn) for c in ch)
    if all(n is c for n, c in zip(new, ch)):
        return e
    return e.with_children(new)


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables (keys, compared by identity) with expressions."""
    if not mapping:
        return e
    return transform(e, lambda x: mapping.get(x) if isinstance(x, Var) else None)


def free_vars(e: Expr) -> list:
    """Variables used in ``e``, in order of first appearance, without duplicates."""
    seen, out = set(), []
    for x in walk(e):
        if isinstance(x, Var) and id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def simplify(e: Expr) -> Expr:
    """Constant-fold ``e`` bottom-up (construction already folds; this re-folds after substitution)."""
    return transform(e, lambda x: None)


def structural_key(e: Expr, names: Callable[[object], object]) -> tuple:
    """A hashable structural description of ``e``; ``names`` maps a Var/tensor/buffer to its identity
    in the key (e.g. its position), so that user-chosen names do not enter the key."""
    if isinstance(e, Const):
        return ("c", e.dtype.name, e.value)
    if isinstance(e, Var):
        return ("v", names(e))
    if isinstance(e, BinOp):
        return ("b", e.op.name, structural_key(e.a, names), structural_key(e.b, names))
    if isinstance(e, UnOp):
        return ("u", e.op.name, structural_key(e.a, names))
    if isinstance(e, Cast):
        return ("cast", e.dtype.name, structural_key(e.a, names))
    if isinstance(e, Select):
        return ("sel",) + tuple(structural_key(c, names) for c in e.children())
    if isinstance(e, (TensorRead, Load)):
        target = e.tensor if isinstance(e, TensorRead) else e.buffer
        return ("rd", names(target)) + tuple(structural_key(c, names) for c in e.indices)
    if isinstance(e, Reduce):
        axes = tuple((names(a), structural_key(a.begin, names), structural_key(a.end, names))
                     for a in e.axes)
        return ("red", e.kind.name, axes, structural_key(e.source, names))
    raise TypeError(f"unknown expression node {type(e).__name__}")
