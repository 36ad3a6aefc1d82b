"""The loop IR: one program form for every target (CPU emitter, NVPTX emitter, interpreter).

Statements are immutable. Loops carry a :class:`ForKind` (and a :class:`ThreadAxis` when bound to a
GPU thread axis); buffers carry a :class:`Scope`. Loop bounds are expressions of outer loop variables
and of loaded values (sparse row ranges). :func:`verify` checks the invariants every pass keeps.
"""
from __future__ import annotations

import enum
from typing import Iterator

from .dtype import DType
from .expr import Expr, Load, Var
from .traverse import free_vars, walk

__all__ = ["ForKind", "ParallelSchedule", "PRAGMA_PARALLEL_SCHEDULE", "PRAGMA_PARALLEL_CHUNK",
           "ThreadAxis", "Scope", "Buffer", "Stmt", "For", "Store", "Allocate", "Seq",
           "IfThenElse", "Barrier", "PrimFunc", "seq", "stmts", "verify", "LoopIRError",
           "stmt_exprs", "buffer_accesses", "MAX_UNROLL", "map_loops", "with_body"]


class ForKind(enum.Enum):
    SERIAL = "for"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BOUND = "bound"


class ParallelSchedule(enum.IntEnum):
    """How a parallel loop's iterations are divided among threads: the value of its
    ``parallel_schedule`` pragma (:data:`PRAGMA_PARALLEL_SCHEDULE`; no pragma means STATIC)."""
    #: equal contiguous chunks, one per thread (cheapest launch; balanced when iterations are)
    STATIC = 0
    #: chunks of ``parallel_chunk`` iterations claimed at run time from a shared counter, so that
    #: threads whose iterations are short (empty sparse rows) take over more of them
    DYNAMIC = 1


#: pragma naming a parallel loop's :class:`ParallelSchedule`
PRAGMA_PARALLEL_SCHEDULE = "parallel_schedule"
#: pragma giving a DYNAMIC parallel loop's chunk size in iterations (default 1)
PRAGMA_PARALLEL_CHUNK = "parallel_chunk"


class ThreadAxis(enum.Enum):
    BLOCK_X = "blockIdx.x"
    BLOCK_Y = "blockIdx.y"
    BLOCK_Z = "blockIdx.z"
    THREAD_X = "threadIdx.x"
    THREAD_Y = "threadIdx.y"
    THREAD_Z = "threadIdx.z"
    VTHREAD = "vthread"

    @property
    def is_block(self) -> bool:
        return self.name.startswith("BLOCK")

    @property
    def is_thread(self) -> bool:
        return self.name.startswith("THREAD")

    @property
    def dim(self) -> int:
        return "XYZ".index(self.name[-1]) if self is not ThreadAxis.VTHREAD else -1


class Scope(enum.Enum):
    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"


class Buffer:
    """A row-major array of ``shape`` and ``dtype`` in ``scope``; compared by identity.

    ``strides`` (in elements) default to dense row-major; an allocated buffer may have larger ones
    (storage_align pads rows to avoid cache-set or bank conflicts)."""

    __slots__ = ("name", "shape", "dtype", "scope", "explicit_strides")
    __hash__ = object.__hash__

    def __init__(self, name: str, shape: tuple, dtype: DType, scope: Scope = Scope.GLOBAL,
                 strides: tuple | None = None):
        self.name, self.shape, self.dtype, self.scope = name, tuple(shape), dtype, scope
        self.explicit_strides = None if strides is None else tuple(strides)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def strides(self) -> tuple:
        if self.explicit_strides is not None:
            return self.explicit_strides
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    @property
    def alloc_size(self) -> int:
        """Elements of storage the buffer spans (its size unless the strides are padded)."""
        if self.explicit_strides is None:
            return self.size
        if any(s == 0 for s in self.shape):
            return 0
        return 1 + sum((n - 1) * st for n, st in zip(self.shape, self.explicit_strides))

    def __repr__(self):
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype}, {self.scope.value})"


class Stmt:
    __slots__ = ()

    def children(self) -> tuple:
        return ()

    def __repr__(self):
        from .printer import stmt_str
        return stmt_str(self)


class For(Stmt):
    """``for var in [begin, begin + extent)``; ``pragmas`` holds e.g. ``auto_unroll_max_step``."""

    __slots__ = ("var", "begin", "extent", "kind", "body", "thread", "pragmas")

    def __init__(self, var: Var, begin: Expr, extent: Expr, kind: ForKind, body: Stmt,
                 thread: ThreadAxis | None = None, pragmas: tuple = ()):
        self.var, self.begin, self.extent, self.kind, self.body = var, begin, extent, kind, body
        self.thread, self.pragmas = thread, tuple(pragmas)

    def children(self):
        return (self.body,)


