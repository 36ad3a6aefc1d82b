"""Program features for the learned cost model: one fixed-length vector per innermost store.

A candidate is lowered (:func:`tecomp.schedule.lower.lower_state`) and every ``Store`` of the loop
IR gets a row of :data:`FEATURE_LEN` floats, in the spirit of Ansor's 164 (``shared/reference/
ansor.md`` section 4). Every value is ``log2(1 + x)`` of a non-negative quantity (one-hot slots stay
0/1), never NaN or inf. The layout (names in :data:`FEATURE_NAMES`):

=======  ====  ===============================================================================
offset   len   group
=======  ====  ===============================================================================
0        16    compute counts x trip count: float mad, add/sub, mul, div/mod, compare, math,
               other (min/max/neg/abs); int mad, add/sub, mul, div/mod, compare, other; bool ops,
               selects, casts (guard conditions count at their own loop level)
16       33    vectorize, unroll, parallel (11 each): number of such loops, product of their
               lengths, innermost one's length, 8-way position one-hot (inner/middle/outer
               spatial, inner/middle/outer reduce, mixed, none; a loop is "reduce" for a store
               when its variable is not in the stored index)
49       8     GPU: is_gpu, blockIdx.x/y/z, threadIdx.x/y/z and vthread extents
57       105   5 buffers x 21, sorted by (lines, bytes) descending, zero-padded: access type
               one-hot (read, write, read-write), bytes, unique bytes, cache lines, unique lines,
               reuse type one-hot (loop reuse, serial multi read-write, none), reuse distance in
               iterations and in bytes, reuse count, the four sizes divided by the reuse count,
               stride of the innermost loop that moves the access, is-not-global, is-indirect,
               stride of the effective innermost loop (see below; 0: invariant, 1: contiguous)
162      10    arithmetic intensity (flops / bytes touched by the sub-nest) sampled at sub-nest
               sizes 2^(k/9 * log2 total flops), k = 0..9, interpolated between loop levels
172      4     allocation of the stored buffer: bytes, bytes x loops outside the allocation,
               loops outside, loops between allocation and store
176      3     outer scope: trip count (product of enclosing extents times the share of iterations
               that pass the enclosing guards: the count everything above is weighted by), loops,
               auto_unroll_max_step in effect
179      7     guards enclosing the store, data-dependent loops enclosing it, share of the
               iterations that pass the guards (non-divisible tiles waste the rest), parallel
               imbalance (``ceil(p / cores) * cores / p - 1`` for p parallel iterations); the
               effective innermost loop: its extent, the straight-line body it contains (product
               of the unrolled extents), whether it is vectorizable (stride-1 store, all
               accesses of stride 0 or 1)
=======  ====  ===============================================================================

Touched regions come from an affine reading of each index (``x // c`` divides the coefficients,
``x % c`` caps the span) and the enclosing loop extents; an index loaded from an integer buffer
(sparse ``indices``/``indptr``) moves by that array's mean absolute step. Data-dependent loop
extents (sparse rows) are averaged with numpy over a sample of the outer iterations, using the
task's real index data (``task.inputs``) or, without it, the uniform pattern implied by the nnz
(as ``ComputeDAG.flop_count`` assumes). Where Ansor samples the intensity curve at evenly spaced
fractions of the flops (nine of ten samples then fall between the two outermost loops), we sample
in log space so that the inner levels, where registers and caches live, are seen.

The *effective innermost loop* models what LLVM does with loops we leave to it: unrolled loops and
small constant serial loops (extent x body under LLVM's full-unroll threshold) become straight-line
code, and the loop around them is the one the loop vectorizer may vectorize. On random matmul
schedules, unannotated programs that are fast (innermost ``k`` of 16, fully unrolled, then ``j``
vectorized by LLVM) were what the Ansor-style features misranked most.
"""
from __future__ import annotations

import math
import os
import weakref
from collections import OrderedDict

import numpy as np

from ..ir.evaluate import eval_np
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Load, Select, UnOp, UnOpKind, Var, unary,
                       walk)
from ..ir.loop import Allocate, For, ForKind, IfThenElse, Scope, Seq, Store
from ..schedule.lower import lower_state

__all__ = ["FEATURE_LEN", "FEATURE_NAMES", "FeatureExtractor", "extract", "extract_one"]

