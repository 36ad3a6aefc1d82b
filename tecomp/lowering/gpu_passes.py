"""Post-lowering passes of GPU programs and their validity check.

:func:`prepare_gpu_program` turns a lowered :class:`~tecomp.ir.loop.PrimFunc` whose stages are bound to
GPU thread axes into the form the NVPTX emitter and the lockstep interpreter run:

1. *Launches*: below the ``Allocate`` of global intermediates, each root statement is one kernel
   launch; its outermost loop must be bound to blockIdx/threadIdx (a root stage with an unbound loop
   nest is an error naming it). A stage that writes only single elements (no spatial axis) runs as a
   one-thread launch.
2. *Nested bindings*: a stage computed inside a threadIdx-bound loop that binds the same axis again
   (a cooperative fetch) uses the same hardware thread: the inner loop's variable becomes the outer
   one's, under ``if tid < inner extent`` when the inner extent is smaller (larger is an error).
3. *Shared buffers* are allocated once per kernel (hoisted to the kernel's root), as on the device.
4. *Block-level statements* that write shared or global memory outside every threadIdx loop of a
   kernel with threads (e.g. the final step of a cross-thread reduction) run on thread 0 only.
5. *Barriers*: where one statement writes a shared buffer and a later one reads or writes it (or,
   in a loop, the next iteration's write follows this iteration's read), a ``Barrier`` goes between.
   A barrier that not every thread of a block would reach (under a condition or in a loop that
   depends on the thread index) is an error, never a program (undefined behaviour on the device).

:func:`check_gpu_program` returns a :class:`GPUProgramInfo` (launch dims, threads, shared bytes,
local elements) or raises :class:`GPUScheduleError` when a limit of the device is exceeded, so the
search can reject candidates before building them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import dtype as dt
from ..ir.expr import BinOpKind, Const, Load, Var, binary
from ..ir.loop import (
    Allocate,
    Barrier,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Scope,
    Seq,
    Stmt,
    Store,
    ThreadAxis,
    buffer_accesses,
    seq,
    stmt_exprs,
    stmts,
)
from ..ir.traverse import substitute, walk
from ..schedule.state import ScheduleError

__all__ = ["GPUScheduleError", "GPULimits", "LaunchInfo", "GPUProgramInfo", "prepare_gpu_program",
           "check_gpu_program"]

_THREADS = (ThreadAxis.THREAD_X, ThreadAxis.THREAD_Y, ThreadAxis.THREAD_Z)
_BLOCKS = (ThreadAxis.BLOCK_X, ThreadAxis.BLOCK_Y, ThreadAxis.BLOCK_Z)


class GPUScheduleError(ScheduleError):
    """A GPU program that cannot run: unbound stages, or a device limit exceeded."""


@dataclass(frozen=True)
class GPULimits:
    """Per-block limits of NVIDIA GPUs (compute capability 7.0 and later)."""
    max_threads: int = 1024
    max_thread_dims: tuple = (1024, 1024, 64)
    max_grid_dims: tuple = (2 ** 31 - 1, 65535, 65535)
    max_shared_bytes: int = 48 * 1024  # static shared memory per block
    max_vthread: int = 16
    max_local_words: int = 255  # 32-bit registers a thread can hold: a local-buffer estimate


@dataclass
class LaunchInfo:
    """One kernel launch: ``stmt`` is its loop IR (rooted at a thread-bound loop)."""
    name: str
    stmt: Stmt = field(repr=False)
    grid: tuple
    block: tuple
    shared_bytes: int
    local_words: int
    params: list = field(default_factory=list)  # global Buffers it uses, in parameter order

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass
class GPUProgramInfo:
    """What :func:`check_gpu_program` found: the launches, in order, and their largest figures."""
    launches: list

    @property
    def max_threads(self) -> int:
        return max((x.threads for x in self.launches), default=0)

    @property
    def max_shared_bytes(self) -> int:
        return max((x.shared_bytes for x in self.launches), default=0)

    @property
    def max_local_words(self) -> int:
        return max((x.local_words for x in self.launches), default=0)


# ----------------------------------------------------------------------------- entry points

def prepare_gpu_program(func: PrimFunc, limits: GPULimits | None = None) -> tuple:
    """``(gpu PrimFunc, GPUProgramInfo)``: the passes of this module and the validity check.

    Idempotent: a prepared function prepares to itself (barriers already present are kept).
    Raises :class:`GPUScheduleError` naming the stage or the limit.
    """
    limits = limits or GPULimits()
    body, globals_ = func.body, []
    while isinstance(body, Allocate):
        globals_.append(body.buffer)
        body = body.body
    roots = list(body.stmts) if isinstance(body, Seq) else [body]
    launches = []
    for group in _group_roots(roots):
        stmt = _as_kernel(group, func.name)
        stmt = _merge_nested_bindings(stmt)
        stmt = _hoist_shared(stmt)
        stmt = _guard_block_level(stmt)
        stmt, _ = _barriers(stmt)
        _check_uniform_barriers(stmt, func.name)
        launches.append(stmt)
    new_body = seq(*launches)
    for b in reversed(globals_):
        new_body = Allocate(b, new_body)
    out = PrimFunc(func.name, func.params, new_body, func.n_outputs)
    order = list(func.params) + globals_
    infos = [_launch_info(f"{func.name}_k{n}", s, order, limits) for n, s in enumerate(launches)]
    return out, GPUProgramInfo(infos)


def check_gpu_program(func: PrimFunc, target=None, limits: GPULimits | None = None) -> GPUProgramInfo:
    """The launches of a (lowered) GPU program and their figures; raises :class:`GPUScheduleError`
    when the program cannot run (``target`` is accepted for future per-arch limits)."""
    del target
    return prepare_gpu_program(func, limits)[1]


# ----------------------------------------------------------------------------- launches

def _written(s: Stmt) -> list:
    out = []
    for x in stmts(s):
        if isinstance(x, Store) and x.buffer not in out:
            out.append(x.buffer)
    return out


def _is_kernel_root(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind is ForKind.THREAD_BOUND and s.thread is not ThreadAxis.VTHREAD


def _has_thread_loop(s: Stmt) -> bool:
    return any(_is_kernel_root(x) for x in stmts(s))


def _group_roots(roots: list) -> list:
    """Root statements, the unbound statements of one stage (a reduction's init and update nests)
    grouped: each group is one launch."""
    groups: list = []
    for s in roots:
        if groups and not _has_thread_loop(s) and not _has_thread_loop(groups[-1][-1]) \
                and set(_written(s)) == set(_written(groups[-1][-1])):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def _as_kernel(group: list, fname: str) -> Stmt:
    s = seq(*group)
    if _is_kernel_root(s):
        return s
    names = ", ".join(f"'{b.name}'" for b in _written(s)) or "?"
    if _has_thread_loop(s):
        raise GPUScheduleError(f"{fname}: stage {names} has loops outside its blockIdx/threadIdx-"
                               f"bound loops; bind its outermost loops to blockIdx/threadIdx")
    if all(b.size == 1 for b in _written(s)):  # no spatial axis: one thread does it
        for axis in (ThreadAxis.THREAD_X, ThreadAxis.BLOCK_X):
            s = For(Var(f"{axis.value}_1"), Const(0, dt.INDEX), Const(1, dt.INDEX),
                    ForKind.THREAD_BOUND, s, thread=axis)
        return s
    raise GPUScheduleError(f"{fname}: stage {names} has a loop nest not bound to any GPU block or "
                           f"thread axis; bind its outer loops to blockIdx/threadIdx")


def _rebuild(s: Stmt, fn) -> Stmt:
    """``s`` with each child ``c`` replaced by ``fn(c)``."""
    if isinstance(s, For):
        return For(s.var, s.begin, s.extent, s.kind, fn(s.body), s.thread, s.pragmas)
    if isinstance(s, Seq):
        return seq(*[fn(c) for c in s.stmts])
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, fn(s.then), None if s.else_ is None else fn(s.else_))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, fn(s.body))
    return s


def substitute_stmt_vars(s: Stmt, m: dict) -> Stmt:
    """``s`` with the variables of ``m`` replaced in every expression."""
    if isinstance(s, Store):
        return Store(s.buffer, tuple(substitute(i, m) for i in s.indices), substitute(s.value, m))
    if isinstance(s, For):
        return For(s.var, substitute(s.begin, m), substitute(s.extent, m), s.kind,
                   substitute_stmt_vars(s.body, m), s.thread, s.pragmas)
    if isinstance(s, IfThenElse):
        return IfThenElse(substitute(s.cond, m), substitute_stmt_vars(s.then, m),
                          None if s.else_ is None else substitute_stmt_vars(s.else_, m))
    return _rebuild(s, lambda c: substitute_stmt_vars(c, m))


def _const(e, what: str) -> int:
    if not isinstance(e, Const):
        raise GPUScheduleError(f"{what} must have a constant extent, not {e!r}")
    return int(e.value)


def _merge_nested_bindings(s: Stmt, bound: dict | None = None) -> Stmt:
    bound = bound or {}
    if _is_kernel_root(s):
        outer = bound.get(s.thread)
        if outer is not None:
            var, ext = outer
            if s.thread in _BLOCKS:  # a block's threads share memory, blocks do not
                raise GPUScheduleError(f"loop '{s.var.name}' binds {s.thread.value} inside loop "
                                       f"'{var.name}' bound to it; a block axis cannot be nested "
                                       f"in itself")
            inner_ext = _const(s.extent, f"loop '{s.var.name}' ({s.thread.value})")
            if inner_ext > ext:
                raise GPUScheduleError(
                    f"loop '{s.var.name}' binds {s.thread.value} with extent {inner_ext} inside a "
                    f"loop binding it with extent {ext}; the extents of one thread axis must agree")
            if not (isinstance(s.begin, Const) and s.begin.value == 0):
                raise GPUScheduleError(f"thread-bound loop '{s.var.name}' must start at 0")
            body = substitute_stmt_vars(s.body, {s.var: var})
            body = _merge_nested_bindings(body, bound)
            if inner_ext < ext:
                body = IfThenElse(binary(BinOpKind.LT, var, Const(inner_ext, var.dtype)), body)
            return body
        ext = _const(s.extent, f"loop '{s.var.name}' ({s.thread.value})")
        inner = dict(bound)
        inner[s.thread] = (s.var, ext)
        return _rebuild(s, lambda c: _merge_nested_bindings(c, inner))
    return _rebuild(s, lambda c: _merge_nested_bindings(c, bound))


def _hoist_shared(kernel: For) -> Stmt:
    """Shared allocations moved to the kernel's root: one buffer per block for the whole kernel."""
    found = []

    def strip(s):
        if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED:
            if not all(isinstance(d, int) for d in s.buffer.shape):
                raise GPUScheduleError(f"shared buffer '{s.buffer.name}' needs a constant shape")
            found.append(s.buffer)
            return strip(s.body)
        return _rebuild(s, strip)
    body = strip(kernel.body)
    for b in reversed(found):
        body = Allocate(b, body)
    return For(kernel.var, kernel.begin, kernel.extent, kernel.kind, body, kernel.thread,
               kernel.pragmas)


def _thread_axes(s: Stmt) -> list:
    return [a for a in _THREADS if any(_is_kernel_root(x) and x.thread is a for x in stmts(s))]


def _guard_block_level(kernel: For) -> Stmt:
    """Statements outside every threadIdx loop that write shared or global memory: thread 0."""
    axes = _thread_axes(kernel)
    if not axes:
        return kernel

    def writes_memory(s):
        return any(b.scope is not Scope.LOCAL for b in _written(s))

    def go(s):
        if isinstance(s, For) and s.thread in _THREADS:
            return s
        if not _has_thread_loop(s) and writes_memory(s):
            for a in reversed(axes):
                s = For(Var(f"{a.value}_0"), Const(0, dt.INDEX), Const(1, dt.INDEX),
                        ForKind.THREAD_BOUND, s, thread=a)
            return s
        return _rebuild(s, go)
    return go(kernel)


# ----------------------------------------------------------------------------- barriers

_EMPTY = (frozenset(), frozenset())


def _access(s: Stmt) -> tuple:
    """(shared buffers read, shared buffers written) by ``s`` (a statement without barriers)."""
    loaded, stored, _ = buffer_accesses(s)
    return (frozenset(b for b in loaded if b.scope is Scope.SHARED),
            frozenset(b for b in stored if b.scope is Scope.SHARED))


def _union(a, b):
    return (a[0] | b[0], a[1] | b[1])


def _hazard(before, after, waw: bool = True) -> bool:
    """A read after a write or a write after a read (and, with ``waw``, a write after a write)
    of one shared buffer."""
    return bool(before[1] & (after[0] | after[1] if waw else after[0]) or before[0] & after[1])


def _barriers(s: Stmt) -> tuple:
    """``(s with barriers, summary)``; the summary is ``(first, last, has_barrier)``: the shared
    accesses before the first barrier in ``s``, after the last one, and whether there is one."""
    if isinstance(s, Barrier):
        return s, (_EMPTY, _EMPTY, True)
    if isinstance(s, Seq):
        out, first, pend, any_bar = [], None, _EMPTY, False
        for c in s.stmts:
            c2, (cf, cl, cb) = _barriers(c)
            if _hazard(pend, cf):
                out.append(Barrier())
                first = pend if first is None else first
                pend, any_bar = _EMPTY, True
            out.append(c2)
            if cb:
                first = _union(pend, cf) if first is None else first
                pend, any_bar = cl, True
            else:
                pend = _union(pend, cf)
        return seq(*out), ((first if first is not None else pend), pend, any_bar)
    if isinstance(s, For):
        body, (bf, bl, bb) = _barriers(s.body)
        if s.kind is ForKind.THREAD_BOUND and s.thread is not ThreadAxis.VTHREAD:
            return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.pragmas), (bf, bl, bb)
        once = isinstance(s.extent, Const) and s.extent.value <= 1
        if not once and s.kind is not ForKind.VECTORIZED and _hazard(bl if bb else bf, bf, False):
            # the next iteration's accesses must wait until this one's are done (successive
            # iterations writing distinct elements, as a cooperative fetch loop, need none)
            body = seq(Barrier(), body)
            bf, bb = _EMPTY, True
        loop = For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.pragmas)
        return loop, (bf, bl if bb else bf, bb)
    if isinstance(s, IfThenElse):
        t, (tf, tl, tb) = _barriers(s.then)
        e, (ef, el, eb) = (None, (_EMPTY, _EMPTY, False)) if s.else_ is None else _barriers(s.else_)
        return IfThenElse(s.cond, t, e), (_union(tf, ef), _union(tl, el), tb or eb)
    if isinstance(s, Allocate):
        body, summary = _barriers(s.body)
        return Allocate(s.buffer, body), summary
    acc = _access(s)
    return s, (acc, acc, False)


