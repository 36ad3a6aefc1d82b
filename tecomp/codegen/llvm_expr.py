"""LLVM IR types and expression emission for the CPU code generator (:mod:`.llvm_cpu`).

Semantics follow :func:`tecomp.ir.evaluate.eval_np` (numpy): integer arithmetic wraps, integer
floor division and modulo by zero give 0 and never trap, float floor division and modulo reproduce
numpy's ``npy_divmod``, float min/max propagate NaN, float comparisons are ordered (``!=`` is
unordered), and float operations carry only the ``contract`` fast-math flag (FMA contraction), so
results are IEEE-correct apart from contraction. ``float16`` arithmetic is done per operation in
half precision; float16 math functions are computed in float32 and rounded. ``bool`` is ``i1`` in
registers and one byte in memory.
"""
from __future__ import annotations

import re

import llvmlite.ir as ir

from ..ir import dtype as dt
from ..ir.arith import merge_fused_dims
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Expr, Load, Select, UnOp, UnOpKind, Var
from ..ir.loop import Buffer, PrimFunc
from ..ir.traverse import walk
from .cpu_math import exp_f32, log_f32, tanh_f32
from .trig_math import cos_f32, sin_f32

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG = {dt.float16: HALF, dt.float32: FLOAT, dt.float64: DOUBLE, dt.int8: I8, dt.int32: I32,
        dt.int64: I64, dt.bool_: I1}
FAST = ("contract",)  # FMA contraction only: no reassociation, no NaN/inf assumptions
# a float32/16 division by a computed value may become a product with its reciprocal, which LLVM
# computes once outside a loop the divisor does not vary in (a softmax's row by its sum: a
# vdivps per vector, 10-16 cycles, against a multiply), within 1-2 ulp of the quotient, as
# torch's and oneDNN's softmax are; float64 and a division by a constant stay exact
DIV = ("arcp",)


def reg_type(t: dt.DType) -> ir.Type:
    """The LLVM type of a ``t`` value in registers."""
    return _REG[t]


def mem_type(t: dt.DType) -> ir.Type:
    """The LLVM type of a ``t`` element in memory (``bool`` is a byte)."""
    return I8 if t.is_bool else _REG[t]


