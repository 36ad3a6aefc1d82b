"""Parallel loops for the CPU emitter: outline the loop body and launch it on the thread pool.

A ``ForKind.PARALLEL`` loop ``parallel for v in [begin, begin + n): BODY`` becomes, in the kernel::

    closure = {begin, buffer pointers..., enclosing loop variables...}   ; on the kernel's stack
    tecomp_parallel_for(@K.parN, &closure, n)

(``tecomp_parallel_for_dynamic(@K.parN, &closure, n, chunk)`` when the loop's ``parallel_schedule``
pragma is :attr:`~tecomp.ir.loop.ParallelSchedule.DYNAMIC`: chunks of ``parallel_chunk`` iterations
are claimed at run time, which balances iterations of different lengths, e.g. sparse rows)
and two functions in the kernel's module:

- ``internal void @K.parN(i64 lo, i64 hi, ptr closure)``, the entry the pool calls per chunk: it
  loads the captured values and calls
- ``internal void @K.parN.body(i64 lo, i64 hi, <captures>)``, which runs ``BODY`` for
  ``v = begin + lo .. begin + hi - 1``. Captured buffers are ``noalias`` parameters here (they are
  distinct arrays, as the kernel's own parameters are), so the body optimizes as the serial loop
  would; LLVM inlines it into ``@K.parN``.

The closure holds every value the body uses from outside: buffer base pointers (parameters and
allocations of enclosing scopes), enclosing loop variables (also those in dynamic allocation shapes,
which strides use). Loop bounds inside the body that load values are evaluated in the body through
the captured pointers. Allocations inside the body stay per iteration, hence per thread. Only the
outermost parallel loop of a nest is outlined; parallel loops inside it run serially.

The pool itself (threads, chunking, waiting) is :mod:`.threadpool`; :func:`set_num_threads` sets how
many threads a launch uses, :func:`stats` and :func:`shutdown` inspect and stop it.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir.expr import Expr, Load, Var
from ..ir.loop import (
    PRAGMA_PARALLEL_CHUNK,
    PRAGMA_PARALLEL_SCHEDULE,
    Allocate,
    For,
    ForKind,
    IfThenElse,
    ParallelSchedule,
    Store,
    stmts,
)
from ..ir.traverse import walk
from .llvm_expr import I32, I64, PTR, VOID, ident, reg_type
from .threadpool import (
    BALANCE_GRAIN,
    DYNAMIC_ENTRY,
    ENTRY,
    MAX_THREADS,
    default_num_threads,
    loaded,
    runtime,
)

__all__ = ["emit_parallel", "parallel_schedule", "captures", "set_num_threads", "get_num_threads",
           "default_num_threads", "set_spin_time", "set_balance", "get_balance", "shutdown", "stats",
           "set_scratch_cache", "scratch_stats", "ENTRY", "DYNAMIC_ENTRY", "BALANCE_GRAIN"]


# ----------------------------------------------------------------------------- the pool's settings

def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the calling thread included) for parallel loops from now on.

    Parameters
    ----------
    n : int
        1 runs parallel loops serially; at most :data:`MAX_THREADS`. Workers are started lazily by
        the first launch that needs them and stay alive (idle workers sleep).
    """
    n = int(n)
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"set_num_threads: n must be in [1, {MAX_THREADS}], got {n}")
    rt = runtime()
    rt.threads = n
    rt.push()


def get_num_threads() -> int:
    """The number of threads parallel loops use (the calling thread included)."""
    return runtime().threads


def set_spin_time(seconds: float) -> None:
    """How long an idle worker (or a waiting launcher) spins before it sleeps on a futex.

    Parameters
    ----------
    seconds : float
        Default :data:`~.threadpool.SPIN_SECONDS`. Longer spinning makes launches that follow
        each other closely cheaper (no futex wake-up) and burns more CPU between them.
    """
    if not seconds >= 0:
        raise ValueError(f"set_spin_time: seconds must be >= 0, got {seconds}")
    rt = runtime()
    rt.spin = float(seconds)
    rt.push()


def set_balance(grain: int) -> None:
    """How a static parallel loop's iterations are divided among the threads.

    Parameters
    ----------
    grain : int
        0: one equal contiguous chunk per thread. ``g >= 1`` (default
        :data:`~.threadpool.BALANCE_GRAIN`): about ``g`` chunks per thread, claimed in order by
        whichever thread is free, so that a thread whose core runs slower (a busy sibling
        hyperthread, a vCPU the host preempts) hands its remaining chunks to the others instead of
        making the whole launch wait for it. Loops with a dynamic schedule pragma keep their own
        chunk size. A kernel loaded from an export whose runtime predates this setting ignores it.
    """
    grain = int(grain)
    if grain < 0:
        raise ValueError(f"set_balance: grain must be >= 0, got {grain}")
    rt = runtime()
    rt.grain = grain if rt.set_grain else 0
    rt.push()


