"""A numpy interpreter for the loop IR: the oracle of the tests and the GPU emulator.

:func:`run` executes a :class:`~tecomp.ir.loop.PrimFunc` on numpy arrays (in ``func.params`` order;
outputs are written in place). The loop IR is compiled once per function into Python source (nested
``for`` loops over numpy scalars and arrays), which is ``exec``-ed and cached.

Semantics are those of :func:`tecomp.ir.evaluate.eval_np`: every value is computed in its own type
(float32 arithmetic in float32, float16 in float16, integers wrap), integer ``//`` and ``%`` floor
and give 0 for a zero divisor, float -> int casts truncate (non-finite values give 0), ``Select`` is
lazy (a read in the branch not taken never faults). ``&&``/``||`` evaluate both operands.

CPU programs (no thread-bound loop) run with one lane: index math in Python ints, values as numpy
scalars. A perfect loop nest around one (possibly guarded) store, with bounds that do not depend on
the nest, runs as numpy operations over all its iterations at once (each loop variable an array over
the flattened nest) when that provably gives the result of running it in order:

* a *map*: the stored location is affine in the loop variables and, by a mixed-radix check of the
  coefficients against the trip counts, different iterations store different elements; the stored
  buffer is read only at the stored element (the same iteration's);
* a *reduction* ``acc[I] = acc[I] op f`` (op in +, -, *, min, max; ``f`` does not read ``acc``):
  the loops ``I`` depends on form a map as above, the others the reduction; the values ``f`` are
  computed as one array and folded into each element in the loops' order with ``ufunc.accumulate``,
  which rounds exactly like the sequential loop (iterations a guard skips contribute the identity:
  ``-0.0`` for +, which leaves every value unchanged).

Otherwise (or when the nest has fewer than ``VECTOR_MIN_TRIP`` iterations) the loops run serially.

GPU programs run all threads of all blocks in lockstep. Each thread-bound loop nest that is reached
outside any other (a *kernel*) gets a lane space: one lane per (block, thread), blocks outermost, the
extent of each thread axis being the largest extent bound to it in the kernel. Values that differ
between lanes are arrays over the lanes; a variable bound to a thread axis is the lanes' coordinate
on it. Local buffers allocated in a kernel get one copy per lane and shared buffers one per block.
Control flow on a lane-varying condition becomes a mask (a branch no lane takes is skipped), loops
with lane-varying bounds run to the largest active trip count under a mask, loads under a mask read
only the active lanes and stores write only them. A barrier checks that every block is either
entirely in or entirely out of the current mask (``barrier in divergent control flow``); lockstep
execution satisfies it otherwise. ``vthread`` loops run as serial loops.

Since lockstep execution would hide a missing barrier, shared buffers are checked for races (unless
``check_races=False``): between two barriers, a thread may not read an element that another thread
wrote, nor write one that another thread read (InterpError ``shared memory race``).

Every read and write is checked against its buffer's shape (statically when interval analysis
proves it in range, otherwise at run time); an out-of-range access raises :class:`IndexError`
naming the buffer, never wraps around. Allocated float buffers start filled with NaN.
"""
from __future__ import annotations

import itertools
import keyword
import linecache
import re
import sys
import weakref
from typing import Callable

import numpy as np

from ..ir import dtype as dt
from ..ir.evaluate import _BIN, _UN, _sigmoid
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Select, UnOp, UnOpKind, Var,
                       structural_key, walk)
from ..ir.interval import interval
from ..ir.loop import (Allocate, Barrier, Buffer, For, ForKind, IfThenElse, PrimFunc, Scope, Seq,
                       Stmt, Store, ThreadAxis)

__all__ = ["run", "compile_func", "source", "InterpError"]


class InterpError(RuntimeError):
    """The program cannot be executed (divergent barrier, non-constant thread extent, ...)."""


# ============================================================================ runtime helpers
# Called by the generated code. "Uniform" values are Python ints/bools or numpy scalars; "varying"
# ones are 1-d arrays over the lanes (threads of a kernel, or iterations of a vectorized loop).

def _oob(name, dim, value, shape, mask=None):
    """An out-of-range uniform index: raise, unless no lane is active (then read element 0)."""
    if mask is not None and not mask.any():
        return 0
    raise IndexError(f"index {int(value)} is out of bounds for axis {dim} of buffer '{name}' "
                     f"with shape {tuple(shape)}")


def _check_arr(name, dim, i, n, shape):
    if i.size and (i.min() < 0 or i.max() >= n):
        bad = i[(i < 0) | (i >= n)][0]
        raise IndexError(f"index {int(bad)} is out of bounds for axis {dim} of buffer '{name}' "
                         f"with shape {tuple(shape)}")