def _check_uniform_barriers(kernel: Stmt, fname: str) -> None:
    """Raise where a barrier sits under a condition or in a loop that depends on the thread index
    (some threads of a block would not reach it), or in a thread loop narrower than the block."""
    dims: dict = {}
    for x in stmts(kernel):
        if isinstance(x, For) and x.thread in _THREADS and isinstance(x.extent, Const):
            dims[x.thread] = max(dims.get(x.thread, 0), x.extent.value)

    def go(s, tvars, why):
        def varies(e):
            return any(isinstance(v, Var) and id(v) in tvars for v in walk(e))
        if isinstance(s, Barrier) and why:
            raise GPUScheduleError(f"{fname}: a barrier (shared memory) would sit {why}, which not "
                                   f"every thread of a block reaches; compute shared stages outside"
                                   f" thread-dependent guards, or make the tiles divide the extents")
        if isinstance(s, For) and s.thread in _THREADS:
            tvars = tvars | {id(s.var)}
            if isinstance(s.extent, Const) and s.extent.value < dims[s.thread] and not why:
                why = f"in loop '{s.var.name}' bound to {s.extent.value} of the {dims[s.thread]} " \
                      f"threads of {s.thread.value}"
        elif isinstance(s, For) and (varies(s.begin) or varies(s.extent)):
            tvars, why = tvars | {id(s.var)}, why or f"in loop '{s.var.name}' of thread-varying bounds"
        elif isinstance(s, IfThenElse) and varies(s.cond):
            why = why or f"under 'if {s.cond!r}'"
        for c in s.children():
            go(c, tvars, why)
    go(kernel, frozenset(), None)


