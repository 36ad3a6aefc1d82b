"""CPU code generation: loop IR -> LLVM IR (llvmlite.ir) -> native code through MCJIT.

A :class:`~tecomp.ir.loop.PrimFunc` becomes one function ``void NAME(ptr noalias p0, ptr noalias p1,
...)`` taking one pointer per parameter buffer (row-major, flat indexing with ``Buffer.strides``). The
module is optimized with LLVM's new pass manager at ``opt_level`` for the host CPU and JIT-compiled;
:class:`CompiledCPU` calls it through ctypes.

This module emits statements and assembles the module; expressions and their numpy semantics are in
:mod:`.llvm_expr`, LLVM setup, optimization and the JIT in :mod:`.llvm_jit`.
"""
from __future__ import annotations

import ctypes
import weakref

import llvmlite.ir as ir
from llvmlite.ir import values as ir_values

from ..ir.expr import Const, Expr
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
    stmts,
    verify,
)
from .llvm_expr import I1, I8, I32, I64, PTR, VOID, ExprEmitter, dispatch, ident, mem_type, reg_type
from .llvm_jit import LOCK, assembly, ensure_init, host_cpu, jit, triple_and_layout
from .llvm_reduce import emit_reduction_loop
from .llvm_transpose import emit_transpose_copy
from .llvm_vector import emit_vector_loop
from .memory import alloc_flag, check_allocations, failed_allocation, heap_buffers
from .parallel import emit_parallel
from .threadpool import SCRATCH_ALLOC, SCRATCH_FREE, has_runtime, runtime

__all__ = ["CompiledCPU", "compile_cpu", "emit_cpu", "emit_module", "host_cpu", "kernel_symbol"]

#: allocations of at most this many bytes with a constant size live on the stack
MAX_STACK_ALLOC = 64 * 1024
#: unrolled loops with a constant extent up to this are unrolled by the emitter itself
MAX_EMIT_UNROLL = 64

# names of library functions the lowered code may call: a kernel must not shadow them
_RESERVED = {"exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "fmod", "fmodf", "floor",
             "floorf", "malloc", "free", "aligned_alloc", "memset", "memcpy", "memmove", "main",
             "tecomp_parallel_for", "tecomp_parallel_for_dynamic", "tecomp_scratch_alloc",
             "tecomp_scratch_free"}


def kernel_symbol(name: str) -> str:
    """The LLVM symbol of a kernel named ``name``: an identifier that no runtime name can clash
    with (the NVPTX emitter names its entries the same way)."""
    s = ident(name) or "kernel"
    if s[0].isdigit() or s in _RESERVED or s.startswith("__"):
        s = "tecomp_" + s
    return s


def _check_cpu(func: PrimFunc) -> None:
    for s in stmts(func.body):
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND:
            raise ValueError(f"{func.name}: loop '{s.var.name}' is bound to {s.thread.value}; GPU "
                             f"thread binding cannot be compiled for CPU; use target cuda or "
                             f"emulate()")
        if isinstance(s, Barrier):
            raise NotImplementedError(f"{func.name}: a barrier (__syncthreads) has no meaning in a "
                                      f"CPU kernel and cannot be compiled for CPU")


# ----------------------------------------------------------------------------- statements