def _gl(arr, name, m, lead, idx, chk, race=None):
    """Gather ``arr[idx]`` for the lanes (``lead`` appends the per-lane/per-block copy index).

    Inactive lanes (``m`` false) read element 0; ``chk[d]`` says axis ``d`` needs a bounds check;
    ``race`` (a :class:`_Race`) records the read for the shared-memory race check."""
    shape = arr.shape
    if arr.size == 0:
        if m is None or m.any():
            raise IndexError(f"read from buffer '{name}' with shape {tuple(shape)} (no elements)")
        n = len(m)
        return np.zeros(n, arr.dtype)
    out = []
    for d, i in enumerate(idx):
        if np.ndim(i):
            if m is not None:
                i = np.where(m, i, 0)
            if chk[d]:
                _check_arr(name, d, i, shape[d], shape)
        elif chk[d] and not 0 <= i < shape[d]:
            i = _oob(name, d, i, shape, m)
        out.append(i)
    if lead is not None:
        out.append(lead)
    out = tuple(out)
    if race is not None:
        race.access(out, m, write=False)
    return arr[out]


def _st(arr, name, m, lead, idx, val, chk, race=None):
    """Scatter ``val`` into ``arr[idx]`` for the active lanes."""
    shape = arr.shape
    sel = None
    if m is not None:
        sel = np.flatnonzero(m)
        if sel.size == 0:
            return
        if sel.size != m.size:
            idx = [i[sel] if np.ndim(i) else i for i in idx]
            if lead is not None:
                lead = lead[sel]
            if np.ndim(val):
                val = val[sel]
        else:
            sel = None
    has_arr = lead is not None
    for d, i in enumerate(idx):
        if np.ndim(i):
            has_arr = True
            if chk[d]:
                _check_arr(name, d, i, shape[d], shape)
        elif chk[d] and not 0 <= i < shape[d]:
            _oob(name, d, i, shape)
    if not has_arr:  # every active lane writes the same element: the last one wins
        arr[tuple(idx)] = val[-1] if np.ndim(val) else val
        return
    if lead is not None:
        idx = (*idx, lead)
    idx = tuple(idx)
    if race is not None:
        race.access(idx, sel, write=True)
    arr[idx] = val


class _Race:
    """Shared-memory hazard tracking of one shared buffer between barriers.

    Lockstep execution hides missing barriers, so every access records, per element, the smallest
    and largest thread (within its block) that wrote or read it since the last barrier. A read of
    an element that one other thread wrote, or a write of an element that another thread read,
    raises InterpError. (Several threads writing one element, as redundant stores do, are not
    reported.) Elements of different blocks are different elements of the storage."""

    _NONE = np.iinfo(np.int32).max

    def __init__(self, name, shape, tid):
        n = int(np.prod(shape, dtype=np.int64))
        self.name, self.shape, self.tid = name, shape, tid.astype(np.int32)
        self.strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
        self.lo = {w: np.full(n, self._NONE, np.int32) for w in (False, True)}
        self.hi = {w: np.full(n, -1, np.int32) for w in (False, True)}
        self.used = {False: False, True: False}

    def barrier(self):
        for w in (False, True):
            if self.used[w]:
                self.lo[w].fill(self._NONE)
                self.hi[w].fill(-1)
                self.used[w] = False

    def access(self, idx, sel, write):
        """``idx`` indexes the storage for the lanes (``sel``: the active lanes' numbers, a mask
        of them, or None when all lanes are active)."""
        flat = 0
        for i, stride in zip(idx, self.strides):
            flat = flat + i * stride
        tid = self.tid
        if sel is not None:
            if sel.dtype == bool:
                sel = np.flatnonzero(sel)
            tid = tid[sel]
            if flat.shape != tid.shape:
                flat = flat[sel]
        other = not write  # the opposite kind of access is the hazard
        if self.used[other]:
            lo_o, hi_o = self.lo[other][flat], self.hi[other][flat]
            if write:  # WAR: any other thread read it
                bad = (hi_o >= 0) & ((lo_o != tid) | (hi_o != tid))
            else:      # RAW: exactly one writer, another thread
                bad = (lo_o == hi_o) & (lo_o != tid)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                elem = np.unravel_index(int(flat[j]), self.shape)
                who = int(lo_o[j]) if lo_o[j] != tid[j] else int(hi_o[j])
                what = (f"thread {int(tid[j])} writes an element that thread {who} read" if write
                        else f"thread {int(tid[j])} reads an element that thread {who} wrote")
                raise InterpError(f"shared memory race on '{self.name}' (element "
                                  f"{tuple(int(x) for x in elem[:-1])} of block {int(elem[-1])}): "
                                  f"{what} with no barrier in between")
        np.minimum.at(self.lo[write], flat, tid)
        np.maximum.at(self.hi[write], flat, tid)
        self.used[write] = True


def _stl(view, m, val):
    """Store into a per-lane/per-block row (uniform indices) under mask ``m``."""
    np.copyto(view, val, casting="unsafe", where=True if m is None else m)


def _barrier(m, n_blocks, n_threads):
    if m is None:
        return
    mm = m.reshape(n_blocks, n_threads)
    if not (mm.all(axis=1) | ~mm.any(axis=1)).all():
        raise InterpError("barrier in divergent control flow: some threads of a block reach it "
                          "and others do not")