# ----------------------------------------------------------------------------- validity

def _launch_info(name: str, kernel: Stmt, order: list, limits: GPULimits) -> LaunchInfo:
    dims: dict = {}
    shared = local = 0

    def go(s, vthreads):
        nonlocal shared, local
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND:
            ext = _const(s.extent, f"loop '{s.var.name}' bound to {s.thread.value}")
            if s.thread is ThreadAxis.VTHREAD:
                vthreads *= ext
                if vthreads > limits.max_vthread:
                    raise GPUScheduleError(f"{name}: {vthreads} virtual threads (vthread loops) "
                                           f"exceed the limit of {limits.max_vthread}")
            else:
                dims[s.thread] = max(dims.get(s.thread, 0), ext)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope is Scope.SHARED:
                shared += b.alloc_size * b.dtype.itemsize
            elif b.scope is Scope.LOCAL:
                if not all(isinstance(d, int) for d in b.shape):
                    raise GPUScheduleError(f"{name}: local buffer '{b.name}' needs a constant shape")
                local += -(-b.alloc_size * b.dtype.itemsize // 4)
            else:
                raise GPUScheduleError(f"{name}: global buffer '{b.name}' is allocated inside a "
                                       f"kernel; compute its stage at root or cache it in "
                                       f"'shared'/'local' scope")
        for c in s.children():
            go(c, vthreads)
    go(kernel, 1)
    block = tuple(dims.get(a, 1) for a in _THREADS)
    grid = tuple(dims.get(a, 1) for a in _BLOCKS)
    threads = block[0] * block[1] * block[2]
    if threads > limits.max_threads:
        raise GPUScheduleError(f"{name}: {threads} threads per block {block} exceed the limit of "
                               f"{limits.max_threads}")
    for a, n, lim in zip(_THREADS, block, limits.max_thread_dims):
        if n > lim:
            raise GPUScheduleError(f"{name}: {a.value} extent {n} exceeds the limit of {lim}")
    for a, n, lim in zip(_BLOCKS, grid, limits.max_grid_dims):
        if n > lim:
            raise GPUScheduleError(f"{name}: {a.value} extent {n} exceeds the limit of {lim}")
    if shared > limits.max_shared_bytes:
        raise GPUScheduleError(f"{name}: {shared} bytes of shared memory per block exceed the "
                               f"limit of {limits.max_shared_bytes}")
    if local > limits.max_local_words:
        raise GPUScheduleError(f"{name}: local buffers of {local} 32-bit words per thread exceed "
                               f"the register estimate limit of {limits.max_local_words}")
    used = set()
    for x in stmts(kernel):
        if isinstance(x, Store):
            used.add(x.buffer)
        for e in stmt_exprs(x):
            used.update(y.buffer for y in walk(e) if isinstance(y, Load))
    params = [b for b in order if b in used]
    return LaunchInfo(name, kernel, grid, block, shared, local, params)