def ident(name: str) -> str:
    """``name`` with every character that is not ``[A-Za-z0-9_]`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def dispatch(table: dict, node: object):
    """The entry of ``table`` for the class of ``node`` or its nearest base class, else None."""
    for cls in type(node).__mro__:
        name = table.get(cls)
        if name is not None:
            return name
    return None


class ExprEmitter:
    """Emits loop-IR expressions at the position of the builder ``b`` in ``module``.

    ``vars`` maps ``id(Var)`` to the value bound by the enclosing loop, ``bufs`` maps a
    :class:`Buffer` to its base pointer. Values are cached per expression node in ``cache``, which
    the owner resets wherever memory may have changed (a store between two reads).
    """

    _EXPR = {Const: "const", Var: "var", Load: "load", BinOp: "binop", UnOp: "unop",
             Cast: "cast_expr", Select: "select"}

    def __init__(self, func: PrimFunc, module: ir.Module, builder: ir.IRBuilder):
        self.func = func
        self.module = module
        self.b = builder
        self.vars: dict = {}
        self.bufs: dict = {}
        self.cache: dict = {}
        self.strides: dict = {}
        self._has_load: dict = {}

    # ------------------------------------------------------------------ helpers

    def declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        """The module's function ``name``, declared on first use."""
        g = self.module.globals.get(name)
        if g is None:
            g = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return g

    def call_intr(self, base: str, x: ir.Value, *rest: ir.Value) -> ir.Value:
        """Call the overloaded intrinsic ``base`` at the type of ``x``."""
        t = x.type
        fn = self.declare(f"{base}.{t.intrinsic_name}", t, [t] + [r.type for r in rest])
        return self.b.call(fn, [x, *rest])

    def has_load(self, e: Expr) -> bool:
        k = id(e)
        r = self._has_load.get(k)
        if r is None:
            r = self._has_load[k] = any(isinstance(x, Load) for x in walk(e))
        return r

    def int_to(self, v: ir.Value, t: dt.DType, target: ir.IntType) -> ir.Value:
        """Integer ``v`` of dtype ``t`` truncated or extended (by its signedness) to ``target``."""
        width = v.type.width
        if width == target.width:
            return v
        if width > target.width:
            return self.b.trunc(v, target)
        return self.b.zext(v, target) if t.is_bool else self.b.sext(v, target)

    def address(self, buf: Buffer, indices: tuple) -> ir.Value:
        """Pointer to ``buf[indices]`` (flat row-major indexing with ``buf.strides``)."""
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
        for ix, st in merge_fused_dims(indices, strides):
            v = self.int_to(self.expr(ix), ix.dtype, I64)
            if isinstance(st, Expr):
                v = self.b.mul(v, self.int_to(self.expr(st), st.dtype, I64), flags=["nsw"])
            elif st != 1:
                v = self.b.mul(v, I64(st), flags=["nsw"])
            flat = v if flat is None else self.b.add(flat, v, flags=["nsw"])
        if flat is None:
            flat = I64(0)
        return self.b.gep(base, [flat], inbounds=True, source_etype=mem_type(buf.dtype))

    # ------------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> ir.Value:
        k = id(e)
        v = self.cache.get(k)
        if v is None:
            name = dispatch(self._EXPR, e)
            if name is None:
                raise TypeError(f"cannot compile expression node {type(e).__name__} for CPU "
                                f"(only loop IR nodes are allowed)")
            v = self.cache[k] = getattr(self, name)(e)
        return v

    def const(self, e: Const) -> ir.Value:
        return reg_type(e.dtype)(float(e.value) if e.dtype.is_float else int(e.value))

    def var(self, e: Var) -> ir.Value:
        v = self.vars.get(id(e))
        if v is None:
            raise ValueError(f"{self.func.name}: variable '{e.name}' is used outside any loop "
                             f"binding it")
        return v

    def load(self, e: Load) -> ir.Value:
        ptr = self.address(e.buffer, e.indices)
        t = e.buffer.dtype
        v = self.b.load(ptr, typ=mem_type(t), align=t.itemsize)
        return self.b.icmp_unsigned("!=", v, I8(0)) if t.is_bool else v

    def cast_expr(self, e: Cast) -> ir.Value:
        return self.cast(self.expr(e.a), e.a.dtype, e.dtype)

    def select(self, e: Select) -> ir.Value:
        cond = self.expr(e.cond)
        if not (self.has_load(e.t) or self.has_load(e.f)):
            return self.b.select(cond, self.expr(e.t), self.expr(e.f))
        # lazy: only the chosen branch runs (it may guard an out-of-range read)
        b = self.b
        blocks = (b.append_basic_block("sel.t"), b.append_basic_block("sel.f"))
        merge = b.append_basic_block("sel.end")
        b.cbranch(cond, *blocks)
        outer = self.cache
        incoming = []
        for block, arm in zip(blocks, (e.t, e.f)):
            b.position_at_end(block)
            self.cache = dict(outer)  # values of one arm are not available in the other
            incoming.append((self.expr(arm), b.block))
            b.branch(merge)
        self.cache = outer
        b.position_at_end(merge)
        phi = b.phi(incoming[0][0].type)
        for value, block in incoming:
            phi.add_incoming(value, block)
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
            if t.is_float:
                if op is BinOpKind.NE:
                    return b.fcmp_unordered("!=", a, c)
                return b.fcmp_ordered(op.value, a, c)
            if t.is_bool:
                return b.icmp_unsigned(op.value, a, c)
            return b.icmp_signed(op.value, a, c)
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
        q = b.sdiv(a, safe) if op is BinOpKind.FLOORDIV else None
        r = b.srem(a, safe)
        # C truncates toward zero: adjust when the remainder and the divisor differ in sign
        adj = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
        if q is None:
            r = b.select(adj, b.add(r, safe), r)
            return b.select(is0, zero, r)  # c == -1: safe == 1 so r == 0 already
        q = b.select(adj, b.sub(q, one), q)
        q = b.select(ism1, b.sub(zero, a), q)
        return b.select(is0, zero, q)

    def float_binop(self, op: BinOpKind, t: dt.DType, a: ir.Value, c: ir.Value) -> ir.Value:
        b = self.b
        if op is BinOpKind.ADD:
            return b.fadd(a, c, flags=FAST)
        if op is BinOpKind.SUB:
            return b.fsub(a, c, flags=FAST)
        if op is BinOpKind.MUL:
            return b.fmul(a, c, flags=FAST)
        if op is BinOpKind.DIV:
            exact = t.itemsize > 4 or isinstance(c, ir.Constant)
            return b.fdiv(a, c) if exact else b.fdiv(a, c, flags=DIV)
        if op is BinOpKind.MIN:
            return self.call_intr("llvm.minimum", a, c)
        if op is BinOpKind.MAX:
            return self.call_intr("llvm.maximum", a, c)
        if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
            if t is dt.float16:  # numpy computes half divmod in float and rounds the result
                r = self.float_divmod(op, b.fpext(a, FLOAT), b.fpext(c, FLOAT))
                return b.fptrunc(r, HALF)
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

    _MATH = {UnOpKind.EXP: "llvm.exp", UnOpKind.LOG: "llvm.log", UnOpKind.SQRT: "llvm.sqrt",
             UnOpKind.TANH: "llvm.tanh",  # float64: exp, log and tanh are libm calls
             UnOpKind.FLOOR: "llvm.floor", UnOpKind.CEIL: "llvm.ceil",
             UnOpKind.ROUND: "llvm.roundeven",  # one vroundps / cvt.rmi|rpi|rni each
             UnOpKind.SIN: "llvm.sin", UnOpKind.COS: "llvm.cos"}
    # LLVM has no vector exp, log or tanh: one libm call per lane; these are arithmetic (cpu_math)
    _F32_MATH = {UnOpKind.EXP: exp_f32, UnOpKind.LOG: log_f32, UnOpKind.TANH: tanh_f32,
                 UnOpKind.SIN: sin_f32, UnOpKind.COS: cos_f32}

    def unop(self, e: UnOp) -> ir.Value:
        op, t = e.op, e.a.dtype
        a = self.expr(e.a)
        b = self.b
        if op is UnOpKind.NOT:
            return b.xor(a, I1(1))
        if op is UnOpKind.NEG:
            return b.fneg(a, flags=FAST) if t.is_float else b.sub(a.type(0), a)
        if op is UnOpKind.ABS:
            if t.is_float:
                return self.call_intr("llvm.fabs", a)
            return self.call_intr("llvm.abs", a, I1(0))  # abs(MIN) == MIN as in numpy
        if not t.is_float:
            raise TypeError(f"{op.value} of a {t} operand (the IR casts math arguments to float)")
        x = b.fpext(a, FLOAT) if t is dt.float16 else a
        if op in self._F32_MATH and t is not dt.float64:
            r = self._F32_MATH[op](self, x)
        elif op in self._MATH:
            r = self.call_intr(self._MATH[op], x)
        elif op is UnOpKind.SIGMOID:
            one = x.type(1.0)
            e = self.call_intr("llvm.exp", b.fneg(x)) if t is dt.float64 else exp_f32(self, b.fneg(x))
            r = b.fdiv(one, b.fadd(one, e))
        else:
            raise TypeError(f"unknown unary operator {op}")
        return b.fptrunc(r, HALF) if t is dt.float16 else r

    def cast(self, v: ir.Value, src: dt.DType, dst: dt.DType) -> ir.Value:
        b = self.b
        if src is dst:
            return v
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", v, v.type(0.0))  # NaN is true
            return b.icmp_signed("!=", v, v.type(0))
        if src.is_bool:
            return b.zext(v, reg_type(dst)) if dst.is_int else b.uitofp(v, reg_type(dst))
        if src.is_int and dst.is_int:
            return self.int_to(v, src, reg_type(dst))
        if src.is_int:  # -> float
            if dst is dt.float16:  # exact: every int beyond float's precision overflows half
                return b.fptrunc(b.sitofp(v, FLOAT), HALF)
            return b.sitofp(v, reg_type(dst))
        if dst.is_int:  # float -> int truncates toward zero
            return b.fptosi(v, reg_type(dst))
        if src.bits < dst.bits:
            if src is dt.float16 and dst is dt.float64:
                return b.fpext(b.fpext(v, FLOAT), DOUBLE)  # exact, avoids a libcall
            return b.fpext(v, reg_type(dst))
        if src is dt.float64 and dst is dt.float16:
            return b.fptrunc(self.round_to_odd_float(v), HALF)
        return b.fptrunc(v, reg_type(dst))

    def round_to_odd_float(self, d: ir.Value) -> ir.Value:
        """double -> float rounded to odd, so that a further rounding to half is correctly rounded
        (a direct ``fptrunc double to half`` needs ``__truncdfhf2``, missing from older runtimes)."""
        b = self.b
        f = b.fptrunc(d, FLOAT)
        back = b.fpext(f, DOUBLE)
        inexact = b.fcmp_unordered("!=", back, d)
        too_big = b.fcmp_ordered(">", self.call_intr("llvm.fabs", back), self.call_intr("llvm.fabs", d))
        bits = b.bitcast(f, I32)
        bits = b.select(too_big, b.sub(bits, I32(1)), bits)  # round toward zero instead
        bits = b.select(inexact, b.or_(bits, I32(1)), bits)  # sticky bit
        return b.bitcast(bits, FLOAT)
