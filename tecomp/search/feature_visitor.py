"""The per-function part of feature extraction: one row of :data:`~.feature_layout.FEATURE_LEN`
floats for every ``Store`` of a lowered function (see :mod:`tecomp.search.features` for what the
values model and :mod:`tecomp.search.feature_layout` for where each one goes)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..ir.evaluate import eval_np
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Load, UnOpKind, Var, unary
from ..ir.loop import Allocate, For, ForKind, IfThenElse, Scope, Seq, Store
from ..ir.traverse import walk
from .feature_gpu import gpu_figures
from .feature_layout import (
    AI_SAMPLES,
    ANN_SLOT,
    BIN_SLOT,
    FEATURE_LEN,
    MAX_BUFS,
    NBUF,
    O_AI,
    O_ALLOC,
    O_ANN,
    O_BUF,
    O_EXTRA,
    O_GPU,
    O_GPU2,
    O_OUT,
    THREAD_SLOT,
    op_slot,
)

if TYPE_CHECKING:
    from .features import TaskInfo

__all__ = ["FuncFeatures"]

_FULL_UNROLL = 300  # LLVM's default full-unroll threshold, in instructions
_SAMPLE_POINTS = 512
_INF = math.inf
_AFFINE_OPS = (BinOpKind.ADD, BinOpKind.SUB)


class _Access:
    __slots__ = ("buf", "dims", "vars", "indirect", "write")

    def __init__(self, buf, dims, write):
        self.buf, self.dims, self.write = buf, dims, write
        self.vars = set()
        self.indirect = False
        for coefs, _cap, ind in dims:
            self.vars.update(coefs)
            self.indirect |= ind


class FuncFeatures:
    """Feature extraction of one lowered function."""

    def __init__(self, info: TaskInfo, func):
        self.info, self.func = info, func
        self.memo: dict = {}  # id(index expression) -> affine reading
        self.var_ext: dict = {}  # id(loop variable) -> extent (its range caps spans)
        self.data = {b: info.data[b.name] for b in func.params if b.name in info.data}
        self.store_bufs: dict = {}  # buffer -> number of stores that access it
        self.scanned: dict = {}  # id(store) -> (compute counts per iteration, loads)
        self.rows: list = []
        self.kernels: dict = {}  # id(kernel's outermost bound loop) -> (shared, local bytes)
        self.rng = np.random.default_rng(0)

    # ------------------------------------------------------------------ traversal
    def run(self) -> np.ndarray:
        for st in _stores(self.func.body):
            _, loads = self.scanned[id(st)] = _scan(st)
            for b in {st.buffer, *(ld.buffer for ld in loads)}:
                self.store_bufs[b] = self.store_bufs.get(b, 0) + 1
        self.visit(self.func.body, [], [], {}, 0)
        if not self.rows:
            return np.zeros((1, FEATURE_LEN), dtype=np.float32)
        out = np.log2(1.0 + np.clip(np.asarray(self.rows, dtype=np.float64), 0.0, 1e300))
        return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)

    def visit(self, s, loops, guards, allocs, unroll):
        stack = [(s, loops, guards, unroll)]
        while stack:
            s, loops, guards, unroll = stack.pop()
            if isinstance(s, For):
                ext = s.extent.value if isinstance(s.extent, Const) else None
                dep = ext is None
                if dep:
                    ext = self.avg_extent(s.extent, loops, guards)
                u = dict(s.pragmas).get("auto_unroll_max_step", unroll) if s.pragmas else unroll
                self.var_ext[id(s.var)] = max(float(ext), 1.0)
                if not dep and ext == 1:  # a loop of one iteration is no loop in the code
                    stack.append((s.body, loops, guards, u))
                    continue
                stack.append((s.body, loops + [(s.var, float(max(ext, 0)), s, dep)], guards, u))
            elif isinstance(s, Store):
                self.store(s, loops, guards, allocs, unroll)
            elif isinstance(s, Seq):
                stack.extend((c, loops, guards, unroll) for c in reversed(s.stmts))
            elif isinstance(s, IfThenElse):
                f = self.guard_fraction(s.cond, loops)
                stack.append((s.then, loops, guards + [(s.cond, len(loops), f)], unroll))
                if s.else_ is not None:
                    neg = unary(UnOpKind.NOT, s.cond)
                    stack.append((s.else_, loops, guards + [(neg, len(loops), 1.0 - f)], unroll))
            elif isinstance(s, Allocate):
                allocs[s.buffer] = len(loops)
                stack.append((s.body, loops, guards, unroll))

    def avg_extent(self, e, loops, guards) -> float:
        """Mean of a data-dependent extent over a sample of the outer iterations that pass the
        enclosing guards."""
        try:
            total = math.prod(x[1] for x in loops)
            if total <= _SAMPLE_POINTS:
                grids = np.indices([max(1, int(round(x[1]))) for x in loops]).reshape(len(loops), -1) \
                    if loops else np.zeros((0, 1), dtype=np.int64)
                env = {x[0]: grids[k] for k, x in enumerate(loops)}
            else:
                env = {x[0]: self.rng.integers(0, max(1, int(round(x[1]))), _SAMPLE_POINTS)
                       for x in loops}
            mask = None
            for cond, _, _ in guards:
                m = np.asarray(eval_np(cond, env, self.data, mask)).astype(bool)
                mask = m if mask is None else mask & m
            vals = np.broadcast_to(eval_np(e, env, self.data, mask), (_n_points(env),))
            if mask is not None:
                mask = np.broadcast_to(mask, vals.shape)
                vals = vals[mask] if mask.any() else vals[:0]
            v = float(np.mean(vals)) if vals.size else 0.0
            return v if math.isfinite(v) and v > 0 else 0.0
        except Exception:  # noqa: BLE001 - no data to evaluate: the pointer's mean step
            steps = [self.info.slope[x.buffer.name][0] for x in walk(e)
                     if isinstance(x, Load) and x.buffer.name in self.info.slope]
            return max(steps) if steps else 1.0

    def guard_fraction(self, cond, loops) -> float:
        """Share of the iterations of ``loops`` that pass ``cond`` (``x < c`` conjunctions, the
        guards of non-divisible splits, from the span of ``x``; other conditions count 1)."""
        if isinstance(cond, BinOp) and cond.op is BinOpKind.AND:
            return self.guard_fraction(cond.a, loops) * self.guard_fraction(cond.b, loops)
        if not (isinstance(cond, BinOp) and cond.op in (BinOpKind.LT, BinOpKind.LE)
                and isinstance(cond.b, Const)):
            return 1.0
        coefs, cap, _ = self.affine(cond.a)
        span = 1.0 + sum(abs(coefs.get(id(v), 0.0)) * max(ext - 1.0, 0.0) for v, ext, _, _ in loops)
        bound = cond.b.value + (1 if cond.op is BinOpKind.LE else 0)
        return max(0.0, min(1.0, bound / min(span, cap)))

    # ------------------------------------------------------------------ index analysis
    def affine(self, e):
        """``(coefs {var id: coef}, span cap, indirect)`` of an integer expression."""
        r = self.memo.get(id(e))
        if r is not None:
            return r
        if isinstance(e, Const):
            r = ({}, 1.0, False)
        elif isinstance(e, Var):
            r = ({id(e): 1.0}, self.var_ext.get(id(e), _INF), False)
        elif isinstance(e, Cast):
            r = self.affine(e.a)
        elif isinstance(e, BinOp) and e.op in _AFFINE_OPS:
            (ca, pa, ia), (cb, pb, ib) = self.affine(e.a), self.affine(e.b)
            c = dict(ca)
            sg = 1.0 if e.op is BinOpKind.ADD else -1.0
            for k, v in cb.items():
                c[k] = c.get(k, 0.0) + sg * v
            r = (c, pa + pb - 1.0, ia or ib)
        elif isinstance(e, BinOp) and e.op is BinOpKind.MUL and (
                isinstance(e.a, Const) or isinstance(e.b, Const)):
            k, x = (e.a.value, e.b) if isinstance(e.a, Const) else (e.b.value, e.a)
            c, p, ind = self.affine(x)
            r = ({v: w * k for v, w in c.items()}, (p - 1.0) * abs(k) + 1.0, ind)
        elif isinstance(e, BinOp) and e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) \
                and isinstance(e.b, Const) and e.b.value > 0:
            c, p, ind = self.affine(e.a)
            d = float(e.b.value)
            if e.op is BinOpKind.FLOORDIV:
                r = ({v: w / d for v, w in c.items()}, math.floor((p - 1.0) / d) + 1.0
                     if p < _INF else _INF, ind)
            else:
                r = (c, min(p, d), ind)
        elif isinstance(e, Load):
            step, span = self.info.slope.get(e.buffer.name, (1.0, _INF))
            c, ind = {}, True
            for ix in e.indices:
                ci, _, _ = self.affine(ix)
                for v, w in ci.items():
                    c[v] = c.get(v, 0.0) + abs(w) * step
            r = (c, span, ind)
        else:  # min/max/select/nonlinear: every variable moves it by one, range unknown
            c, ind = {}, False
            for x in walk(e):
                if isinstance(x, Var):
                    c[id(x)] = 1.0
                elif isinstance(x, Load):
                    ind = True
            r = (c, _INF, ind)
        self.memo[id(e)] = r
        return r

    # ------------------------------------------------------------------ one store
    def store(self, st, loops, guards, allocs, unroll):
        row = [0.0] * FEATURE_LEN
        n = len(loops)
        exts = [x[1] for x in loops]
        suffix = [1.0] * (n + 1)  # suffix[l]: product of extents of loops l..n-1
        for l in range(n - 1, -1, -1):
            suffix[l] = suffix[l + 1] * exts[l]
        frac = math.prod(g[2] for g in guards)
        trip = suffix[0] * frac
        counts, loads = self.scanned[id(st)]
        flops_per_iter = sum(counts[1:7])
        for k in range(16):
            row[k] = counts[k] * trip
        for cond, depth, _ in guards:
            w = math.prod(exts[:depth])
            for x in walk(cond):
                k = op_slot(x)
                if k is not None:
                    row[k] += w
        # accesses
        accesses = [_Access(st.buffer, [self.affine(i) for i in st.indices], True)]
        accesses += [_Access(ld.buffer, [self.affine(i) for i in ld.indices], False)
                     for ld in loads]
        stored_vars = accesses[0].vars
        self.annotations(row, loops, stored_vars)
        for var, ext, f, _ in loops:
            if f.kind is ForKind.THREAD_BOUND:
                row[O_GPU] = 1.0
                row[O_GPU + THREAD_SLOT[f.thread.value]] = ext
        # the loop LLVM sees innermost: unrolled loops, and small constant serial ones that its
        # full unroller takes (about 300 instructions), are straight-line code around the store
        body, eff, cost = 1.0, None, flops_per_iter + len(loads) + 1
        for l in range(n - 1, -1, -1):
            f = loops[l][2]
            if f.kind is ForKind.UNROLLED or (f.kind is ForKind.SERIAL and not loops[l][3]
                                              and body * exts[l] * cost <= _FULL_UNROLL):
                body *= exts[l]
            else:
                eff = l
                break
        vectorizable, slp = self.buffers(row, accesses, loops, exts, suffix, trip, flops_per_iter,
                                         eff)
        # allocation of the stored buffer
        if st.buffer in allocs:
            d = allocs[st.buffer]
            nbytes = st.buffer.alloc_size * st.buffer.dtype.itemsize
            outer = trip / suffix[d] if suffix[d] else 0.0
            row[O_ALLOC:O_ALLOC + 4] = [nbytes, nbytes * outer, outer, suffix[d]]
        row[O_OUT:O_OUT + 3] = [trip, n, unroll]
        par = math.prod(x[1] for x in loops if x[2].kind is ForKind.PARALLEL)
        cores = self.info.cores
        imbalance = math.ceil(par / cores) * cores / par - 1.0 if par >= 1 else cores - 1.0
        row[O_EXTRA:O_EXTRA + 8] = [len(guards), sum(1 for x in loops if x[3]), frac, imbalance,
                                      exts[eff] if eff is not None else 0.0, body, vectorizable,
                                      slp]
        if row[O_GPU]:
            row[O_GPU2:O_GPU2 + 7] = gpu_figures(st, loops, self.kernels)
        self.rows.append(row)

    def annotations(self, row, loops, stored_vars):
        n = len(loops)
        for kind, a in ANN_SLOT.items():
            pos = [k for k in range(n) if loops[k][2].kind is kind]
            if not pos:
                row[O_ANN + 11 * a + 3 + 7] = 1.0  # position: none
                continue
            o = O_ANN + 11 * a
            row[o] = len(pos)
            row[o + 1] = math.prod(loops[k][1] for k in pos)
            inner = pos[-1]
            row[o + 2] = loops[inner][1]
            types = {id(loops[k][0]) in stored_vars for k in pos}
            if len(types) > 1:
                slot = 6
            else:
                where = 0 if inner == n - 1 else 2 if inner == 0 else 1
                slot = where + (0 if types.pop() else 3)
            row[o + 3 + slot] = 1.0

    def buffers(self, row, accesses, loops, exts, suffix, trip, flops_per_iter, eff) -> float:
        """Fill the buffer and intensity features; return whether the effective innermost loop
        ``eff`` is vectorizable (stored with stride 1, every access of stride 0 or 1), and the
        contiguous width of the straight-line body inside it (1: none)."""
        n = len(loops)
        vectorizable = eff is not None and loops[eff][2].kind in (ForKind.SERIAL,
                                                                  ForKind.VECTORIZED)
        line = self.info.line
        by_buf: dict = {}
        for a in accesses:
            by_buf.setdefault(a.buf, []).append(a)
        # footprints (elements) of every buffer at every level l (loops l..n-1 vary)
        fp, ulines = {}, {}
        for b, accs in by_buf.items():
            levels = [1.0] * (n + 1)
            eb, shape = b.dtype.itemsize, b.shape
            for a in accs:
                spans = [1.0] * len(a.dims)
                for l in range(n - 1, -1, -1):
                    vid, e1 = id(loops[l][0]), max(exts[l] - 1.0, 0.0)
                    tot = 1.0
                    for d, (coefs, cap, _) in enumerate(a.dims):
                        w = coefs.get(vid)
                        if w:
                            spans[d] += abs(w) * e1
                        tot *= min(spans[d], cap, shape[d])
                    levels[l] = max(levels[l], tot)
                # unique cache lines: rows of the last dimension times lines per row
                real = [min(sp, cap, sh) for sp, (_, cap, _), sh in zip(spans, a.dims, shape)]
                lines = math.prod(real[:-1]) * math.ceil(real[-1] * eb / line) if real else 1.0
                ulines[b] = max(ulines.get(b, 1.0), lines)
            fp[b] = levels
        level_bytes = [sum(fp[b][l] * b.dtype.itemsize for b in fp) for l in range(n + 1)]
        feats = []
        body = [l for l in range(n if eff is None else eff + 1, n) if exts[l] > 1]
        slp_ok = dict.fromkeys(body, True)
        for b, accs in by_buf.items():
            eb = b.dtype.itemsize
            f = [0.0] * NBUF
            w, r = any(a.write for a in accs), any(not a.write for a in accs)
            f[0 if not w else 1 if not r else 2] = 1.0
            f[3] = len(accs) * trip * eb
            f[4] = fp[b][0] * eb
            flat: dict = {}  # var id -> coefficient in the flattened element offset
            for (c, _, _), st in zip(accs[0].dims, b.strides):
                for v, cw in c.items():
                    flat[v] = flat.get(v, 0.0) + cw * st
            p = next((l for l in range(n - 1, -1, -1)
                      if exts[l] > 1 and flat.get(id(loops[l][0]))), None)
            if p is None:
                f[5] = 1.0
            else:
                fs = abs(flat[id(loops[p][0])])
                per_run = min(exts[p], 1.0 + (exts[p] - 1.0) * fs * eb / line)
                f[5] = trip / suffix[p] * per_run if suffix[p] else 0.0
                f[17] = fs
            f[6] = ulines[b]
            used = set().union(*(a.vars for a in accs))
            lr = next((l for l in range(n - 1, -1, -1) if exts[l] > 1 and id(loops[l][0]) not in
                       used), None)
            if lr is not None:
                f[7], f[10], f[11], f[12] = 1.0, suffix[lr + 1], level_bytes[lr + 1], exts[lr]
            elif self.store_bufs.get(b, 0) > 1:
                f[8], f[12] = 1.0, float(self.store_bufs[b])
            else:
                f[9], f[12] = 1.0, 1.0
            ct = max(f[12], 1.0)
            f[13:17] = [f[3] / ct, f[4] / ct, f[5] / ct, f[6] / ct]
            f[18] = 0.0 if b.scope is Scope.GLOBAL else 1.0
            f[19] = 1.0 if any(a.indirect for a in accs) else 0.0
            for l in body:  # along l: the store must be contiguous, the loads contiguous or fixed
                st = abs(flat.get(id(loops[l][0]), 0.0))
                if st > 1 or f[19] or (st != 1 and any(a.write for a in accs)):
                    slp_ok[l] = False
            if eff is not None:
                f[20] = abs(flat.get(id(loops[eff][0]), 0.0))
                if f[20] > 1 or f[19] or (f[20] != 1 and any(a.write for a in accs)):
                    vectorizable = False
            feats.append(f)
        feats.sort(key=lambda f: (f[5], f[3]), reverse=True)
        for k, f in enumerate(feats[:MAX_BUFS]):
            row[O_BUF + k * NBUF:O_BUF + (k + 1) * NBUF] = f
        # arithmetic-intensity curve over sub-nest sizes (levels innermost outward)
        if flops_per_iter > 0 and trip > 0:
            xs = [math.log2(max(flops_per_iter * suffix[l], 1.0)) for l in range(n, -1, -1)]
            ys = [flops_per_iter * suffix[l] / max(level_bytes[l], 1.0) for l in range(n, -1, -1)]
            top = xs[-1]
            pts = np.interp([top * k / (AI_SAMPLES - 1) for k in range(AI_SAMPLES)], xs, ys)
            row[O_AI:O_AI + AI_SAMPLES] = pts.tolist()
        slp = max((exts[l] for l, ok in slp_ok.items() if ok), default=1.0)
        return (1.0 if vectorizable else 0.0), slp


def _n_points(env) -> int:
    return max((np.size(v) for v in env.values()), default=1)


def _is_mul(e) -> bool:
    return isinstance(e, BinOp) and e.op is BinOpKind.MUL


def _scan(st) -> tuple:
    """The compute counts of one execution of a store (value and indices), and its loads."""
    counts = [0.0] * 16
    loads = []
    stack = [st.value, *st.indices]
    pop, push, slot = stack.pop, stack.extend, BIN_SLOT
    while stack:
        x = pop()
        t = type(x)
        if t is BinOp:
            k = slot[x.op, x.a.dtype.is_float]
            counts[k] += 1
            if (k == 1 or k == 8) and x.op is BinOpKind.ADD and (_is_mul(x.a) or _is_mul(x.b)):
                counts[k - 1] += 1  # a multiply-add (slots 0 and 7)
            stack.append(x.a)
            stack.append(x.b)
        elif t is Load:
            loads.append(x)
            push(x.indices)
        elif t is Const or t is Var:
            continue
        else:
            k = op_slot(x)
            if k is not None:
                counts[k] += 1
            push(x.children())
    return counts, loads


def _stores(s):
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Store):
            yield x
        else:
            stack.extend(x.children())