def get_balance() -> int:
    """The current :func:`set_balance` grain (0 where the loaded runtime cannot balance)."""
    return runtime().grain


def stats() -> dict:
    """``{"workers": running worker threads, "worker_chunks": chunks run by workers so far}``."""
    rt = runtime()
    return {"workers": rt.stats(0), "worker_chunks": rt.stats(1)}


def set_scratch_cache(nbytes: int) -> int:
    """Free the intermediate buffers the runtime keeps for the next kernel call, and keep at most
    ``nbytes`` of them from now on (:mod:`.scratch_ir`; default
    :data:`~.threadpool.SCRATCH_CAP`).

    Parameters
    ----------
    nbytes : int
        0 keeps none: every call allocates its buffers afresh (and may fault their pages in).

    Returns
    -------
    int
        The bytes freed.
    """
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"set_scratch_cache: nbytes must be >= 0, got {nbytes}")
    return int(runtime().scratch_set(nbytes))


def scratch_stats() -> dict:
    """``{"cached_bytes": held for the next call, "hits": buffers served from the cache,
    "misses": buffers allocated afresh}``, counted since the process started."""
    rt = runtime()
    return {"cached_bytes": rt.scratch_stats(0), "hits": rt.scratch_stats(1),
            "misses": rt.scratch_stats(2)}


def shutdown() -> None:
    """Stop and join the worker threads (waiting for a running launch first); the next launch that
    needs workers starts them again."""
    rt = loaded()
    if rt is not None:
        rt.shutdown(0)


# ----------------------------------------------------------------------------- code generation

# emitter attributes that belong to the function being emitted (swapped while outlining)
_FUNC_STATE = ("fn", "entry_builder", "start", "b", "vars", "bufs", "cache", "allocas")


def captures(em, s: For) -> tuple:
    """What the body of loop ``s`` uses from the scope the emitter ``em`` is in.

    Returns
    -------
    (list of Buffer, list of Var)
        Buffers bound in ``em.bufs`` and variables bound in ``em.vars`` (not ``s.var``) that the
        body reads or writes, in order of first use.
    """
    bufs: dict = {}
    vars_: dict = {}

    def see_expr(e) -> None:
        if not isinstance(e, Expr):
            return
        for x in walk(e):
            if isinstance(x, Var):
                vars_.setdefault(id(x), x)
            elif isinstance(x, Load):
                see_buf(x.buffer)

    def see_buf(buf) -> None:
        if buf not in bufs:
            bufs[buf] = None
            for d in buf.shape:  # dynamic shapes make strides depend on enclosing variables
                see_expr(d)

    for st in stmts(s.body):
        if isinstance(st, For):
            see_expr(st.begin)
            see_expr(st.extent)
        elif isinstance(st, Store):
            see_buf(st.buffer)
            for e in (*st.indices, st.value):
                see_expr(e)
        elif isinstance(st, IfThenElse):
            see_expr(st.cond)
        elif isinstance(st, Allocate):
            see_buf(st.buffer)
    cap_bufs = [b for b in bufs if b in em.bufs]
    cap_vars = [v for k, v in vars_.items() if k in em.vars and v is not s.var]
    return cap_bufs, cap_vars


def parallel_schedule(s: For) -> tuple:
    """``(ParallelSchedule, chunk)`` of the parallel loop ``s`` from its pragmas (STATIC and 0 when
    it has none; a DYNAMIC loop without ``parallel_chunk`` uses chunks of 1).

    Raises
    ------
    ValueError
        A ``parallel_schedule`` value that is no :class:`ParallelSchedule`, or a chunk below 1.
    """
    prag = dict(s.pragmas)
    raw = prag.get(PRAGMA_PARALLEL_SCHEDULE, ParallelSchedule.STATIC)
    try:
        mode = ParallelSchedule(raw)
    except ValueError:
        raise ValueError(f"parallel loop '{s.var.name}': pragma {PRAGMA_PARALLEL_SCHEDULE}={raw!r} "
                         f"is not a ParallelSchedule") from None
    if mode is ParallelSchedule.STATIC:
        return mode, 0
    chunk = int(prag.get(PRAGMA_PARALLEL_CHUNK, 1))
    if chunk < 1:
        raise ValueError(f"parallel loop '{s.var.name}': pragma {PRAGMA_PARALLEL_CHUNK}={chunk} "
                         f"must be >= 1")
    return mode, chunk