def _maxact(e, m):
    """Largest trip count over the active lanes (0 if none)."""
    if np.ndim(e) == 0:
        return max(int(e), 0) if m is None or m.any() else 0
    if m is not None:
        e = e[m]
    return max(int(e.max()), 0) if e.size else 0


def _fdiv(a, b):
    return a // b if b else a - a


def _fmod(a, b):
    return a % b if b else a - a


def _vfdiv(a, b):
    if not isinstance(b, np.ndarray):
        return a // b if b else np.zeros_like(a)
    z = b == 0
    if not z.any():
        return a // b
    return np.where(z, 0, a // np.where(z, 1, b))


def _vfmod(a, b):
    if not isinstance(b, np.ndarray):
        return a % b if b else np.zeros_like(a)
    z = b == 0
    if not z.any():
        return a % b
    return np.where(z, 0, a % np.where(z, 1, b))


def _f2i(a, t):
    if a - a != 0:  # inf or nan
        return t.type(0)
    return np.trunc(a).astype(t)


def _vf2i(a, t):
    return np.where(np.isfinite(a), np.trunc(a), 0).astype(t)


def _i2i(a, t):
    return np.int64(a).astype(t)


def _vsel(c, a, b, t):
    return np.where(c, a, b).astype(t, copy=False)


def _grid(ns):
    """The iteration numbers of a loop nest with trip counts ``ns``, flattened in execution order:
    one int64 array per loop."""
    total = 1
    for n in ns:
        total *= n
    flat = np.arange(total, dtype=np.int64)
    out, stride = [], total
    for n in ns:
        stride //= n
        out.append(flat // stride % n if stride > 1 else flat % n)
    return out


def _injective(coefs, ns) -> bool:
    """Whether ``sum(c * v)`` over the box ``0 <= v < n`` takes each value at most once (a mixed
    radix: each coefficient exceeds the span of the smaller ones)."""
    span = 0
    for c, n in sorted(zip((abs(c) for c in coefs), ns)):
        if n > 1:
            if c <= span:
                return False
            span += c * (n - 1)
    return True


def _nest_ok(ns, coefs, lo, hi) -> bool:
    total = 1
    for n in ns:
        total *= n
    return lo <= total <= hi and (coefs is None or _injective(coefs, ns))


def _reduce_nest(arr, name, ufunc, idx, chk, vals, m, ns, perm, n_map, t, identity):
    """``arr[idx] = arr[idx] op vals`` over a loop nest, folded in execution order per element.

    The nest has trip counts ``ns``; ``perm`` lists its loops, those the stored element depends on
    (``n_map`` of them) first; ``idx`` and ``vals`` are per iteration (flattened nest), ``m`` the
    iterations that store. Iterations that do not store contribute the operation's identity, which
    leaves every value unchanged (``-0.0`` for +, ``+0.0`` for -)."""
    total = 1
    for n in ns:
        total *= n
    n_m = 1
    for d in perm[:n_map]:
        n_m *= ns[d]
    n_r = total // n_m

    def rows(x):  # (iterations) -> (stored element, its updates in order)
        x = np.broadcast_to(x, (total,)).reshape(ns)
        return x.transpose(perm).reshape(n_m, n_r)

    vals = rows(np.asarray(vals, dtype=t))
    active = None
    if m is not None:
        m2 = rows(m)
        vals = np.where(m2, vals, np.asarray(identity, dtype=t))
        active = m2.any(axis=1)
        if not active.any():
            return
    idx = [rows(i)[:, 0] if np.ndim(i) else i for i in idx]
    if not any(np.ndim(i) for i in idx):  # one element
        if active is not None:
            vals = vals[active]
        for d, i in enumerate(idx):
            if chk[d] and not 0 <= i < arr.shape[d]:
                _oob(name, d, i, arr.shape)
        loc = tuple(idx)
        seq = np.concatenate((np.asarray(arr[loc], dtype=t).reshape(1), vals.reshape(-1)))
        arr[loc] = ufunc.accumulate(seq)[-1]
        return
    if active is not None:
        idx = [i[active] if np.ndim(i) else i for i in idx]
        vals = vals[active]
    for d, i in enumerate(idx):
        if np.ndim(i):
            if chk[d]:
                _check_arr(name, d, i, arr.shape[d], arr.shape)
        elif chk[d] and not 0 <= i < arr.shape[d]:
            _oob(name, d, i, arr.shape)
    loc = tuple(idx)
    acc0 = np.broadcast_to(arr[loc], (vals.shape[0],))
    seq = np.concatenate((acc0[:, None].astype(t), vals), axis=1)
    arr[loc] = ufunc.accumulate(seq, axis=1)[:, -1]


_RUNTIME = {
    "np": np, "_oob": _oob, "_gl": _gl, "_st": _st, "_stl": _stl, "_barrier": _barrier,
    "_maxact": _maxact, "_fdiv": _fdiv, "_fmod": _fmod, "_vfdiv": _vfdiv, "_vfmod": _vfmod,
    "_f2i": _f2i, "_vf2i": _vf2i, "_i2i": _i2i, "_vsel": _vsel, "_grid": _grid,
    "_nest_ok": _nest_ok, "_reduce_nest": _reduce_nest,
    "_sigmoid": _sigmoid, "InterpError": InterpError, "_Race": _Race,
}

_UN_NAMES = {UnOpKind.EXP: "np.exp", UnOpKind.LOG: "np.log", UnOpKind.SQRT: "np.sqrt",
             UnOpKind.TANH: "np.tanh", UnOpKind.SIGMOID: "_sigmoid", UnOpKind.ABS: "np.abs",
             UnOpKind.NEG: "np.negative", UnOpKind.NOT: "np.logical_not"}
_BIN_SYM = {BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.DIV: "/",
            BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
            BinOpKind.EQ: "==", BinOpKind.NE: "!=", BinOpKind.AND: "&", BinOpKind.OR: "|"}
assert set(_BIN_SYM) | {BinOpKind.FLOORDIV, BinOpKind.MOD, BinOpKind.MIN, BinOpKind.MAX} == set(_BIN)
assert set(_UN_NAMES) == set(_UN)

# Reductions the vectorized path folds with ufunc.accumulate; commutative ones may have the
# accumulator on either side.
_REDUCE_UFUNC = {BinOpKind.ADD: ("np.add", True), BinOpKind.SUB: ("np.subtract", False),
                 BinOpKind.MUL: ("np.multiply", True), BinOpKind.MIN: ("np.minimum", True),
                 BinOpKind.MAX: ("np.maximum", True)}

VECTOR_MIN_TRIP = 16    # an eligible loop nest with fewer iterations runs serially (numpy overhead)
VECTOR_MAX_TRIP = 1 << 20  # ... and one with more runs its outer loop serially (memory)
_MAX_FOR_DEPTH = 16     # Python allows 20 nested blocks; deeper nests go into inner functions
_HOIST_HEIGHT = 24      # expression subtrees this tall become temporaries (parser nesting limit)


# ============================================================================ code generation

class _Kernel:
    """Lane space of one kernel."""

    def __init__(self, idx: int, axes: dict):
        block_axes = [a for a in (ThreadAxis.BLOCK_Z, ThreadAxis.BLOCK_Y, ThreadAxis.BLOCK_X)
                      if a in axes]
        thread_axes = [a for a in (ThreadAxis.THREAD_Z, ThreadAxis.THREAD_Y, ThreadAxis.THREAD_X)
                       if a in axes]
        self.axes = dict(axes)  # axis -> largest extent
        self.n_blocks = int(np.prod([axes[a] for a in block_axes], dtype=np.int64))
        self.n_threads = int(np.prod([axes[a] for a in thread_axes], dtype=np.int64))
        self.n_lanes = self.n_blocks * self.n_threads
        self.prefix = f"_k{idx}"
        lane = np.arange(self.n_lanes, dtype=np.int64)
        self.arrays = {f"{self.prefix}_lane": lane, f"{self.prefix}_blk": lane // self.n_threads,
                       f"{self.prefix}_tid": lane % max(self.n_threads, 1)}
        self.coord = {}
        rest = lane.copy()
        for a in reversed(block_axes + thread_axes):  # innermost (threadIdx.x) varies fastest
            name = f"{self.prefix}_{a.name.lower()}"
            self.arrays[name] = rest % axes[a]
            rest //= axes[a]
            self.coord[a] = name
        self.lane = f"{self.prefix}_lane"
        self.blk = f"{self.prefix}_blk"
        self.tid = f"{self.prefix}_tid"


def _strip_guards(s: Stmt):
    """``if a: if b: store`` -> ([a, b], store), or None when ``s`` is not of that form."""
    conds = []
    while isinstance(s, IfThenElse) and s.else_ is None:
        conds.append(s.cond)
        s = s.then
    return (conds, s) if isinstance(s, Store) else None


def _loads_of(e: Expr, buf) -> list:
    return [x for x in walk(e) if isinstance(x, Load) and x.buffer is buf]


def _linear_coef(e: Expr, v: Var):
    """The coefficient of ``v`` when ``e`` is ``c * v + rest`` (rest free of ``v``, c a constant
    int), else None."""
    if not any(x is v for x in walk(e)):
        return 0
    if e is v:
        return 1
    if isinstance(e, BinOp) and e.dtype.is_int:
        if e.op in (BinOpKind.ADD, BinOpKind.SUB):
            a, b = _linear_coef(e.a, v), _linear_coef(e.b, v)
            if a is None or b is None:
                return None
            return a + b if e.op is BinOpKind.ADD else a - b
        if e.op is BinOpKind.MUL:
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Const):
                    c = _linear_coef(x, v)
                    return None if c is None else c * y.value
        return None
    if isinstance(e, UnOp) and e.op is UnOpKind.NEG and e.dtype.is_int:
        c = _linear_coef(e.a, v)
        return None if c is None else -c
    return None


def _identity(op: BinOpKind, t: dt.DType):
    """The value ``x`` with ``acc op x == acc`` exactly for every ``acc`` (IEEE: -0.0 for +)."""
    if op is BinOpKind.ADD:
        return -0.0 if t.is_float else 0
    if op is BinOpKind.SUB:
        return 0.0 if t.is_float else 0
    if op is BinOpKind.MUL:
        return 1.0 if t.is_float else 1
    if t.is_bool:
        return op is BinOpKind.MIN
    if t.is_float:
        return float("inf") if op is BinOpKind.MIN else float("-inf")
    info = np.iinfo(t.np)
    return int(info.max) if op is BinOpKind.MIN else int(info.min)


def _same_index(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    return all(structural_key(x, id) == structural_key(y, id) for x, y in zip(a, b))


_IDENT = re.compile(r"[^0-9A-Za-z_]")


class _Gen:
    def __init__(self, func: PrimFunc, check_races: bool = True):
        self.func = func
        self.check_races = check_races
        self.races: dict = {}          # shared Buffer -> python name of its _Race
        self.ns: dict = dict(_RUNTIME)
        self.lines: list = []
        self.ind = 1
        self.counter = itertools.count()
        self.names: dict = {}          # id(Var) -> python name
        self.bound: set = set()        # ids of the Vars bound by enclosing loops
        self.bufs: dict = {}           # Buffer -> (python name, lead) ; lead None/"lane"/"block"
        self.ranges: dict = {}         # Var -> (lo, hi) inclusive
        self.varying: set = set()      # lane-varying Vars
        self.lanes = False             # inside a kernel or a vectorized loop
        self.kernel: _Kernel | None = None
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
            base = _IDENT.sub("_", v.name) or "v"
            n = f"v{len(self.names)}_{base}"
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

    def buf(self, b: Buffer):
        info = self.bufs.get(b)
        if info is None:
            raise InterpError(f"buffer '{b.name}' is neither a parameter nor allocated here")
        return info

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
            ch = e.children()
            h = 1 + max((self.height(c) for c in ch), default=0)
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
        if not self.lazy and self.height(e) >= _HOIST_HEIGHT and self.height(e) % _HOIST_HEIGHT == 0:
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
            idx = ", ".join(self.index_expr(e.buffer, name, d, i) for d, i in enumerate(e.indices))
            return f"{name}[{idx}]"
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
            return f"{_UN_NAMES[e.op]}({a})"
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
            return f"{_UN_NAMES[e.op]}({self.ex(e.a)})"
        if isinstance(e, BinOp):
            a, b = self.ex(e.a), self.ex(e.b)
            op, t = e.op, e.a.dtype
            if op in _BIN_SYM:
                return f"({a} {_BIN_SYM[op]} {b})"
            if op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
                if t.is_float:
                    return f"({a} {'//' if op is BinOpKind.FLOORDIV else '%'} {b})"
                return f"{'_vfdiv' if op is BinOpKind.FLOORDIV else '_vfmod'}({a}, {b})"
            return f"{'np.minimum' if op is BinOpKind.MIN else 'np.maximum'}({a}, {b})"
        raise TypeError(f"the interpreter cannot evaluate {type(e).__name__} (not loop IR)")

    def load_v(self, e: Load) -> str:
        b = e.buffer
        name, lead = self.buf(b)
        vary = [self.is_varying(i) for i in e.indices]
        race = self.races.get(b)
        if lead is not None and not any(vary) and race is None:
            view = f"{name}[{', '.join(self.index_expr(b, name, d, i) for d, i in enumerate(e.indices))}]" \
                if e.indices else name
            if lead == "lane":
                return view
            return f"{view}[{self.kernel.blk}]"
        idx = [self.ex(i) for i in e.indices]
        chk = tuple(self.needs_check(b, d, i) for d, i in enumerate(e.indices))
        lead_s = "None" if lead is None else (self.kernel.lane if lead == "lane" else self.kernel.blk)
        extra = "" if race is None else f", {race}"
        return (f"_gl({name}, {b.name!r}, {self.mask}, {lead_s}, ({''.join(x + ', ' for x in idx)}), "
                f"{chk!r}{extra})")

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

    # ------------------------------------------------------------------ statements
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
            k = self.kernel
            if k is not None and self.mask is not None:
                self.emit(f"_barrier({self.mask}, {k.n_blocks}, {k.n_threads})")
            if k is not None:
                for r in self.races.values():
                    self.emit(f"{r}.barrier()")
        else:
            raise InterpError(f"unknown statement {type(s).__name__}")

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
        name = f"b{len(self.ns)}_{_IDENT.sub('_', b.name)}"
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
        vary_idx = [self.is_varying(i) for i in s.indices]
        if not self.lanes or (lead is None and not any(vary_idx) and self.mask is None
                              and not self.is_varying(s.value)):
            idx = ", ".join(self.index_expr(b, name, d, i) for d, i in enumerate(s.indices))
            self.emit(f"{name}[{idx or '()'}] = {val}")
            return
        race = self.races.get(b)
        if lead is not None and not any(vary_idx) and race is None:
            idx = ", ".join(self.index_expr(b, name, d, i) for d, i in enumerate(s.indices))
            view = f"{name}[{idx}]" if idx else name
            if lead == "block":  # one row per block: scatter with the block ids
                self.emit(f"_st({view}, {b.name!r}, {self.mask}, None, ({self.kernel.blk},), "
                          f"{val}, (False,))")
            else:
                self.emit(f"_stl({view}, {self.mask}, {val})")
            return
        idx = [self.ex(i) for i in s.indices]
        chk = tuple(self.needs_check(b, d, i) for d, i in enumerate(s.indices))
        lead_s = "None" if lead is None else (self.kernel.lane if lead == "lane" else self.kernel.blk)
        extra = "" if race is None else f", {race}"
        self.emit(f"_st({name}, {b.name!r}, {self.mask}, {lead_s}, "
                  f"({''.join(x + ', ' for x in idx)}), {val}, {chk!r}{extra})")

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
        if s.kind is ForKind.THREAD_BOUND and s.thread is not ThreadAxis.VTHREAD:
            if s.thread is None:
                raise InterpError(f"thread-bound loop '{s.var.name}' has no thread axis")
            if self.kernel is None:
                if self.lanes:
                    raise InterpError("thread-bound loop inside a vectorized loop")
                self.kernel_root(s)
            else:
                self.bind(s)
            return
        if self.for_depth >= _MAX_FOR_DEPTH:  # Python's limit on nested blocks: go one function deeper
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
        plan = None if self.lanes else self.nest_plan(s)
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
        self.emit(f"{b} = np.array({self.ex(s.begin)})" if vary_begin else f"{b} = {self.ex(s.begin)}")
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
        n0 = len(self.lines)
        self.stmt(s.body)
        if len(self.lines) == n0:
            self.emit("pass")
        self.varying.discard(s.var)
        self.bound.discard(id(s.var))
        self.mask = saved
        self.ind -= 1
        self.for_depth -= 1
        self.ranges.pop(s.var, None)

    # ------------------------------------------------------------------ vectorized loop nests (CPU)
    def nest_plan(self, s: For):
        """A plan to run the perfect loop nest rooted at ``s`` (loops around one guarded store) as
        numpy operations over all its iterations, when that provably gives the result of running it
        in order; else None. Kinds: "map" (every iteration stores its own element, the stored
        buffer is only read at the stored element) and "reduce" (``acc[I] = acc[I] op f``, the
        loops ``I`` does not depend on form the reduction, ``f`` does not read ``acc``)."""
        loops, body = [s], s.body
        while isinstance(body, For) and body.kind is not ForKind.THREAD_BOUND:
            loops.append(body)
            body = body.body
        if any(lp.var.dtype is not dt.INDEX for lp in loops):
            return None
        g = _strip_guards(body)
        if g is None:
            return None
        conds, st = g
        buf = st.buffer
        nest_vars = {id(lp.var) for lp in loops}
        for lp in loops[1:]:  # rectangular: inner bounds do not depend on the nest
            for e in (lp.begin, lp.extent):
                if any(isinstance(x, Var) and id(x) in nest_vars for x in walk(e)) or _loads_of(e, buf):
                    return None
        if any(_loads_of(i, buf) for i in st.indices) or any(_loads_of(c, buf) for c in conds):
            return None
        coefs = []  # per loop: coefficient of its variable in each index
        for lp in loops:
            cs = [_linear_coef(i, lp.var) for i in st.indices]
            if any(c is None for c in cs):
                return None
            coefs.append(cs)
        flat = [sum(c * stride for c, stride in zip(cs, buf.strides)) for cs in coefs]
        map_loops = [d for d, cs in enumerate(coefs) if any(cs)]
        red_loops = [d for d, cs in enumerate(coefs) if not any(cs)]
        if any(flat[d] == 0 for d in map_loops):
            return None
        plan = {"loops": loops, "conds": conds, "store": st, "map": map_loops,
                "coefs": tuple(flat[d] for d in map_loops)}
        if not red_loops:
            for ld in _loads_of(st.value, buf):
                if not _same_index(ld.indices, st.indices):
                    return None
            return dict(plan, kind="map")
        val = st.value
        if not isinstance(val, BinOp) or val.op not in _REDUCE_UFUNC:
            return None
        ufunc, commutative = _REDUCE_UFUNC[val.op]
        for acc, f in [(val.a, val.b)] + ([(val.b, val.a)] if commutative else []):
            if (isinstance(acc, Load) and acc.buffer is buf and _same_index(acc.indices, st.indices)
                    and not _loads_of(f, buf)):
                return dict(plan, kind="reduce", ufunc=ufunc, op=val.op, value=f,
                            perm=tuple(map_loops + red_loops))
        return None

    def vector_nest(self, plan, b0: str, n0: str) -> None:
        """Emit ``if <the nest may run vectorized>: <vectorized nest>`` (the caller adds the else)."""
        loops = plan["loops"]
        bs, ns = [b0], [n0]
        ok = self.fresh("ok")
        if len(loops) > 1:
            self.emit(f"{ok} = False")
        for lp in loops[1:]:  # inner bounds, evaluated only where the serial code would
            self.emit(f"if {ns[-1]} > 0:")
            self.ind += 1
            b, n = self.fresh("b"), self.fresh("n")
            self.emit(f"{b} = {self.ex(lp.begin)}")
            self.emit(f"{n} = {self.ex(lp.extent)}")
            bs.append(b)
            ns.append(n)
        all_ns = "(" + "".join(n + ", " for n in ns) + ")"
        check = f"_nest_ok({all_ns}, None, {VECTOR_MIN_TRIP}, {VECTOR_MAX_TRIP})"
        if plan["map"]:  # the map loops must store distinct elements
            map_ns = "(" + "".join(f"{ns[d]}, " for d in plan["map"]) + ")"
            check += f" and _nest_ok({map_ns}, {plan['coefs']!r}, 0, 1 << 62)"
        if len(loops) > 1:
            self.emit(f"{ok} = {check}")
            self.ind -= len(loops) - 1
            self.emit(f"if {ok}:")
        else:
            self.emit(f"if {check}:")
        self.ind += 1
        for lp in loops[1:]:
            self.set_range(lp.var, lp.begin, lp.extent)
        grid = self.fresh("g")
        total = self.fresh("N")
        self.emit(f"{grid} = _grid(({''.join(n + ', ' for n in ns)}))")
        self.emit(f"{total} = {grid}[0].size")
        for d, lp in enumerate(loops):
            self.emit(f"{self.var_name(lp.var)} = {bs[d]} + {grid}[{d}]")
            self.bound.add(id(lp.var))
        saved = (self.lanes, self.varying, self.mask, self.lane_shape)
        self.lanes, self.mask, self.lane_shape = True, None, f"({total},)"
        self.varying = {lp.var for lp in loops}
        try:
            if plan["kind"] == "map":
                body = loops[-1].body
                self.stmt(body)
                return
            st = plan["store"]
            for c in plan["conds"]:
                self._vmemo = {}
                cond = self.ex(c)
                m = self.fresh("m")
                if self.is_varying(c):
                    self.emit(f"{m} = {cond}" if self.mask is None else f"{m} = {self.mask} & {cond}")
                else:  # uniform: all iterations or none
                    self.emit(f"{m} = np.full({total}, bool({cond}))" if self.mask is None
                              else f"{m} = {self.mask} & bool({cond})")
                self.mask = m
            self._vmemo = {}
            vals = self.fresh("vals")
            self.emit(f"{vals} = {self.ex(plan['value'])}")
            name, lead = self.buf(st.buffer)
            assert lead is None
            idx = [self.ex(i) for i in st.indices]
            chk = tuple(self.needs_check(st.buffer, d, i) for d, i in enumerate(st.indices))
            t = st.buffer.dtype
            ident = _identity(plan["op"], t)
            self.emit(f"_reduce_nest({name}, {st.buffer.name!r}, {plan['ufunc']}, "
                      f"({''.join(x + ', ' for x in idx)}), {chk!r}, {vals}, {self.mask}, "
                      f"({''.join(n + ', ' for n in ns)}), {plan['perm']!r}, {len(plan['map'])}, "
                      f"{self.np_type(t)}, {self.const_name(ident, t) if not t.is_bool else ident})")
        finally:
            self.lanes, self.varying, self.mask, self.lane_shape = saved
            for lp in loops[1:]:
                self.ranges.pop(lp.var, None)
                self.bound.discard(id(lp.var))
            self.ind -= 1

    # ------------------------------------------------------------------ kernels
    def kernel_root(self, s: For) -> None:
        axes: dict = {}

        def collect(x, bound):
            if isinstance(x, For) and x.kind is ForKind.THREAD_BOUND and x.thread is not ThreadAxis.VTHREAD:
                if x.thread in bound:
                    raise InterpError(f"thread axis {x.thread.value} bound twice on one path "
                                      f"(loop '{x.var.name}')")
                if not isinstance(x.extent, Const):
                    raise InterpError(f"thread-bound loop '{x.var.name}' ({x.thread.value}) needs "
                                      f"a constant extent")
                axes[x.thread] = max(axes.get(x.thread, 0), int(x.extent.value))
                bound = bound | {x.thread}
            for c in x.children():
                collect(c, bound)

        collect(s, frozenset())
        k = _Kernel(self.n_kernels, axes)
        self.n_kernels += 1
        self.ns.update(k.arrays)
        if k.n_lanes == 0:
            return
        saved = (self.lanes, self.kernel, self.varying, self.mask, self.bound_axes, self.lane_shape)
        self.lanes, self.kernel, self.varying, self.mask = True, k, set(self.varying), None
        self.bound_axes, self.lane_shape = set(), f"({k.n_lanes},)"
        try:
            self.bind(s)
        finally:
            (self.lanes, self.kernel, self.varying, self.mask, self.bound_axes,
             self.lane_shape) = saved

    def bind(self, s: For) -> None:
        k = self.kernel
        if s.thread in self.bound_axes:
            raise InterpError(f"thread axis {s.thread.value} bound twice on one path")
        ext = int(s.extent.value)
        self._vmemo = {}
        if self.is_varying(s.begin):
            raise InterpError(f"thread-bound loop '{s.var.name}' has a lane-varying begin")
        v = self.var_name(s.var)
        coord = k.coord[s.thread]
        conv = "" if s.var.dtype is dt.INDEX else f".astype({self.np_type(s.var.dtype)})"
        if isinstance(s.begin, Const) and s.begin.value == 0:
            self.emit(f"{v} = {coord}{conv}")
        else:
            self.emit(f"{v} = ({self.ex(s.begin)} + {coord}){conv}")
        saved = self.mask
        self.set_range(s.var, s.begin, s.extent)
        self.varying.add(s.var)
        self.bound.add(id(s.var))
        self.bound_axes.add(s.thread)
        try:
            if ext < k.axes[s.thread]:
                m = self.fresh("m")
                self.emit(f"{m} = {coord} < {ext}" if saved is None
                          else f"{m} = {saved} & ({coord} < {ext})")
                self.mask = m
                self.emit(f"if {m}.any():")
                self.block(self.stmt, s.body)
            else:
                self.stmt(s.body)
        finally:
            self.mask = saved
            self.varying.discard(s.var)
            self.bound.discard(id(s.var))
            self.bound_axes.discard(s.thread)
            self.ranges.pop(s.var, None)

    # ------------------------------------------------------------------ function
    def function(self) -> str:
        params = []
        for b in self.func.params:
            n = f"p{len(params)}_{_IDENT.sub('_', b.name)}"
            if keyword.iskeyword(n):
                n += "_"
            params.append(n)
            self.bufs[b] = (n, None)
        self.stmt(self.func.body)
        if not self.lines:
            self.emit("pass")
        return f"def _interp_{_IDENT.sub('_', self.func.name)}({', '.join(params)}):\n" + \
            "\n".join(self.lines) + "\n"


# ============================================================================ public API

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _compile(func: PrimFunc, check_races: bool = True):
    per_func = _CACHE.setdefault(func, {})
    options = (check_races, VECTOR_MIN_TRIP, VECTOR_MAX_TRIP)
    hit = per_func.get(options)
    if hit is not None and hit[0] is func.body and hit[1] == tuple(func.params):
        return hit[2], hit[3]
    gen = _Gen(func, check_races)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # deep expression trees
    try:
        src = gen.function()
    finally:
        sys.setrecursionlimit(limit)
    filename = f"<tecomp.interp {func.name} #{next(_SERIAL)}>"
    code = compile(src, filename, "exec")
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)  # tracebacks
    weakref.finalize(func, linecache.cache.pop, filename, None)
    ns = gen.ns
    exec(code, ns)
    fn = ns[f"_interp_{_IDENT.sub('_', func.name)}"]
    per_func[options] = (func.body, tuple(func.params), fn, src)
    return fn, src


_SERIAL = itertools.count()


def source(func: PrimFunc, check_races: bool = True) -> str:
    """The Python source the interpreter runs for ``func`` (for debugging)."""
    return _compile(func, check_races)[1]


def compile_func(func: PrimFunc, check_races: bool = True) -> Callable[[list], None]:
    """:func:`run` with the compilation done once: returns ``f(arrays)``."""
    fn, _ = _compile(func, check_races)
    params = list(func.params)

    def call(arrays):
        _check_args(func.name, params, arrays)
        with np.errstate(all="ignore"):
            fn(*arrays)
    return call


def _check_args(name, params, arrays) -> None:
    if len(arrays) != len(params):
        raise ValueError(f"{name} takes {len(params)} arrays, got {len(arrays)}")
    for b, a in zip(params, arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument '{b.name}' must be a numpy array, got {type(a).__name__}")
        if a.shape != tuple(b.shape) or a.dtype != b.dtype.np:
            raise ValueError(f"argument '{b.name}' must be {b.dtype}{list(b.shape)}, "
                             f"got {a.dtype}{list(a.shape)}")
    for x in range(len(arrays)):
        for y in range(x):
            if arrays[x].size and arrays[y].size and np.may_share_memory(arrays[x], arrays[y]):
                raise ValueError(f"arguments '{params[y].name}' and '{params[x].name}' share "
                                 f"memory (buffers never alias in the loop IR)")


def run(func: PrimFunc, arrays: list, *, check_races: bool = True) -> None:
    """Execute the loop IR with numpy; ``arrays`` in ``func.params`` order (outputs written in
    place). Out-of-range accesses raise IndexError naming the buffer; with ``check_races``, a GPU
    kernel whose threads exchange data through shared memory without a barrier in between raises
    InterpError."""
    compile_func(func, check_races)(arrays)