MAX_BUFS = 5
AI_SAMPLES = 10
_COUNTS = ["f_mad", "f_addsub", "f_mul", "f_divmod", "f_cmp", "f_math", "f_other", "i_mad",
           "i_addsub", "i_mul", "i_divmod", "i_cmp", "i_other", "bool_op", "select", "cast"]
_POS = ["inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce", "middle_reduce",
        "outer_reduce", "mixed", "none"]
_BUF = ["read", "write", "rw", "bytes", "unique_bytes", "lines", "unique_lines", "reuse_loop",
        "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
        "bytes_d_reuse", "unique_bytes_d_reuse", "lines_d_reuse", "unique_lines_d_reuse", "stride",
        "not_global", "indirect", "eff_stride"]
FEATURE_NAMES = tuple(
    _COUNTS
    + [f"{k}_{x}" for k in ("vec", "unroll", "par") for x in ["num", "prod", "len"] + _POS]
    + ["is_gpu", "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
       "threadIdx.z", "vthread"]
    + [f"B{b}_{x}" for b in range(MAX_BUFS) for x in _BUF]
    + [f"ai_{k}" for k in range(AI_SAMPLES)]
    + ["alloc_bytes", "alloc_bytes_x_outer", "alloc_outer", "alloc_inner"]
    + ["outer_prod", "num_loops", "auto_unroll"]
    + ["num_guards", "num_data_loops", "guard_pass", "par_imbalance", "eff_inner_len",
       "eff_unrolled_body", "eff_vectorizable"])
#: Floats per store row (see the module docstring for the layout).
FEATURE_LEN = len(FEATURE_NAMES)
_NBUF = len(_BUF)
_O_ANN, _O_GPU, _O_BUF = 16, 49, 57
_O_AI = _O_BUF + MAX_BUFS * _NBUF
_O_ALLOC, _O_OUT, _O_EXTRA = _O_AI + AI_SAMPLES, _O_AI + AI_SAMPLES + 4, _O_AI + AI_SAMPLES + 7
assert FEATURE_LEN == _O_EXTRA + 7 == 186
_FULL_UNROLL = 300  # LLVM's default full-unroll threshold, in instructions
_ANN = {ForKind.VECTORIZED: 0, ForKind.UNROLLED: 1, ForKind.PARALLEL: 2}
_THREAD = {"blockIdx.x": 1, "blockIdx.y": 2, "blockIdx.z": 3, "threadIdx.x": 4, "threadIdx.y": 5,
           "threadIdx.z": 6, "vthread": 7}
_SAMPLE_POINTS = 512
_INF = math.inf
_AFFINE_OPS = (BinOpKind.ADD, BinOpKind.SUB)


_B = BinOpKind
_KIND = {_B.ADD: 0, _B.SUB: 0, _B.MUL: 1, _B.DIV: 2, _B.FLOORDIV: 2, _B.MOD: 2, _B.LT: 3,
         _B.LE: 3, _B.GT: 3, _B.GE: 3, _B.EQ: 3, _B.NE: 3, _B.MIN: 4, _B.MAX: 4}
#: (operator, operands are float) -> slot of the 16 compute counts (logical ops: 13)
_BIN_SLOT = {(op, f): ((1, 2, 3, 4, 6) if f else (8, 9, 10, 11, 12))[k]
             for op, k in _KIND.items() for f in (True, False)}
_BIN_SLOT.update({(op, f): 13 for op in (_B.AND, _B.OR) for f in (True, False)})


def _op_slot(e) -> int | None:
    """Index into the 16 compute counts of one expression node (None: not an operation)."""
    if isinstance(e, BinOp):
        return _BIN_SLOT[e.op, e.a.dtype.is_float]
    if isinstance(e, UnOp):
        return 13 if e.op is UnOpKind.NOT else 5 if e.op.is_math else \
            6 if e.dtype.is_float else 12
    if isinstance(e, Select):
        return 14
    return 15 if isinstance(e, Cast) else None