def emit_parallel(em, s: For) -> None:
    """Emit the parallel loop ``s`` at the position of ``em``: outline its body and call the pool's
    ``tecomp_parallel_for``; inside an outlined body, emit a serial loop.

    Parameters
    ----------
    em : StmtEmitter
        The CPU emitter (:mod:`.llvm_cpu`); its per-function state is swapped while the body is
        emitted into the outlined function, and restored.
    s : For
        A ``ForKind.PARALLEL`` loop.
    """
    if getattr(em, "_in_parallel", False):
        em.counted_loop(s)  # nested parallelism runs serially inside the outer one's chunks
        return
    runtime()  # the entry must be a registered symbol before this module is JIT-compiled
    b = em.b
    vt = reg_type(s.var.dtype)
    begin = em.int_to(em.stmt_expr(s.begin), s.begin.dtype, vt)
    n = em.int_to(em.stmt_expr(s.extent), s.extent.dtype, I64)
    cap_bufs, cap_vars = captures(em, s)
    fields = [begin] + [em.bufs[x] for x in cap_bufs] + [em.vars[id(v)] for v in cap_vars]
    ctype = ir.LiteralStructType([f.type for f in fields])
    closure = em.entry_builder.alloca(ctype, name="closure")
    closure.type = PTR  # llvmlite types an alloca as a typed pointer; the IR is opaque-pointer
    for k, f in enumerate(fields):
        b.store(f, b.gep(closure, [I32(0), I32(k)], inbounds=True, source_etype=ctype))
    entry = _outline(em, s, ctype, cap_bufs, cap_vars)
    mode, chunk = parallel_schedule(s)
    if mode is ParallelSchedule.DYNAMIC:
        b.call(em.declare(DYNAMIC_ENTRY, VOID, [PTR, PTR, I64, I64]),
               [entry, closure, n, I64(chunk)])
    else:
        b.call(em.declare(ENTRY, VOID, [PTR, PTR, I64]), [entry, closure, n])
    em.cache = {}  # the body may have written memory that later expressions read


def _outline(em, s: For, ctype: ir.LiteralStructType, cap_bufs: list, cap_vars: list) -> ir.Function:
    """The chunk entry ``void (i64 lo, i64 hi, ptr closure)`` and the body function it calls."""
    count = getattr(em, "_parallel_count", 0)
    em._parallel_count = count + 1
    name = f"{em.symbol}.par{count}"
    vt = ctype.elements[0]
    var_types = list(ctype.elements[1 + len(cap_bufs):])
    body_fn = ir.Function(em.module, ir.FunctionType(VOID, [I64, I64, vt] + [PTR] * len(cap_bufs)
                                                     + var_types), name=name + ".body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("nounwind")
    lo, hi, base = body_fn.args[:3]
    lo.name, hi.name, base.name = "lo", "hi", "begin"
    for arg, buf in zip(body_fn.args[3:], cap_bufs):
        arg.name = ident(buf.name)
        arg.add_attribute("noalias")
    for arg, v in zip(body_fn.args[3 + len(cap_bufs):], cap_vars):
        arg.name = ident(v.name)

    entry = ir.Function(em.module, ir.FunctionType(VOID, [I64, I64, PTR]), name=name)
    entry.linkage = "internal"
    entry.attributes.add("nounwind")
    for arg, nm in zip(entry.args, ("lo", "hi", "closure")):
        arg.name = nm
    eb = ir.IRBuilder(entry.append_basic_block("entry"))
    loaded = [eb.load(eb.gep(entry.args[2], [I32(0), I32(k)], inbounds=True, source_etype=ctype),
                      typ=t) for k, t in enumerate(ctype.elements)]
    eb.call(body_fn, [entry.args[0], entry.args[1], *loaded])
    eb.ret_void()

    saved = {a: getattr(em, a) for a in _FUNC_STATE}
    try:
        em.fn = body_fn
        em.entry_builder = ir.IRBuilder(body_fn.append_basic_block("entry"))
        em.start = body_fn.append_basic_block("start")
        em.b = ir.IRBuilder(em.start)
        em.bufs = dict(zip(cap_bufs, body_fn.args[3:]))
        em.vars = {id(v): a for v, a in zip(cap_vars, body_fn.args[3 + len(cap_bufs):])}
        em.cache, em.allocas = {}, {}
        em._in_parallel = True
        # the chunk [lo, hi) of iteration numbers is the serial loop v in [begin + lo, begin + hi)
        first, trip = Var("chunk_begin", s.var.dtype), Var("chunk_extent", s.var.dtype)
        narrow = (lambda x: em.b.trunc(x, vt)) if vt.width < 64 else (lambda x: x)
        em.vars[id(first)] = em.b.add(base, narrow(lo), flags=["nsw"])
        em.vars[id(trip)] = narrow(em.b.sub(hi, lo, flags=["nsw"]))
        em.counted_loop(For(s.var, first, trip, ForKind.SERIAL, s.body))
        em.b.ret_void()
        em.entry_builder.branch(em.start)
    finally:
        em._in_parallel = False
        for a, v in saved.items():
            setattr(em, a, v)
    return entry