class Store(Stmt):
    __slots__ = ("buffer", "indices", "value")

    def __init__(self, buffer: Buffer, indices: tuple, value: Expr):
        self.buffer, self.indices, self.value = buffer, tuple(indices), value


class Allocate(Stmt):
    """``buffer`` exists (uninitialized) for the duration of ``body``."""

    __slots__ = ("buffer", "body")

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer, self.body = buffer, body

    def children(self):
        return (self.body,)


class Seq(Stmt):
    __slots__ = ("stmts",)

    def __init__(self, items):
        self.stmts = tuple(items)

    def children(self):
        return self.stmts


class IfThenElse(Stmt):
    __slots__ = ("cond", "then", "else_")

    def __init__(self, cond: Expr, then: Stmt, else_: Stmt | None = None):
        self.cond, self.then, self.else_ = cond, then, else_

    def children(self):
        return (self.then,) if self.else_ is None else (self.then, self.else_)


class Barrier(Stmt):
    """All threads of a block wait here (``__syncthreads``)."""

    __slots__ = ()


class PrimFunc:
    """A kernel: ``params`` are the argument buffers (inputs first, outputs last)."""

    def __init__(self, name: str, params: list, body: Stmt, n_outputs: int = 1):
        self.name, self.params, self.body, self.n_outputs = name, list(params), body, n_outputs

    @property
    def is_gpu(self) -> bool:
        return any(isinstance(s, For) and s.kind is ForKind.THREAD_BOUND for s in stmts(self.body))

    def __repr__(self):
        from .printer import func_str
        return func_str(self)


def seq(*items) -> Stmt:
    """Flatten nested sequences; a single statement stays itself."""
    out = []
    for s in items:
        if s is None:
            continue
        if isinstance(s, Seq):
            out.extend(s.stmts)
        else:
            out.append(s)
    return out[0] if len(out) == 1 else Seq(out)


def with_body(loop: "For", body: Stmt) -> "For":
    """``loop`` itself when ``body`` is its body, else the same loop around ``body``."""
    return loop if body is loop.body else For(loop.var, loop.begin, loop.extent, loop.kind, body,
                                              loop.thread, loop.pragmas)


def map_loops(s: Stmt, on_for) -> Stmt:
    """``s`` with each outermost loop replaced by ``on_for(loop)`` (which recurses as it needs);
    sequences, branches and allocations are rebuilt only where a part changed."""
    if isinstance(s, For):
        return on_for(s)
    if isinstance(s, Seq):
        new = [map_loops(c, on_for) for c in s.stmts]
        return s if all(a is b for a, b in zip(new, s.stmts)) else Seq(new)
    if isinstance(s, IfThenElse):
        t = map_loops(s.then, on_for)
        e = None if s.else_ is None else map_loops(s.else_, on_for)
        return s if t is s.then and e is s.else_ else IfThenElse(s.cond, t, e)
    if isinstance(s, Allocate):
        body = map_loops(s.body, on_for)
        return s if body is s.body else Allocate(s.buffer, body)
    return s


def stmts(s: Stmt) -> Iterator[Stmt]:
    """Pre-order over ``s`` and its nested statements."""
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children()))


def stmt_exprs(s: Stmt) -> list:
    """The expressions a statement holds itself (not its nested statements'): a store's value and
    indices, a loop's bounds, a branch's condition."""
    if isinstance(s, Store):
        return [s.value, *s.indices]
    if isinstance(s, For):
        return [s.begin, s.extent]
    if isinstance(s, IfThenElse):
        return [s.cond]
    return []


def buffer_accesses(s: Stmt) -> tuple:
    """``(loaded, stored, allocated)``: the sets of buffers ``s`` and its nested statements load
    from (in values, indices, bounds and conditions), store to and allocate."""
    loaded, stored, allocated = set(), set(), set()
    for x in stmts(s):
        if isinstance(x, Allocate):
            allocated.add(x.buffer)
        elif isinstance(x, Store):
            stored.add(x.buffer)
        for e in stmt_exprs(x):
            loaded.update(y.buffer for y in walk(e) if isinstance(y, Load))
    return loaded, stored, allocated


