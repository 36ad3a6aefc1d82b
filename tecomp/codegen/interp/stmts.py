"""The translation of statements and loops, and of a whole function, to Python source.

Loops become Python ``for`` loops, except thread-bound loops (lanes of a kernel, see
:mod:`.kernel`), loops with lane-varying bounds (run to the largest active trip count under a mask)
and vectorizable CPU nests (:mod:`.nest`, with the serial loop as the fallback).
"""
from __future__ import annotations

from ...ir import dtype as dt
from ...ir.loop import Allocate, Barrier, For, IfThenElse, Scope, Seq, Stmt, Store
from .errors import InterpError
from .exprs import ExprGen, py_ident, py_tuple
from .kernel import KernelGen, is_thread_loop
from .nest import NestGen, nest_plan

_MAX_FOR_DEPTH = 16  # Python allows 20 nested blocks; deeper nests go into inner functions


class Gen(KernelGen, NestGen, ExprGen):
    """Generates the Python source of one :class:`~tecomp.ir.loop.PrimFunc` (:meth:`function`)."""

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For):
            self.for_(s)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, IfThenElse):
            self.if_(s)
        elif isinstance(s, Barrier):
            self.barrier()
        else:
            raise InterpError(f"unknown statement {type(s).__name__}")

    def barrier(self) -> None:
        k = self.kernel
        if k is None:
            return
        if self.mask is not None:
            self.emit(f"_barrier({self.mask}, {k.n_blocks}, {k.n_threads})")
        for r in self.races.values():
            self.emit(f"{r}.barrier()")

    def allocate(self, s: Allocate) -> None:
        b = s.buffer
        if b in self.bufs:
            raise InterpError(f"buffer '{b.name}' allocated twice on one path")
        lead = None
        shape = tuple(b.shape)
        if self.kernel is not None and b.scope is Scope.LOCAL:
            lead, shape = "lane", shape + (self.kernel.n_lanes,)
        elif self.kernel is not None and b.scope is Scope.SHARED:
            lead, shape = "block", shape + (self.kernel.n_blocks,)
        name = f"b{len(self.ns)}_{py_ident(b.name)}"
        t = self.np_type(b.dtype)
        if b.dtype.is_float:
            self.emit(f"{name} = np.full({shape!r}, np.nan, {t})")
        else:
            self.emit(f"{name} = np.empty({shape!r}, {t})")
        self.bufs[b] = (name, lead)
        self.ns[name] = None  # reserve the name
        if lead == "block" and self.check_races:
            self.races[b] = f"{name}_race"
            self.emit(f"{name}_race = _Race({b.name!r}, {shape!r}, {self.kernel.tid})")
        try:
            self.stmt(s.body)
        finally:
            del self.bufs[b]
            self.races.pop(b, None)

    def store(self, s: Store) -> None:
        b = s.buffer
        name, lead = self.buf(b)
        self._vmemo = {}
        val = self.ex(s.value)
        uniform_idx = not any(self.is_varying(i) for i in s.indices)
        if not self.lanes or (lead is None and uniform_idx and self.mask is None
                              and not self.is_varying(s.value)):
            self.emit(f"{name}[{self.uniform_indices(b, name, s.indices) or '()'}] = {val}")
            return
        race = self.races.get(b)
        if lead is not None and uniform_idx and race is None:
            idx = self.uniform_indices(b, name, s.indices)
            view = f"{name}[{idx}]" if idx else name
            if lead == "block":  # one row per block: scatter with the block ids
                self.emit(f"_st({view}, {b.name!r}, {self.mask}, None, ({self.kernel.blk},), "
                          f"{val}, (False,))")
            else:
                self.emit(f"_stl({view}, {self.mask}, {val})")
            return
        idx = [self.ex(i) for i in s.indices]
        extra = "" if race is None else f", {race}"
        self.emit(f"_st({name}, {b.name!r}, {self.mask}, {self.lead_expr(lead)}, "
                  f"{py_tuple(idx)}, {val}, {self.checks(b, s.indices)!r}{extra})")

    def if_(self, s: IfThenElse) -> None:
        self._vmemo = {}
        if not self.is_varying(s.cond):
            self.emit(f"if {self.ex(s.cond)}:")
            self.block(self.stmt, s.then)
            if s.else_ is not None:
                self.emit("else:")
                self.block(self.stmt, s.else_)
            return
        # both masks are computed before either branch runs (a branch may store to what the
        # condition read); np.array copies a condition that is a view of a per-lane buffer
        c = self.fresh("c")
        self.emit(f"{c} = np.array({self.ex(s.cond)}, dtype=bool)")
        saved = self.mask
        branches = []
        for body, neg in ((s.then, False), (s.else_, True)):
            if body is None:
                continue
            m = self.fresh("m")
            cc = f"~{c}" if neg else c
            self.emit(f"{m} = {cc}" if saved is None else f"{m} = {saved} & {cc}")
            branches.append((body, m))
        for body, m in branches:
            self.emit(f"if {m}.any():")
            self.mask = m
            self.block(self.stmt, body)
            self.mask = saved

    # ------------------------------------------------------------------ loops
    def for_(self, s: For) -> None:
        if is_thread_loop(s):
            if s.thread is None:
                raise InterpError(f"thread-bound loop '{s.var.name}' has no thread axis")
            if self.kernel is None:
                self.kernel_root(s)
            else:
                self.bind(s)
            return
        if self.for_depth >= _MAX_FOR_DEPTH:  # Python's nested-block limit: one function deeper
            fn = self.fresh("f")
            self.emit(f"def {fn}():")
            saved = self.for_depth
            self.for_depth = 0
            self.block(self.for_, s)
            self.for_depth = saved
            self.emit(f"{fn}()")
            return
        self._vmemo = {}
        if self.is_varying(s.begin) or self.is_varying(s.extent):
            self.varying_loop(s)
            return
        v = self.var_name(s.var)
        b, n = self.fresh("b"), self.fresh("n")
        self.emit(f"{b} = {self.ex(s.begin)}")
        self.emit(f"{n} = {self.ex(s.extent)}")
        self.set_range(s.var, s.begin, s.extent)
        self.bound.add(id(s.var))
        plan = None if self.lanes else nest_plan(s)
        if plan is not None:
            self.vector_nest(plan, b, n)
            self.emit("else:")
            self.ind += 1
        self.emit(f"for {v} in range({b}, {b} + {n}):")
        self.for_depth += 1
        self.ind += 1
        if s.var.dtype is not dt.INDEX:
            self.emit(f"{v} = {self.np_type(s.var.dtype)}.type({v})")
        n0 = len(self.lines)
        self.stmt(s.body)
        if len(self.lines) == n0:
            self.emit("pass")
        self.ind -= 1
        self.for_depth -= 1
        if plan is not None:
            self.ind -= 1
        self.ranges.pop(s.var, None)
        self.bound.discard(id(s.var))

    def varying_loop(self, s: For) -> None:
        """A loop whose bounds differ between lanes: run the most iterations under a mask."""
        v = self.var_name(s.var)
        b, e, n, t, m = (self.fresh(x) for x in "bentm")
        vary_begin = self.is_varying(s.begin)
        begin = self.ex(s.begin)
        self.emit(f"{b} = np.array({begin})" if vary_begin else f"{b} = {begin}")
        self.emit(f"{e} = np.array({self.ex(s.extent)})")
        self.emit(f"{n} = _maxact({e}, {self.mask})")
        self.set_range(s.var, s.begin, s.extent)
        self.bound.add(id(s.var))
        self.emit(f"for {t} in range({n}):")
        self.for_depth += 1
        self.ind += 1
        conv = "" if s.var.dtype is dt.INDEX else f".astype({self.np_type(s.var.dtype)})"
        self.emit(f"{v} = ({b} + {t}){conv}")
        saved = self.mask
        if self.is_varying(s.extent):
            self.emit(f"{m} = {t} < {e}" if saved is None else f"{m} = {saved} & ({t} < {e})")
            self.mask = m
        if vary_begin:
            self.varying.add(s.var)
        self.stmt(s.body)
        self.varying.discard(s.var)
        self.bound.discard(id(s.var))
        self.mask = saved
        self.ind -= 1
        self.for_depth -= 1
        self.ranges.pop(s.var, None)

    # ------------------------------------------------------------------ function
    def function(self) -> tuple:
        """``(name, source)`` of the Python function running :attr:`func` on its arrays."""
        params = []
        for b in self.func.params:
            n = f"p{len(params)}_{py_ident(b.name)}"
            params.append(n)
            self.bufs[b] = (n, None)
        self.stmt(self.func.body)
        if not self.lines:
            self.emit("pass")
        name = f"_interp_{py_ident(self.func.name)}"
        return name, f"def {name}({', '.join(params)}):\n" + "\n".join(self.lines) + "\n"
