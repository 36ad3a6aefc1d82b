"""The generator's state and the translation of expressions to Python source.

A uniform expression becomes Python/numpy-scalar code (index math in Python ints, ``Select`` a
conditional expression); a lane-varying one becomes numpy code over arrays of the lanes (``Select``
with loads in a branch evaluates each branch under its own mask, so a read the branch does not take
never faults).
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from ...ir import dtype as dt
from ...ir.evaluate import NP_BINARY, NP_UNARY
from ...ir.expr import BinOp, BinOpKind, Cast, Const, Expr, Load, Select, UnOp, UnOpKind, Var
from ...ir.interval import interval
from ...ir.loop import Buffer, PrimFunc
from ...ir.traverse import walk
from .errors import InterpError
from .runtime import RUNTIME

# ops written as Python operators; the others call NP_BINARY's numpy functions (or the _fdiv family)
_BIN_SYM = {BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.DIV: "/",
            BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
            BinOpKind.EQ: "==", BinOpKind.NE: "!=", BinOpKind.AND: "&", BinOpKind.OR: "|"}
assert set(_BIN_SYM) | {BinOpKind.FLOORDIV, BinOpKind.MOD, BinOpKind.MIN, BinOpKind.MAX} \
    == set(NP_BINARY)

_HOIST_HEIGHT = 24  # expression subtrees this tall become temporaries (parser nesting limit)

_IDENT = re.compile(r"[^0-9A-Za-z_]")


def py_ident(name: str) -> str:
    """``name`` with every character that cannot be in a Python identifier replaced by ``_``."""
    return _IDENT.sub("_", name)


def py_tuple(items) -> str:
    """A Python tuple display of the source strings ``items``."""
    return "(" + "".join(x + ", " for x in items) + ")"


class ExprGen:
    """Generator state (the emitted lines, names, buffers, the lanes in effect) and expressions."""

    def __init__(self, func: PrimFunc, check_races: bool, vector_trips: tuple):
        self.func = func
        self.check_races = check_races
        self.vector_trips = vector_trips  # (fewest, most) iterations of a vectorized nest
        self.races: dict = {}          # shared Buffer -> python name of its Race
        self.ns: dict = dict(RUNTIME)
        self.lines: list = []
        self.ind = 1
        self.counter = itertools.count()
        self.names: dict = {}          # id(Var) -> python name
        self.bound: set = set()        # ids of the Vars bound by enclosing loops
        self.bufs: dict = {}           # Buffer -> (python name, lead) ; lead None/"lane"/"block"
        self.ranges: dict = {}         # Var -> (lo, hi) inclusive
        self.varying: set = set()      # lane-varying Vars
        self.lanes = False             # inside a kernel or a vectorized loop
        self.kernel = None             # the Kernel being generated
        self.bound_axes: set = set()
        self.mask: str | None = None
        self.lane_shape = "()"         # Python expression for the shape of a varying value
        self.for_depth = 0
        self.lazy = 0                  # inside a lazy (Select) branch: no hoisting
        self.n_kernels = 0
        self._vmemo: dict = {}
        self._hmemo: dict = {}
        self._consts: dict = {}

    # ------------------------------------------------------------------ helpers
    def fresh(self, base: str = "t") -> str:
        return f"_{base}{next(self.counter)}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)

    def block(self, fn, *args) -> None:
        """Emit an indented block; ``pass`` if it came out empty."""
        self.ind += 1
        n = len(self.lines)
        fn(*args)
        if len(self.lines) == n:
            self.emit("pass")
        self.ind -= 1

    def var_name(self, v: Var) -> str:
        n = self.names.get(id(v))
        if n is None:
            n = f"v{len(self.names)}_{py_ident(v.name) or 'v'}"
            self.names[id(v)] = n
        return n

    def const_name(self, value, t: dt.DType) -> str:
        key = (t.name, repr(value))
        n = self._consts.get(key)
        if n is None:
            n = f"_C{len(self._consts)}"
            self.ns[n] = t.np.type(value)
            self._consts[key] = n
        return n

    def np_type(self, t: dt.DType) -> str:
        n = f"_T_{t.name}"
        self.ns[n] = t.np
        return n

    def fn_name(self, fn) -> str:
        """The name the generated code calls ``fn`` by (``np.<name>`` for a numpy function)."""
        if getattr(np, fn.__name__, None) is fn:
            return f"np.{fn.__name__}"
        self.ns[fn.__name__] = fn
        return fn.__name__

    def buf(self, b: Buffer):
        info = self.bufs.get(b)
        if info is None:
            raise InterpError(f"buffer '{b.name}' is neither a parameter nor allocated here")
        return info

    def lead_expr(self, lead) -> str:
        """The per-copy index of a buffer with ``lead`` (see :attr:`bufs`)."""
        if lead is None:
            return "None"
        return self.kernel.lane if lead == "lane" else self.kernel.blk

    def checks(self, b: Buffer, indices) -> tuple:
        """Per axis, whether an access to ``b`` at ``indices`` needs a run-time bounds check."""
        return tuple(self.needs_check(b, d, i) for d, i in enumerate(indices))

    def uniform_indices(self, b: Buffer, name: str, indices) -> str:
        """``i, j, ...`` for uniform indices of ``b``, each bounds-checked where needed."""
        return ", ".join(self.index_expr(b, name, d, i) for d, i in enumerate(indices))

    # ------------------------------------------------------------------ analysis
    def is_varying(self, e: Expr) -> bool:
        r = self._vmemo.get(id(e))
        if r is None:
            if isinstance(e, Var):
                r = e in self.varying
            elif isinstance(e, Load):
                r = self.buf(e.buffer)[1] is not None or any(self.is_varying(i) for i in e.indices)
            else:
                r = any(self.is_varying(c) for c in e.children())
            self._vmemo[id(e)] = r
        return r

    def height(self, e: Expr) -> int:
        h = self._hmemo.get(id(e))
        if h is None:
            h = 1 + max((self.height(c) for c in e.children()), default=0)
            self._hmemo[id(e)] = h
        return h

    def needs_check(self, b: Buffer, d: int, e: Expr) -> bool:
        iv = interval(e, self.ranges)
        return not (iv is not None and iv[0] >= 0 and iv[1] < b.shape[d])

    def set_range(self, v: Var, begin: Expr, extent: Expr) -> None:
        b, e = interval(begin, self.ranges), interval(extent, self.ranges)
        if b is not None and e is not None and e[1] >= 1:
            self.ranges[v] = (b[0], b[1] + e[1] - 1)

    # ------------------------------------------------------------------ expressions
    def ex(self, e: Expr) -> str:
        """A Python expression for ``e`` (statements it needs are emitted first)."""
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            if id(e) not in self.bound:
                raise InterpError(f"variable '{e.name}' is used outside any loop binding it")
            return self.var_name(e)
        s = self.vex(e) if self.is_varying(e) else self.uex(e)
        h = self.height(e)
        if not self.lazy and h >= _HOIST_HEIGHT and h % _HOIST_HEIGHT == 0:
            t = self.fresh()
            self.emit(f"{t} = {s}")
            return t
        return s

    def const(self, e: Const) -> str:
        t = e.dtype
        if t.is_bool:
            return "True" if e.value else "False"
        if t is dt.INDEX:
            return repr(int(e.value))
        return self.const_name(e.value, t)

    def index_expr(self, b: Buffer, name: str, d: int, e: Expr) -> str:
        """A uniform index, with an inline bounds check unless provably in range."""
        s = self.ex(e)
        if not self.needs_check(b, d, e):
            return s
        t = self.fresh()
        return (f"({t} if 0 <= ({t} := {s}) < {b.shape[d]} else "
                f"_oob({b.name!r}, {d}, {t}, {b.shape!r}, {self.mask}))")

    def uex(self, e: Expr) -> str:
        """A lane-uniform expression (Python/numpy scalars)."""
        if isinstance(e, Load):
            name, lead = self.buf(e.buffer)
            assert lead is None
            if not e.indices:
                return f"{name}[()]"
            return f"{name}[{self.uniform_indices(e.buffer, name, e.indices)}]"
        if isinstance(e, Cast):
            return self.cast_u(e)
        if isinstance(e, Select):
            c = self.ex(e.cond)
            self.lazy += 1
            t, f = self.ex(e.t), self.ex(e.f)
            self.lazy -= 1
            return f"({t} if {c} else {f})"
        if isinstance(e, UnOp):
            a = self.ex(e.a)
            if e.op is UnOpKind.NEG:
                return f"(-{a})"
            if e.op is UnOpKind.NOT:
                return f"(not {a})"
            if e.op is UnOpKind.ABS:
                return f"abs({a})"
            return f"{self.fn_name(NP_UNARY[e.op])}({a})"
        if isinstance(e, BinOp):
            a, b = self.ex(e.a), self.ex(e.b)
            op, t = e.op, e.a.dtype
            if op in _BIN_SYM:
                return f"({a} {_BIN_SYM[op]} {b})"
            if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
                if t.is_float:
                    return f"({a} {'//' if op is BinOpKind.FLOORDIV else '%'} {b})"
                return f"{'_fdiv' if op is BinOpKind.FLOORDIV else '_fmod'}({a}, {b})"
            # min / max like np.minimum / np.maximum: NaN propagates, ties give the second
            x, y = self.fresh(), self.fresh()
            cmp = "<" if op is BinOpKind.MIN else ">"
            nan = f" or {x} != {x}" if t.is_float else ""
            return f"({x} if ({x} := {a}) {cmp} ({y} := {b}){nan} else {y})"
        raise TypeError(f"the interpreter cannot evaluate {type(e).__name__} (not loop IR)")

    def cast_u(self, e: Cast) -> str:
        a, src, t = self.ex(e.a), e.a.dtype, e.dtype
        if t.is_bool:
            return f"({a} != 0)"
        if t.is_float:
            return f"{self.np_type(t)}.type({a})"
        if src.is_float:
            return f"_f2i({a}, {self.np_type(t)})"
        if t is dt.INDEX:
            return f"int({a})"
        return f"_i2i({a}, {self.np_type(t)})"

    def vex(self, e: Expr) -> str:
        """A lane-varying expression (arrays over the lanes)."""
        if isinstance(e, Load):
            return self.load_v(e)
        if isinstance(e, Cast):
            a, src, t = self.ex(e.a), e.a.dtype, e.dtype
            if src.is_float and t.is_int:
                return f"_vf2i({a}, {self.np_type(t)})"
            return f"np.asarray({a}).astype({self.np_type(t)})"
        if isinstance(e, Select):
            return self.select_v(e)
        if isinstance(e, UnOp):
            return f"{self.fn_name(NP_UNARY[e.op])}({self.ex(e.a)})"
        if isinstance(e, BinOp):
            a, b = self.ex(e.a), self.ex(e.b)
            op, t = e.op, e.a.dtype
            if op in _BIN_SYM:
                return f"({a} {_BIN_SYM[op]} {b})"
            if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
                if t.is_float:
                    return f"({a} {'//' if op is BinOpKind.FLOORDIV else '%'} {b})"
                return f"{'_vfdiv' if op is BinOpKind.FLOORDIV else '_vfmod'}({a}, {b})"
            return f"{self.fn_name(NP_BINARY[op])}({a}, {b})"  # min / max
        raise TypeError(f"the interpreter cannot evaluate {type(e).__name__} (not loop IR)")

    def load_v(self, e: Load) -> str:
        b = e.buffer
        name, lead = self.buf(b)
        race = self.races.get(b)
        if lead is not None and race is None and not any(self.is_varying(i) for i in e.indices):
            view = f"{name}[{self.uniform_indices(b, name, e.indices)}]" if e.indices else name
            return view if lead == "lane" else f"{view}[{self.kernel.blk}]"
        idx = [self.ex(i) for i in e.indices]
        extra = "" if race is None else f", {race}"
        return (f"_gl({name}, {b.name!r}, {self.mask}, {self.lead_expr(lead)}, {py_tuple(idx)}, "
                f"{self.checks(b, e.indices)!r}{extra})")

    def select_v(self, e: Select) -> str:
        t_np = self.np_type(e.dtype)
        if not self.is_varying(e.cond):
            c = self.ex(e.cond)
            saved, self.lines = self.lines, []
            self.lazy += 1
            t, f = self.ex(e.t), self.ex(e.f)
            self.lazy -= 1
            inner, self.lines = self.lines, saved
            # a uniform branch is broadcast so that the varying result is always an array
            wrap = [(lambda x: x) if self.is_varying(br) else
                    (lambda x: f"np.broadcast_to({x}, {self.lane_shape})") for br in (e.t, e.f)]
            if not inner:
                return f"({wrap[0](t)} if {c} else {wrap[1](f)})"
            # the branches emit statements: regenerate each inside its own branch
            r = self.fresh("r")
            self.emit(f"if {c}:")
            self.ind += 1
            self.lazy += 1
            self.emit(f"{r} = {wrap[0](self.ex(e.t))}")
            self.ind -= 1
            self.emit("else:")
            self.ind += 1
            self.emit(f"{r} = {wrap[1](self.ex(e.f))}")
            self.lazy -= 1
            self.ind -= 1
            return r
        c = self.ex(e.cond)
        if not any(isinstance(x, Load) for br in (e.t, e.f) for x in walk(br)):
            return f"_vsel({c}, {self.ex(e.t)}, {self.ex(e.f)}, {t_np})"
        cn = self.fresh("c")
        self.emit(f"{cn} = {c}")
        saved = self.mask
        mt, mf = self.fresh("m"), self.fresh("m")
        self.emit(f"{mt} = {cn}" if saved is None else f"{mt} = {saved} & {cn}")
        self.emit(f"{mf} = ~{cn}" if saved is None else f"{mf} = {saved} & ~{cn}")
        self.lazy += 1
        self.mask = mt
        t = self.ex(e.t)
        self.mask = mf
        f = self.ex(e.f)
        self.lazy -= 1
        self.mask = saved
        return f"_vsel({cn}, {t}, {f}, {t_np})"