#: the most copies of a loop body that unrolling (nested unrolled loops multiply) may emit: an
#: unroll pragma of 65536 left LLVM unrolling for more than 9 minutes
MAX_UNROLL = 1024


class LoopIRError(ValueError):
    """A loop-IR invariant does not hold."""


def verify(func: PrimFunc) -> None:
    """Check the loop IR's invariants; raise :class:`LoopIRError` naming the first violation.

    Every variable is bound by an enclosing loop, every buffer is a parameter or allocated around its
    use, indices match ranks and are integers, stored values match the buffer type, vectorized and
    unrolled loops have constant extents, thread-bound loops name a thread axis, no loop variable is
    bound twice on one path, and barriers are not inside vectorized loops.
    """
    params = set(func.params)
    if len(params) != len(func.params):
        raise LoopIRError(f"{func.name}: a buffer appears twice among the parameters")

    def check_expr(e: Expr, bound: set, bufs: set, where: str):
        for v in free_vars(e):
            if v not in bound:
                raise LoopIRError(f"{where}: variable '{v.name}' is used outside any loop binding it")
        for x in walk(e):
            if isinstance(x, Load):
                check_access(x.buffer, x.indices, bufs, where)

    def check_access(buf, indices, bufs, where):
        if buf not in bufs:
            raise LoopIRError(f"{where}: buffer '{buf.name}' is neither a parameter nor allocated here")
        if len(indices) != len(buf.shape):
            raise LoopIRError(f"{where}: buffer '{buf.name}' has rank {len(buf.shape)} but is "
                              f"indexed with {len(indices)} indices")
        for ix in indices:
            if not ix.dtype.is_int:
                raise LoopIRError(f"{where}: index of '{buf.name}' has type {ix.dtype}")

    def go(s: Stmt, bound: set, bufs: set, in_vec: bool, copies: int = 1):
        # copies: how many times unrolling repeats this statement's code (the emitted code size)
        if isinstance(s, For):
            where = f"loop '{s.var.name}'"
            if s.var in bound:
                raise LoopIRError(f"{where}: variable bound twice on one path")
            check_expr(s.begin, bound, bufs, where)
            check_expr(s.extent, bound, bufs, where)
            from .expr import Const
            if s.kind in (ForKind.VECTORIZED, ForKind.UNROLLED) and not isinstance(s.extent, Const):
                raise LoopIRError(f"{where}: a {s.kind.value} loop needs a constant extent")
            if s.kind is ForKind.UNROLLED:
                copies *= max(1, int(s.extent.value))
                if copies > MAX_UNROLL:
                    raise LoopIRError(
                        f"{where}: unrolling would repeat its body {copies} times, past tecomp's "
                        f"limit of {MAX_UNROLL} (MAX_UNROLL: the code and its compile time grow "
                        f"with it); unroll a split part of the loop, or lower "
                        f"auto_unroll_max_step")
            if (s.kind is ForKind.THREAD_BOUND) != (s.thread is not None):
                raise LoopIRError(f"{where}: thread axis given iff the loop is thread-bound")
            go(s.body, bound | {s.var}, bufs, in_vec or s.kind is ForKind.VECTORIZED, copies)
        elif isinstance(s, Store):
            where = f"store to '{s.buffer.name}'"
            check_access(s.buffer, s.indices, bufs, where)
            for ix in s.indices:
                check_expr(ix, bound, bufs, where)
            check_expr(s.value, bound, bufs, where)
            if s.value.dtype is not s.buffer.dtype:
                raise LoopIRError(f"{where}: value of type {s.value.dtype} stored into a buffer of "
                                  f"type {s.buffer.dtype}")
        elif isinstance(s, Allocate):
            if s.buffer in bufs:
                raise LoopIRError(f"allocation of '{s.buffer.name}': buffer already exists here")
            go(s.body, bound, bufs | {s.buffer}, in_vec, copies)
        elif isinstance(s, Seq):
            for c in s.stmts:
                go(c, bound, bufs, in_vec, copies)
        elif isinstance(s, IfThenElse):
            check_expr(s.cond, bound, bufs, "if")
            if not s.cond.dtype.is_bool:
                raise LoopIRError(f"if: condition has type {s.cond.dtype}")
            for c in s.children():
                go(c, bound, bufs, in_vec, copies)
        elif isinstance(s, Barrier):
            if in_vec:
                raise LoopIRError("barrier inside a vectorized loop")
        else:
            raise LoopIRError(f"unknown statement {type(s).__name__}")

    go(func.body, frozenset(), frozenset(params), False)