class StmtEmitter(ExprEmitter):
    """Emits a :class:`PrimFunc` as one LLVM function ``void symbol(ptr, ...)`` in its own module.

    Statements dispatch on their class through ``_STMT`` and loops on their kind through ``_LOOP``
    (one method each), so a new statement or loop kind is a table entry and a method.
    """

    _STMT = {Seq: "emit_seq", Store: "emit_store", For: "emit_for", IfThenElse: "emit_if",
             Allocate: "emit_allocate"}
    _LOOP = {ForKind.SERIAL: "loop_serial", ForKind.PARALLEL: "loop_parallel",
             ForKind.VECTORIZED: "loop_vectorized", ForKind.UNROLLED: "loop_unrolled"}

    def __init__(self, func: PrimFunc):
        self.symbol = kernel_symbol(func.name)
        module = ir.Module(name=self.symbol)
        module.triple, module.data_layout = triple_and_layout()
        fn = self.fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * len(func.params)),
                                   name=self.symbol)
        fn.attributes.add("nounwind")
        self.entry_builder = ir.IRBuilder(fn.append_basic_block("entry"))  # allocas go here
        self.start = fn.append_basic_block("start")
        super().__init__(func, module, ir.IRBuilder(self.start))
        for i, (arg, buf) in enumerate(zip(fn.args, func.params)):
            arg.name = f"p{i}_{ident(buf.name)}"
            arg.add_attribute("noalias")
            self.bufs[buf] = arg
        self.allocas: dict = {}

    def run(self) -> ir.Module:
        self.stmt(self.func.body)
        self.b.ret_void()
        self.entry_builder.branch(self.start)
        return self.module

    def stmt_expr(self, e: Expr) -> ir.Value:
        """Evaluate an expression of one statement (values are not reused across statements, since
        a store between them may change what a load reads)."""
        self.cache = {}
        return self.expr(e)

    def stmt(self, s: Stmt) -> None:
        name = dispatch(self._STMT, s)
        if name is None:
            raise TypeError(f"cannot compile statement {type(s).__name__} for CPU")
        getattr(self, name)(s)

    def emit_seq(self, s: Seq) -> None:
        for c in s.stmts:
            self.stmt(c)

    def emit_store(self, s: Store) -> None:
        t = s.buffer.dtype
        if s.value.dtype is not t:
            raise TypeError(f"store of a {s.value.dtype} value into buffer '{s.buffer.name}' of "
                            f"type {t}")
        v = self.stmt_expr(s.value)
        ptr = self.address(s.buffer, s.indices)
        if t.is_bool:
            v = self.b.zext(v, I8)
        self.b.store(v, ptr, align=t.itemsize)

    def emit_if(self, s: IfThenElse) -> None:
        cond = self.stmt_expr(s.cond)
        if s.else_ is None:
            with self.b.if_then(cond):
                self.stmt(s.then)
            return
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then)
            with otherwise:
                self.stmt(s.else_)

    # ------------------------------------------------------------------ loops

    def emit_for(self, s: For) -> None:
        if id(s.var) in self.vars:
            raise ValueError(f"loop variable '{s.var.name}' is bound twice on one path")
        name = self._LOOP.get(s.kind)
        if name is None:
            raise ValueError(f"loop '{s.var.name}' of kind {s.kind.value} cannot be compiled for CPU")
        getattr(self, name)(s)

    #: a serial loop reducing into one element runs as vector lanes (.llvm_reduce); not on a GPU,
    #: whose threads are its lanes
    VECTOR_REDUCTIONS = True

    def vector_reduction(self, s: For) -> bool:
        """Emit ``s`` as a vector reduction where it is one (True), else nothing (False)."""
        return self.VECTOR_REDUCTIONS and emit_reduction_loop(self, s)

    #: a copy between two loops that transposes runs as blocked register transposes
    #: (.llvm_transpose); not on a GPU
    TRANSPOSE_COPIES = True

    def transpose_copy(self, s: For) -> bool:
        """Emit ``s`` as register transposes where it is a transposing copy (True)."""
        return self.TRANSPOSE_COPIES and emit_transpose_copy(self, s)

    def loop_serial(self, s: For) -> None:
        if not self.transpose_copy(s) and not self.vector_reduction(s):
            self.counted_loop(s)

    def loop_parallel(self, s: For) -> None:
        emit_parallel(self, s)  # outlined and run on the thread pool (.parallel)

    def loop_vectorized(self, s: For) -> None:
        # vector instructions of the host's width (.llvm_vector); when the body cannot be vectorized
        # exactly, the scalar loop with LLVM's vectorize hint
        if not emit_vector_loop(self, s) and not self.vector_reduction(s):
            self.counted_loop(s, ["llvm.loop.vectorize.enable", I1(1)])

    def loop_unrolled(self, s: For) -> None:
        if self.transpose_copy(s) or self.vector_reduction(s):
            return
        if isinstance(s.extent, Const) and s.extent.value <= MAX_EMIT_UNROLL:
            self.unroll(s)
        else:
            self.counted_loop(s, ["llvm.loop.unroll.full"])

    def counted_loop(self, s: For, hint: list | None = None) -> None:
        """``for var in [begin, begin + extent)`` as head/body/exit blocks; ``hint`` becomes the
        latch's ``llvm.loop`` property."""
        b = self.b
        vt = reg_type(s.var.dtype)
        begin = self.int_to(self.stmt_expr(s.begin), s.begin.dtype, vt)
        extent = self.int_to(self.stmt_expr(s.extent), s.extent.dtype, vt)
        end = b.add(begin, extent)
        pre = b.block
        name = ident(s.var.name)
        head = b.append_basic_block(f"{name}.head")
        body = b.append_basic_block(f"{name}.body")
        exit_ = b.append_basic_block(f"{name}.exit")
        b.branch(head)
        b.position_at_end(head)
        iv = b.phi(vt, name=name)
        iv.add_incoming(begin, pre)
        b.cbranch(b.icmp_signed("<", iv, end), body, exit_)
        b.position_at_end(body)
        self.vars[id(s.var)] = iv
        self.stmt(s.body)
        del self.vars[id(s.var)]
        nxt = b.add(iv, vt(1), flags=["nsw"])  # iv < end, so iv + 1 cannot overflow
        iv.add_incoming(nxt, b.block)
        latch = b.branch(head)
        if hint is not None:
            latch.set_metadata("llvm.loop", self.loop_md(hint))
        b.position_at_end(exit_)

    def unroll(self, s: For) -> None:
        """The body once per iteration of a constant-extent loop, with the variable a constant
        (or ``begin + k`` when ``begin`` is not constant)."""
        if s.extent.value <= 0:
            return
        vt = reg_type(s.var.dtype)
        begin = None
        if not isinstance(s.begin, Const):
            begin = self.int_to(self.stmt_expr(s.begin), s.begin.dtype, vt)
        for k in range(s.extent.value):
            if begin is None:
                self.vars[id(s.var)] = vt(int(s.begin.value) + k)
            else:
                self.vars[id(s.var)] = self.b.add(begin, vt(k), flags=["nsw"]) if k else begin
            self.stmt(s.body)
        del self.vars[id(s.var)]

    def loop_md(self, prop: list) -> ir_values.MDValue:
        """A self-referential loop ID ``!N = !{!N, !{...}}``."""
        m = self.module
        inner = m.add_metadata(prop)
        md = ir_values.MDValue(m, [], name=str(len(m.metadata)))
        md.operands = (md, inner)
        return md

    # ------------------------------------------------------------------ allocation

    def emit_allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf in self.bufs:
            raise ValueError(f"buffer '{buf.name}' is allocated twice on one path")
        n = None  # element count when constant
        if all(isinstance(d, int) for d in buf.shape):
            n = buf.alloc_size  # padded strides (storage_align) span more than the shape
        elif all(isinstance(d, (int, Const)) for d in buf.shape):
            n = 1
            for d in buf.shape:
                n *= int(d.value if isinstance(d, Const) else d)
        if n is not None and n * buf.dtype.itemsize <= MAX_STACK_ALLOC:
            self.with_buffer(buf, self.stack_slot(s, n), s.body)
        else:
            self.heap_allocate(s, n)

    def with_buffer(self, buf, ptr: ir.Value, body: Stmt) -> None:
        self.bufs[buf] = ptr
        self.stmt(body)
        del self.bufs[buf]

    def stack_slot(self, s: Allocate, n: int) -> ir.Value:
        """An aligned ``alloca`` of ``n`` elements in the entry block, one per statement (reused
        when an unrolled body repeats it)."""
        ptr = self.allocas.get(s)
        if ptr is None:
            buf = s.buffer
            ptr = self.entry_builder.alloca(ir.ArrayType(mem_type(buf.dtype), n), name=ident(buf.name))
            ptr.align = 64
            ptr.type = PTR  # llvmlite types an alloca as a typed pointer; we index it flat
            self.allocas[s] = ptr
        return ptr

    def heap_allocate(self, s: Allocate, n: int | None) -> None:
        """A heap block around the body, given back after it; ``n`` is the element count when it
        is constant. A constant size comes from the runtime's scratch cache (the next call
        reuses the block's pages: :mod:`.scratch_ir`), any other from ``aligned_alloc``."""
        b, buf = self.b, s.buffer
        scratch = n is not None and has_runtime()
        if n is not None:
            size = I64(-(-n * buf.dtype.itemsize // 64) * 64)
        else:
            self.cache = {}
            count = I64(1)
            for d in buf.shape:
                dv = I64(int(d)) if isinstance(d, int) else self.int_to(self.expr(d), d.dtype, I64)
                count = b.mul(count, dv)
            nbytes = b.mul(count, I64(buf.dtype.itemsize))
            size = b.and_(b.add(nbytes, I64(63)), I64(-64))  # aligned_alloc wants a multiple
        if scratch:
            runtime()  # its symbols must be registered before this module is JIT-compiled
            alloc = self.declare(SCRATCH_ALLOC, PTR, [I64])
            # a fresh block, as malloc's: without this LLVM must assume the buffer aliases every
            # other pointer, and keeps the kernel's loads and stores in order (2.4x slower tiles)
            alloc.return_value.add_attribute("noalias")
            alloc.attributes.add("nounwind")
            free = self.declare(SCRATCH_FREE, VOID, [PTR, I64])
            free.attributes.add("nounwind")
            ptr = b.call(alloc, [size], name=ident(buf.name))
        else:
            alloc = self.declare("aligned_alloc", PTR, [I64, I64])
            free = self.declare("free", VOID, [PTR])
            ptr = b.call(alloc, [I64(64), size], name=ident(buf.name))
        # a failed allocation skips the body and leaves the buffer's number in the kernel's
        # alloc-failure word, which CompiledCPU.run turns into a MemoryError (it segfaulted)
        outer = self.cache
        with b.if_else(b.icmp_unsigned("!=", ptr, ir.Constant(PTR, None))) as (ok, failed):
            with ok:
                self.cache = dict(outer)  # values of the body are not available after it
                self.with_buffer(buf, ptr, s.body)
                self.b.call(free, [ptr, size] if scratch else [ptr])
            with failed:
                self.b.store(I32(heap_buffers(self.func).index(buf) + 1),
                             alloc_flag(self.module, self.symbol))
        self.cache = outer


# ----------------------------------------------------------------------------- public API

def emit_cpu(func: PrimFunc) -> StmtEmitter:
    """Check ``func`` for the CPU, verify it and emit it; the emitter holds the LLVM module."""
    _check_cpu(func)
    verify(func)
    check_allocations(func)  # MemoryError for buffers that cannot exist on this machine
    ensure_init()
    em = StmtEmitter(func)
    em.run()
    return em


def emit_module(func: PrimFunc) -> str:
    """The unoptimized LLVM IR text of ``func`` (no JIT)."""
    with LOCK:
        return str(emit_cpu(func).module)


class CompiledCPU:
    """A JIT-compiled CPU kernel; the execution engine lives as long as this object.

    ``source`` is the optimized LLVM IR, ``source_unoptimized`` the emitted one.
    """

    def __init__(self, func: PrimFunc, symbol: str, source: str, source_unoptimized: str, engine,
                 address: int):
        self.func = func
        self.name = symbol
        self.source = source
        self.source_unoptimized = source_unoptimized
        self._engine = engine
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(func.params)))
        self._cfunc = proto(address)
        self._alloc_flag = failed_allocation(engine, symbol) if engine is not None else None
        self._last = [None] * len(func.params)  # (weakref to an array, its address) by position

    def _addresses(self, arrays: list) -> list:
        """The data addresses of ``arrays``. ``a.ctypes.data`` takes a microsecond an array, so
        each position remembers its last array (weakly) and address: an array's data never
        moves, and a loop calling with the same arrays skips it. One tuple per position, swapped
        whole, so concurrent callers never pair one array with another's address."""
        last = self._last
        out = []
        for i, a in enumerate(arrays):
            ent = last[i]
            if ent is not None and ent[0]() is a:
                out.append(ent[1])
            else:
                p = a.ctypes.data
                last[i] = (weakref.ref(a), p)
                out.append(p)
        return out

    def run(self, arrays: list) -> None:
        """Call the kernel on ``arrays`` (in ``func.params`` order, C-contiguous, of the right dtype
        and shape, distinct); outputs are written in place. The GIL is released during the call."""
        if len(arrays) != len(self.func.params):
            raise ValueError(f"{self.func.name} takes {len(self.func.params)} arrays, "
                             f"got {len(arrays)}")
        self._cfunc(*self._addresses(arrays))
        if self._alloc_flag is not None and self._alloc_flag.value:
            self._alloc_flag.raise_error(self.func)

    def bind(self, arrays: list, keep: bool = True):
        """A zero-argument callable that runs the kernel on ``arrays`` (as :meth:`run`) with their
        addresses taken once; it keeps this compiled code alive (a kernel dropped by its caller
        while the callable lives must not take the machine code with it) and, with ``keep``, the
        arrays too. Without ``keep`` the caller must make sure they are alive at each call."""
        if len(arrays) != len(self.func.params):
            raise ValueError(f"{self.func.name} takes {len(self.func.params)} arrays, "
                             f"got {len(arrays)}")
        addresses = [a.ctypes.data for a in arrays]
        cfunc, flag, func = self._cfunc, self._alloc_flag, self.func

        def call() -> None:
            cfunc(*addresses)
            if flag is not None and flag.value:
                flag.raise_error(func)
        call.arrays = list(arrays) if keep else None
        call.compiled = self  # the engine that owns the code cfunc points into
        return call

    def assembly(self) -> str:
        """The host assembly of the optimized module (for inspection)."""
        return assembly(self.source)

    def __repr__(self):
        return f"CompiledCPU({self.func.name!r})"


def compile_cpu(func: PrimFunc, opt_level: int = 3) -> CompiledCPU:
    """Translate ``func`` to LLVM IR, optimize it at ``opt_level`` (0-3) for the host and JIT it.

    Raises ValueError for GPU thread-bound loops and NotImplementedError for barriers.
    """
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level}")
    with LOCK:
        em = emit_cpu(func)
        text = str(em.module)
        optimized, engine, address = jit(text, em.symbol, opt_level)
    return CompiledCPU(func, em.symbol, optimized, text, engine, address)
