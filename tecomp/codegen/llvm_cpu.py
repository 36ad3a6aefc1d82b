"""CPU code generation: loop IR -> LLVM IR (llvmlite.ir) -> native code through MCJIT.

A :class:`~tecomp.ir.loop.PrimFunc` becomes one function ``void NAME(ptr noalias p0, ptr noalias p1,
...)`` taking one pointer per parameter buffer (row-major, flat indexing with ``Buffer.strides``). The
module is optimized with LLVM's new pass manager at ``opt_level`` for the host CPU and JIT-compiled;
:class:`CompiledCPU` calls it through ctypes.

Semantics follow :func:`tecomp.ir.evaluate.eval_np` (numpy): integer arithmetic wraps, integer
floor division and modulo by zero give 0 and never trap, float floor division and modulo reproduce
numpy's ``npy_divmod``, float min/max propagate NaN, float comparisons are ordered (``!=`` is
unordered), and float operations carry only the ``contract`` fast-math flag (FMA contraction), so
results are IEEE-correct apart from contraction. ``float16`` arithmetic is done per operation in
half precision; float16 math functions are computed in float32 and rounded. ``bool`` is ``i1`` in
registers and one byte in memory.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir
from llvmlite.ir import values as ir_values

from ..ir import dtype as dt
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Select, UnOp, UnOpKind, Var, walk)
from ..ir.loop import (Allocate, Barrier, Buffer, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store,
                       stmts, verify)

__all__ = ["CompiledCPU", "compile_cpu", "emit_module", "host_cpu"]

# ----------------------------------------------------------------------------- LLVM setup

_LOCK = threading.RLock()  # LLVM's global context and MCJIT creation are not thread-safe
_INITIALIZED = False
_HOST: tuple | None = None
_LAYOUT: tuple | None = None  # (triple, data layout)

#: allocations of at most this many bytes with a constant size live on the stack
MAX_STACK_ALLOC = 64 * 1024


def _ensure_init() -> None:
    global _INITIALIZED
    if _INITIALIZED:
        return
    with _LOCK:
        if _INITIALIZED:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        # MCJIT resolves external symbols (libm calls that intrinsics lower to, memset/memcpy formed
        # by loop idiom recognition, malloc/free, half-precision helpers) only in libraries loaded
        # permanently; the process itself is not searched.
        names = [ctypes.util.find_library("m"), ctypes.util.find_library("c"),
                 ctypes.util.find_library("gcc_s")]
        for name in names:
            if name:
                try:
                    llvm.load_library_permanently(name)
                except RuntimeError:
                    pass
        _INITIALIZED = True


def host_cpu() -> tuple:
    """``(cpu name, feature string)`` of the host, as LLVM detects them."""
    global _HOST
    _ensure_init()
    if _HOST is None:
        _HOST = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return _HOST


def _target_machine(opt_level: int = 3):
    cpu, features = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=opt_level,
                                        codemodel="jitdefault", jit=True)


def _layout() -> tuple:
    global _LAYOUT
    if _LAYOUT is None:
        tm = _target_machine()
        _LAYOUT = (tm.triple, str(tm.target_data))
    return _LAYOUT


# ----------------------------------------------------------------------------- types

_I1, _I8, _I32, _I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_HALF, _FLOAT, _DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_PTR = ir.PointerType()
_VOID = ir.VoidType()

_REG = {dt.float16: _HALF, dt.float32: _FLOAT, dt.float64: _DOUBLE, dt.int8: _I8, dt.int32: _I32,
        dt.int64: _I64, dt.bool_: _I1}
_FAST = ("contract",)  # FMA contraction only: no reassociation, no NaN/inf assumptions

# names of library functions the lowered code may call: a kernel must not shadow them
_RESERVED = {"exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "fmod", "fmodf", "floor",
             "floorf", "malloc", "free", "aligned_alloc", "memset", "memcpy", "memmove", "main"}


def _reg(t: dt.DType) -> ir.Type:
    return _REG[t]


def _mem(t: dt.DType) -> ir.Type:
    return _I8 if t.is_bool else _REG[t]


def _symbol(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"
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


# ----------------------------------------------------------------------------- emitter

class _Emitter:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.symbol = _symbol(func.name)
        triple, layout = _layout()
        m = self.module = ir.Module(name=self.symbol)
        m.triple, m.data_layout = triple, layout
        fnty = ir.FunctionType(_VOID, [_PTR] * len(func.params))
        fn = self.fn = ir.Function(m, fnty, name=self.symbol)
        fn.attributes.add("nounwind")
        self.bufs: dict = {}
        for i, (arg, buf) in enumerate(zip(fn.args, func.params)):
            arg.name = f"p{i}_{re.sub(r'[^A-Za-z0-9_]', '_', buf.name)}"
            arg.add_attribute("noalias")
            self.bufs[buf] = arg
        self.entry = fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(self.entry)
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self.vars: dict = {}
        self.cache: dict = {}
        self.allocas: dict = {}
        self.strides: dict = {}
        self._has_load: dict = {}

    def run(self) -> ir.Module:
        self.stmt(self.func.body)
        self.b.ret_void()
        self.entry_builder.branch(self.fn.basic_blocks[1])
        return self.module

    # ------------------------------------------------------------------ helpers

    def intrinsic(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        g = self.module.globals.get(name)
        if g is None:
            g = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return g

    def call_intr(self, base: str, x: ir.Value, *rest: ir.Value) -> ir.Value:
        t = x.type
        fn = self.intrinsic(f"{base}.{t.intrinsic_name}", t, [t] + [r.type for r in rest])
        return self.b.call(fn, [x, *rest])

    def has_load(self, e: Expr) -> bool:
        k = id(e)
        r = self._has_load.get(k)
        if r is None:
            r = self._has_load[k] = any(isinstance(x, Load) for x in walk(e))
        return r

    def loop_md(self, prop: list) -> ir_values.MDValue:
        """A self-referential loop ID ``!N = !{!N, !{...}}``."""
        m = self.module
        inner = m.add_metadata(prop)
        md = ir_values.MDValue(m, [], name=str(len(m.metadata)))
        md.operands = (md, inner)
        return md

    def address(self, buf: Buffer, indices: tuple) -> ir.Value:
        base = self.bufs.get(buf)
        if base is None:
            raise ValueError(f"{self.func.name}: buffer '{buf.name}' is neither a parameter nor "
                             f"allocated around its use")
        if len(indices) != len(buf.shape):
            raise ValueError(f"buffer '{buf.name}' of rank {len(buf.shape)} indexed with "
                             f"{len(indices)} indices")
        strides = self.strides.get(buf)
        if strides is None:  # kept alive: the expression cache is keyed by node identity
            strides = self.strides[buf] = buf.strides
        flat = None
        for ix, st in zip(indices, strides):
            v = self.int_to(self.expr(ix), ix.dtype, _I64)
            if isinstance(st, Expr):
                v = self.b.mul(v, self.int_to(self.expr(st), st.dtype, _I64), flags=["nsw"])
            elif st != 1:
                v = self.b.mul(v, _I64(st), flags=["nsw"])
            flat = v if flat is None else self.b.add(flat, v, flags=["nsw"])
        if flat is None:
            flat = _I64(0)
        return self.b.gep(base, [flat], inbounds=True, source_etype=_mem(buf.dtype))

    def int_to(self, v: ir.Value, t: dt.DType, target: ir.IntType) -> ir.Value:
        width = v.type.width
        if width == target.width:
            return v
        if width > target.width:
            return self.b.trunc(v, target)
        return self.b.zext(v, target) if t.is_bool else self.b.sext(v, target)

    # ------------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> ir.Value:
        k = id(e)
        v = self.cache.get(k)
        if v is None:
            v = self._expr(e)
            self.cache[k] = v
        return v

    def _expr(self, e: Expr) -> ir.Value:
        if isinstance(e, Const):
            t = e.dtype
            if t.is_float:
                return _reg(t)(float(e.value))
            return _reg(t)(int(e.value))
        if isinstance(e, Var):
            v = self.vars.get(id(e))
            if v is None:
                raise ValueError(f"{self.func.name}: variable '{e.name}' is used outside any loop "
                                 f"binding it")
            return v
        if isinstance(e, Load):
            ptr = self.address(e.buffer, e.indices)
            t = e.buffer.dtype
            v = self.b.load(ptr, typ=_mem(t), align=t.itemsize)
            return self.b.icmp_unsigned("!=", v, _I8(0)) if t.is_bool else v
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, UnOp):
            return self.unop(e)
        if isinstance(e, Cast):
            return self.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, Select):
            return self.select(e)
        raise TypeError(f"cannot compile expression node {type(e).__name__} for CPU "
                        f"(only loop IR nodes are allowed)")

    def select(self, e: Select) -> ir.Value:
        cond = self.expr(e.cond)
        if not (self.has_load(e.t) or self.has_load(e.f)):
            return self.b.select(cond, self.expr(e.t), self.expr(e.f))
        # lazy: only the chosen branch runs (it may guard an out-of-range read)
        b = self.b
        bt = b.append_basic_block("sel.t")
        bf = b.append_basic_block("sel.f")
        merge = b.append_basic_block("sel.end")
        b.cbranch(cond, bt, bf)
        outer = self.cache
        b.position_at_end(bt)
        self.cache = dict(outer)
        vt = self.expr(e.t)
        end_t = b.block
        b.branch(merge)
        b.position_at_end(bf)
        self.cache = dict(outer)
        vf = self.expr(e.f)
        end_f = b.block
        b.branch(merge)
        self.cache = outer
        b.position_at_end(merge)
        phi = b.phi(vt.type)
        phi.add_incoming(vt, end_t)
        phi.add_incoming(vf, end_f)
        return phi

    def binop(self, e: BinOp) -> ir.Value:
        op, t = e.op, e.a.dtype
        a, c = self.expr(e.a), self.expr(e.b)
        b = self.b
        if op is BinOpKind.AND:
            return b.and_(a, c)
        if op is BinOpKind.OR:
            return b.or_(a, c)
        if op.is_compare:
            sym = op.value
            if t.is_float:
                if op is BinOpKind.NE:
                    return b.fcmp_unordered("!=", a, c)
                return b.fcmp_ordered(sym, a, c)
            if t.is_bool:
                return b.icmp_unsigned(sym, a, c)
            return b.icmp_signed(sym, a, c)
        if t.is_bool:
            if op is BinOpKind.MIN:
                return b.and_(a, c)
            if op is BinOpKind.MAX:
                return b.or_(a, c)
            raise TypeError(f"'{op.value}' is not defined on bool operands")
        if t.is_float:
            return self.float_binop(op, t, a, c)
        # integers: wrapping arithmetic
        if op is BinOpKind.ADD:
            return b.add(a, c)
        if op is BinOpKind.SUB:
            return b.sub(a, c)
        if op is BinOpKind.MUL:
            return b.mul(a, c)
        if op is BinOpKind.MIN:
            return self.call_intr("llvm.smin", a, c)
        if op is BinOpKind.MAX:
            return self.call_intr("llvm.smax", a, c)
        if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
            return self.int_divmod(op, a, c)
        raise TypeError(f"'{op.value}' on integer operands of type {t} cannot be compiled (true "
                        f"division of integers is promoted to float64 when the expression is built)")

    def int_divmod(self, op: BinOpKind, a: ir.Value, c: ir.Value) -> ir.Value:
        """Python-style floor division / modulo; by zero gives 0, MIN // -1 wraps, never traps."""
        b, ty = self.b, a.type
        zero, one = ty(0), ty(1)
        is0 = b.icmp_signed("==", c, zero)
        ism1 = b.icmp_signed("==", c, ty(-1))
        safe = b.select(b.or_(is0, ism1), one, c)
        if op is BinOpKind.FLOORDIV:
            q = b.sdiv(a, safe)
            r = b.srem(a, safe)
            adj = b.and_(b.icmp_signed("!=", r, zero),
                         b.icmp_signed("<", b.xor(r, safe), zero))
            q = b.select(adj, b.sub(q, one), q)
            q = b.select(ism1, b.sub(zero, a), q)
            return b.select(is0, zero, q)
        r = b.srem(a, safe)
        adj = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
        r = b.select(adj, b.add(r, safe), r)
        return b.select(is0, zero, r)  # c == -1: safe == 1 so r == 0 already

    def float_binop(self, op: BinOpKind, t: dt.DType, a: ir.Value, c: ir.Value) -> ir.Value:
        b = self.b
        if op is BinOpKind.ADD:
            return b.fadd(a, c, flags=_FAST)
        if op is BinOpKind.SUB:
            return b.fsub(a, c, flags=_FAST)
        if op is BinOpKind.MUL:
            return b.fmul(a, c, flags=_FAST)
        if op is BinOpKind.DIV:
            return b.fdiv(a, c)
        if op is BinOpKind.MIN:
            return self.call_intr("llvm.minimum", a, c)
        if op is BinOpKind.MAX:
            return self.call_intr("llvm.maximum", a, c)
        if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
            if t is dt.float16:  # numpy computes half divmod in float and rounds the result
                r = self.float_divmod(op, b.fpext(a, _FLOAT), b.fpext(c, _FLOAT))
                return b.fptrunc(r, _HALF)
            return self.float_divmod(op, a, c)
        raise TypeError(f"'{op.value}' on float operands cannot be compiled")

    def float_divmod(self, op: BinOpKind, a: ir.Value, c: ir.Value) -> ir.Value:
        """numpy's ``npy_divmod``: fmod, then adjust to the divisor's sign, then snap the quotient."""
        b, ty = self.b, a.type
        zero = ty(0.0)
        mod = b.frem(a, c)
        c_zero = b.fcmp_ordered("==", c, zero)
        mod_nz = b.fcmp_unordered("!=", mod, zero)
        adj = b.and_(mod_nz, b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero)))
        if op is BinOpKind.MOD:
            m = b.select(adj, b.fadd(mod, c), mod)
            m = b.select(b.fcmp_ordered("==", mod, zero), self.call_intr("llvm.copysign", zero, c), m)
            return b.select(c_zero, mod, m)
        div = b.fdiv(b.fsub(a, mod), c)
        div = b.select(adj, b.fsub(div, ty(1.0)), div)
        fl = self.call_intr("llvm.floor", div)
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ty(0.5)), b.fadd(fl, ty(1.0)), fl)
        quot = b.fdiv(a, c)
        q = b.select(b.fcmp_unordered("!=", div, zero), fl, self.call_intr("llvm.copysign", zero, quot))
        return b.select(c_zero, quot, q)

    def unop(self, e: UnOp) -> ir.Value:
        op, t = e.op, e.a.dtype
        a = self.expr(e.a)
        b = self.b
        if op is UnOpKind.NOT:
            return b.xor(a, _I1(1))
        if op is UnOpKind.NEG:
            return b.fneg(a, flags=_FAST) if t.is_float else b.sub(a.type(0), a)
        if op is UnOpKind.ABS:
            if t.is_float:
                return self.call_intr("llvm.fabs", a)
            return self.call_intr("llvm.abs", a, _I1(0))  # abs(MIN) == MIN as in numpy
        if not t.is_float:
            raise TypeError(f"{op.value} of a {t} operand (the IR casts math arguments to float)")
        x = b.fpext(a, _FLOAT) if t is dt.float16 else a
        if op is UnOpKind.EXP:
            r = self.call_intr("llvm.exp", x)
        elif op is UnOpKind.LOG:
            r = self.call_intr("llvm.log", x)
        elif op is UnOpKind.SQRT:
            r = self.call_intr("llvm.sqrt", x)
        elif op is UnOpKind.TANH:
            r = self.call_intr("llvm.tanh", x)  # lowers to a tanhf/tanh libm call
        elif op is UnOpKind.SIGMOID:
            one = x.type(1.0)
            r = b.fdiv(one, b.fadd(one, self.call_intr("llvm.exp", b.fneg(x))))
        else:
            raise TypeError(f"unknown unary operator {op}")
        return b.fptrunc(r, _HALF) if t is dt.float16 else r

    def cast(self, v: ir.Value, src: dt.DType, dst: dt.DType) -> ir.Value:
        b = self.b
        if src is dst:
            return v
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", v, v.type(0.0))  # NaN is true
            return b.icmp_signed("!=", v, v.type(0))
        if src.is_bool:
            return b.zext(v, _reg(dst)) if dst.is_int else b.uitofp(v, _reg(dst))
        if src.is_int and dst.is_int:
            return self.int_to(v, src, _reg(dst))
        if src.is_int:  # -> float
            if dst is dt.float16:  # exact: every int beyond float's precision overflows half
                return b.fptrunc(b.sitofp(v, _FLOAT), _HALF)
            return b.sitofp(v, _reg(dst))
        if dst.is_int:  # float -> int truncates toward zero
            return b.fptosi(v, _reg(dst))
        if src.bits < dst.bits:
            if src is dt.float16 and dst is dt.float64:
                return b.fpext(b.fpext(v, _FLOAT), _DOUBLE)  # exact, avoids a libcall
            return b.fpext(v, _reg(dst))
        if src is dt.float64 and dst is dt.float16:
            return b.fptrunc(self.round_to_odd_float(v), _HALF)
        return b.fptrunc(v, _reg(dst))

    def round_to_odd_float(self, d: ir.Value) -> ir.Value:
        """double -> float rounded to odd, so that a further rounding to half is correctly rounded
        (a direct ``fptrunc double to half`` needs ``__truncdfhf2``, missing from older runtimes)."""
        b = self.b
        f = b.fptrunc(d, _FLOAT)
        back = b.fpext(f, _DOUBLE)
        inexact = b.fcmp_unordered("!=", back, d)
        too_big = b.fcmp_ordered(">", self.call_intr("llvm.fabs", back), self.call_intr("llvm.fabs", d))
        bits = b.bitcast(f, _I32)
        bits = b.select(too_big, b.sub(bits, _I32(1)), bits)  # round toward zero instead
        bits = b.select(inexact, b.or_(bits, _I32(1)), bits)  # sticky bit
        return b.bitcast(bits, _FLOAT)

    # ------------------------------------------------------------------ statements

    def stmt_expr(self, e: Expr) -> ir.Value:
        """Evaluate an expression of one statement (values are not reused across statements, since
        a store between them may change what a load reads)."""
        self.cache = {}
        return self.expr(e)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, IfThenElse):
            cond = self.stmt_expr(s.cond)
            if s.else_ is None:
                with self.b.if_then(cond):
                    self.stmt(s.then)
            else:
                with self.b.if_else(cond) as (then, otherwise):
                    with then:
                        self.stmt(s.then)
                    with otherwise:
                        self.stmt(s.else_)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Barrier):
            raise NotImplementedError("a barrier (__syncthreads) cannot be compiled for CPU")
        else:
            raise TypeError(f"cannot compile statement {type(s).__name__} for CPU")

    def store(self, s: Store) -> None:
        t = s.buffer.dtype
        if s.value.dtype is not t:
            raise TypeError(f"store of a {s.value.dtype} value into buffer '{s.buffer.name}' of "
                            f"type {t}")
        self.cache = {}
        v = self.expr(s.value)
        ptr = self.address(s.buffer, s.indices)
        if t.is_bool:
            v = self.b.zext(v, _I8)
        self.b.store(v, ptr, align=t.itemsize)

    def loop(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BOUND:
            raise ValueError(f"loop '{s.var.name}' is bound to {s.thread.value if s.thread else '?'}: "
                             f"GPU thread binding cannot be compiled for CPU; use target cuda or "
                             f"emulate()")
        vt = _reg(s.var.dtype)
        if id(s.var) in self.vars:
            raise ValueError(f"loop variable '{s.var.name}' is bound twice on one path")
        if (s.kind is ForKind.UNROLLED and isinstance(s.extent, Const)
                and s.extent.value <= 64):
            # unroll in the emitter: the body once per iteration with the variable a constant
            if s.extent.value <= 0:
                return
            if isinstance(s.begin, Const):
                begin = None
            else:
                begin = self.int_to(self.stmt_expr(s.begin), s.begin.dtype, vt)
            for k in range(s.extent.value):
                if begin is None:
                    self.vars[id(s.var)] = vt(int(s.begin.value) + k)
                else:
                    self.vars[id(s.var)] = self.b.add(begin, vt(k), flags=["nsw"]) if k else begin
                self.stmt(s.body)
            del self.vars[id(s.var)]
            return
        b = self.b
        begin = self.int_to(self.stmt_expr(s.begin), s.begin.dtype, vt)
        extent = self.int_to(self.stmt_expr(s.extent), s.extent.dtype, vt)
        end = b.add(begin, extent)
        pre = b.block
        name = re.sub(r"[^A-Za-z0-9_]", "_", s.var.name)
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
        # ForKind.PARALLEL runs serially for now; a later pass outlines it onto a thread pool.
        self.stmt(s.body)
        del self.vars[id(s.var)]
        nxt = b.add(iv, vt(1), flags=["nsw"])  # iv < end, so iv + 1 cannot overflow
        iv.add_incoming(nxt, b.block)
        latch = b.branch(head)
        if s.kind is ForKind.VECTORIZED:
            latch.set_metadata("llvm.loop", self.loop_md(["llvm.loop.vectorize.enable", _I1(1)]))
        elif s.kind is ForKind.UNROLLED:
            latch.set_metadata("llvm.loop", self.loop_md(["llvm.loop.unroll.full"]))
        b.position_at_end(exit_)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf in self.bufs:
            raise ValueError(f"buffer '{buf.name}' is allocated twice on one path")
        mt = _mem(buf.dtype)
        const_size = all(isinstance(d, int) or isinstance(d, Const) for d in buf.shape)
        n = None
        if const_size:
            n = 1
            for d in buf.shape:
                n *= int(d.value if isinstance(d, Const) else d)
        if n is not None and n * buf.dtype.itemsize <= MAX_STACK_ALLOC:
            ptr = self.allocas.get(s)
            if ptr is None:  # one slot per statement (reused when an unrolled body repeats it)
                ptr = self.entry_builder.alloca(ir.ArrayType(mt, n),
                                                name=re.sub(r"[^A-Za-z0-9_]", "_", buf.name))
                ptr.align = 64
                ptr.type = _PTR  # llvmlite types an alloca as a typed pointer; we index it flat
                self.allocas[s] = ptr
            self.bufs[buf] = ptr
            self.stmt(s.body)
            del self.bufs[buf]
            return
        b = self.b
        if n is not None:
            size = _I64(-(-n * buf.dtype.itemsize // 64) * 64)
        else:
            self.cache = {}
            count = _I64(1)
            for d in buf.shape:
                dv = _I64(int(d)) if isinstance(d, int) else self.int_to(self.expr(d), d.dtype, _I64)
                count = b.mul(count, dv)
            nbytes = b.mul(count, _I64(buf.dtype.itemsize))
            size = b.and_(b.add(nbytes, _I64(63)), _I64(-64))  # aligned_alloc wants a multiple
        alloc = self.intrinsic("aligned_alloc", _PTR, [_I64, _I64])
        free = self.intrinsic("free", _VOID, [_PTR])
        ptr = b.call(alloc, [_I64(64), size], name=re.sub(r"[^A-Za-z0-9_]", "_", buf.name))
        self.bufs[buf] = ptr
        self.stmt(s.body)
        del self.bufs[buf]
        self.b.call(free, [ptr])


# ----------------------------------------------------------------------------- public API

def _emit(func: PrimFunc) -> _Emitter:
    _check_cpu(func)
    verify(func)
    _ensure_init()
    em = _Emitter(func)
    em.run()
    return em


def emit_module(func: PrimFunc) -> str:
    """The unoptimized LLVM IR text of ``func`` (no JIT)."""
    with _LOCK:
        return str(_emit(func).module)


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
        self._address = address
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(func.params)))
        self._cfunc = proto(address)

    def run(self, arrays: list) -> None:
        """Call the kernel on ``arrays`` (in ``func.params`` order, C-contiguous, of the right dtype
        and shape, distinct); outputs are written in place. The GIL is released during the call."""
        if len(arrays) != len(self.func.params):
            raise ValueError(f"{self.func.name} takes {len(self.func.params)} arrays, "
                             f"got {len(arrays)}")
        self._cfunc(*[a.ctypes.data for a in arrays])

    def assembly(self) -> str:
        """The host assembly of the optimized module (for inspection)."""
        with _LOCK:
            tm = _target_machine()
            return tm.emit_assembly(llvm.parse_assembly(self.source))

    def __repr__(self):
        return f"CompiledCPU({self.func.name!r})"


def compile_cpu(func: PrimFunc, opt_level: int = 3) -> CompiledCPU:
    """Translate ``func`` to LLVM IR, optimize it at ``opt_level`` (0-3) for the host and JIT it.

    Raises ValueError for GPU thread-bound loops and NotImplementedError for barriers.
    """
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level}")
    with _LOCK:
        em = _emit(func)
        text = str(em.module)
        mod = llvm.parse_assembly(text)
        mod.verify()
        tm = _target_machine(opt_level)
        if opt_level > 0:
            pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            if opt_level >= 2:
                pto.loop_vectorization = True
                pto.slp_vectorization = True
                pto.loop_interleaving = True
                pto.loop_unrolling = True
            pb = llvm.create_pass_builder(tm, pto)
            pm = pb.getModulePassManager()
            pm.run(mod, pb)
        optimized = str(mod)
        engine = llvm.create_mcjit_compiler(mod, tm)  # the engine takes ownership of tm and mod
        engine.finalize_object()
        address = engine.get_function_address(em.symbol)
        if not address:
            raise RuntimeError(f"JIT produced no address for '{em.symbol}'")
    return CompiledCPU(func, em.symbol, optimized, text, engine, address)