class _TaskInfo:
    """What extraction needs of a task: index data by buffer name and cache-line size."""

    def __init__(self, task, dag):
        hw = getattr(task, "hardware", None)
        self.line = float(getattr(hw, "cache_line_bytes", 64) or 64)
        self.cores = int(getattr(hw, "num_cores", 0) or os.cpu_count() or 1)
        data: dict = {}
        try:  # the uniform stand-in for pointer arrays, overridden by the task's real data
            for t, a in dag._index_data(getattr(task, "inputs", None) or None).items():
                data[t.name] = np.asarray(a)
        except Exception:  # noqa: BLE001 - features must not fail for lack of index data
            pass
        for k, v in (getattr(task, "inputs", None) or {}).items():
            data[k] = np.asarray(v)
        self.data = data
        self.slope: dict = {}  # name -> (mean |step|, value span) of an integer array
        for k, a in data.items():
            if a.dtype.kind in "iu" and a.size:
                step = float(np.abs(np.diff(a.astype(np.int64))).mean()) if a.size > 1 else 0.0
                self.slope[k] = (step, float(a.max()) - float(a.min()) + 1.0)


class _Access:
    __slots__ = ("buf", "dims", "vars", "indirect", "write")

    def __init__(self, buf, dims, write):
        self.buf, self.dims, self.write = buf, dims, write
        self.vars = set()
        self.indirect = False
        for coefs, _cap, ind in dims:
            self.vars.update(coefs)
            self.indirect |= ind


class _Func:
    """Feature extraction of one lowered function."""

    def __init__(self, info: _TaskInfo, func):
        self.info, self.func = info, func
        self.memo: dict = {}  # id(index expression) -> affine reading
        self.var_ext: dict = {}  # id(loop variable) -> extent (its range caps spans)
        self.data = {b: info.data[b.name] for b in func.params if b.name in info.data}
        self.store_bufs: dict = {}  # buffer -> number of stores that access it
        self.scanned: dict = {}  # id(store) -> (compute counts per iteration, loads)
        self.rows: list = []
        self.rng = np.random.default_rng(0)

    # ------------------------------------------------------------------ traversal
    def run(self) -> np.ndarray:
        for st in _stores(self.func.body):
            counts, loads = self.scanned[id(st)] = _scan(st)
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
            env = {}
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
                k = _op_slot(x)
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
                row[_O_GPU] = 1.0
                row[_O_GPU + _THREAD[f.thread.value]] = ext
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
        vectorizable = self.buffers(row, accesses, loops, exts, suffix, trip, flops_per_iter, eff)
        # allocation of the stored buffer
        if st.buffer in allocs:
            d = allocs[st.buffer]
            nbytes = st.buffer.alloc_size * st.buffer.dtype.itemsize
            outer = trip / suffix[d] if suffix[d] else 0.0
            row[_O_ALLOC:_O_ALLOC + 4] = [nbytes, nbytes * outer, outer, suffix[d]]
        row[_O_OUT:_O_OUT + 3] = [trip, n, unroll]
        par = math.prod(x[1] for x in loops if x[2].kind is ForKind.PARALLEL)
        cores = self.info.cores
        imbalance = math.ceil(par / cores) * cores / par - 1.0 if par >= 1 else cores - 1.0
        row[_O_EXTRA:_O_EXTRA + 7] = [len(guards), sum(1 for x in loops if x[3]), frac, imbalance,
                                      exts[eff] if eff is not None else 0.0, body, vectorizable]
        self.rows.append(row)

    def annotations(self, row, loops, stored_vars):
        n = len(loops)
        for kind, a in _ANN.items():
            pos = [k for k in range(n) if loops[k][2].kind is kind]
            if not pos:
                row[_O_ANN + 11 * a + 3 + 7] = 1.0  # position: none
                continue
            o = _O_ANN + 11 * a
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
        ``eff`` is vectorizable (stored with stride 1, every access of stride 0 or 1)."""
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
        for b, accs in by_buf.items():
            eb = b.dtype.itemsize
            f = [0.0] * _NBUF
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
            if eff is not None:
                f[20] = abs(flat.get(id(loops[eff][0]), 0.0))
                if f[20] > 1 or f[19] or (f[20] != 1 and any(a.write for a in accs)):
                    vectorizable = False
            feats.append(f)
        feats.sort(key=lambda f: (f[5], f[3]), reverse=True)
        for k, f in enumerate(feats[:MAX_BUFS]):
            row[_O_BUF + k * _NBUF:_O_BUF + (k + 1) * _NBUF] = f
        # arithmetic-intensity curve over sub-nest sizes (levels innermost outward)
        if flops_per_iter > 0 and trip > 0:
            xs = [math.log2(max(flops_per_iter * suffix[l], 1.0)) for l in range(n, -1, -1)]
            ys = [flops_per_iter * suffix[l] / max(level_bytes[l], 1.0) for l in range(n, -1, -1)]
            top = xs[-1]
            pts = np.interp([top * k / (AI_SAMPLES - 1) for k in range(AI_SAMPLES)], xs, ys)
            row[_O_AI:_O_AI + AI_SAMPLES] = pts.tolist()
        return 1.0 if vectorizable else 0.0


def _n_points(env) -> int:
    return max((np.size(v) for v in env.values()), default=1)


def _is_mul(e) -> bool:
    return isinstance(e, BinOp) and e.op is BinOpKind.MUL


def _scan(st) -> tuple:
    """The compute counts of one execution of a store (value and indices), and its loads."""
    counts = [0.0] * 16
    loads = []
    stack = [st.value, *st.indices]
    pop, push, slot = stack.pop, stack.extend, _BIN_SLOT
    while stack:
        x = pop()
        t = type(x)
        if t is BinOp:
            k = slot[x.op, x.a.dtype.is_float]
            counts[k] += 1
            if (k == 1 or k == 8) and x.op is _B.ADD and (_is_mul(x.a) or _is_mul(x.b)):
                counts[k - 1] += 1  # a multiply-add (slots 0 and 7)
            stack.append(x.a)
            stack.append(x.b)
        elif t is Load:
            loads.append(x)
            push(x.indices)
        elif t is Const or t is Var:
            continue
        else:
            k = _op_slot(x)
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


class FeatureExtractor:
    """Features of candidates of one task, cached by candidate key.

    Parameters
    ----------
    task : SearchTask or None
        Gives the index data of sparse tasks (``task.inputs``) and the cache-line size; without
        it, the candidate's DAG and a uniform sparsity assumption are used.
    cache_size : int
        Feature arrays kept (least recently used ones are dropped).
    """

    def __init__(self, task=None, cache_size: int = 100_000):
        self.task = task
        self.cache: OrderedDict = OrderedDict()
        self.cache_size = cache_size
        self._infos: dict = {}

    def _info(self, dag) -> _TaskInfo:
        info = self._infos.get(id(dag))
        if info is None or info[0] is not dag:
            use_task = self.task if self.task is not None and self.task.dag is dag else None
            info = self._infos[id(dag)] = (dag, _TaskInfo(use_task, dag))
        return info[1]

    def extract_one(self, candidate) -> np.ndarray:
        """The ``(n_stores, FEATURE_LEN)`` float32 features of one candidate (an all-zero row when
        the candidate cannot be lowered)."""
        key = candidate.key
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
            return hit
        state = candidate.state
        try:
            func = lower_state(state)
            out = _Func(self._info(state.dag), func).run()
        except Exception:  # noqa: BLE001 - an unlowerable candidate gets an all-zero row
            out = np.zeros((1, FEATURE_LEN), dtype=np.float32)
        self.cache[key] = out
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
        return out

    def extract(self, candidates) -> list:
        """One ``(n_stores, FEATURE_LEN)`` float32 array per candidate."""
        return [self.extract_one(c) for c in candidates]


_EXTRACTORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _extractor(task) -> FeatureExtractor:
    if task is None:
        return _NO_TASK
    fx = _EXTRACTORS.get(task)
    if fx is None:
        fx = _EXTRACTORS[task] = FeatureExtractor(task)
    return fx


_NO_TASK = FeatureExtractor(None, cache_size=10_000)


def extract(task, candidates) -> list:
    """Features of ``candidates`` (objects with ``.state`` and ``.key``) of ``task``.

    Parameters
    ----------
    task : SearchTask or None
    candidates : list of Candidate

    Returns
    -------
    list of ndarray
        One ``(n_stores, FEATURE_LEN)`` float32 array per candidate, cached per task by key.
    """
    return _extractor(task).extract(candidates)


def extract_one(task, candidate) -> np.ndarray:
    """Features of one candidate (see :func:`extract`)."""
    return _extractor(task).extract_one(candidate)
