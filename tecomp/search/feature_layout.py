"""The layout of a feature row: names, group offsets and the slot tables that place values.

A row holds :data:`FEATURE_LEN` floats (names in :data:`FEATURE_NAMES`):

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
179      8     guards enclosing the store, data-dependent loops enclosing it, share of the
               iterations that pass the guards (non-divisible tiles waste the rest), parallel
               imbalance (``ceil(p / cores) * cores / p - 1`` for p parallel iterations); the
               effective innermost loop: its extent, the straight-line body it contains (product
               of the unrolled extents), whether it is vectorizable (stride-1 store, all
               accesses of stride 0 or 1); the straight-line body's contiguous width (the
               largest unrolled loop inside the effective innermost one along which the store
               has stride 1 and every load stride 0 or 1: what LLVM's SLP vectorizer packs)
187      7     GPU (zero for CPU programs): threads per block and blocks (products of the
               threadIdx / blockIdx extents around the store), vthreads, shared and local bytes
               allocated in the store's kernel, whether the store writes shared memory, and for
               such a store (a cooperative fetch) its vector length (1: not vectorized)
=======  ====  ===============================================================================

The *effective innermost loop* is described in :mod:`tecomp.search.features`.
"""
from __future__ import annotations

from ..ir.expr import BinOp, BinOpKind, Cast, Select, UnOp, UnOpKind
from ..ir.loop import ForKind

__all__ = ["FEATURE_LEN", "FEATURE_NAMES", "MAX_BUFS", "AI_SAMPLES", "NBUF", "O_ANN", "O_GPU",
           "O_BUF", "O_AI", "O_ALLOC", "O_OUT", "O_EXTRA", "O_GPU2",
           "ANN_SLOT", "THREAD_SLOT", "BIN_SLOT",
           "op_slot"]

#: buffers described per row (the ones touching the most cache lines)
MAX_BUFS = 5
#: samples of the arithmetic-intensity curve
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
       "eff_unrolled_body", "eff_vectorizable", "eff_slp_width"]
    + ["gpu_threads", "gpu_blocks", "gpu_vthreads", "gpu_shared_bytes", "gpu_local_bytes",
       "gpu_store_shared", "gpu_coop_vec"])
#: Floats per store row (see the module docstring for the layout).
FEATURE_LEN = len(FEATURE_NAMES)
#: floats per buffer
NBUF = len(_BUF)
# group offsets: annotations, GPU, buffers, intensity curve, allocation, outer scope, the rest
O_ANN, O_GPU, O_BUF = 16, 49, 57
O_AI = O_BUF + MAX_BUFS * NBUF
O_ALLOC, O_OUT, O_EXTRA = O_AI + AI_SAMPLES, O_AI + AI_SAMPLES + 4, O_AI + AI_SAMPLES + 7
#: GPU kernel figures, appended (CPU rows hold zeros there)
O_GPU2 = O_EXTRA + 8
assert FEATURE_LEN == O_GPU2 + 7 == 194

#: loop kind -> its block of 11 in the annotation group
ANN_SLOT = {ForKind.VECTORIZED: 0, ForKind.UNROLLED: 1, ForKind.PARALLEL: 2}
#: thread binding -> its slot in the GPU group
THREAD_SLOT = {"blockIdx.x": 1, "blockIdx.y": 2, "blockIdx.z": 3, "threadIdx.x": 4,
               "threadIdx.y": 5, "threadIdx.z": 6, "vthread": 7}

_B = BinOpKind
_KIND = {_B.ADD: 0, _B.SUB: 0, _B.MUL: 1, _B.DIV: 2, _B.FLOORDIV: 2, _B.MOD: 2, _B.LT: 3,
         _B.LE: 3, _B.GT: 3, _B.GE: 3, _B.EQ: 3, _B.NE: 3, _B.MIN: 4, _B.MAX: 4}
#: (operator, operands are float) -> slot of the 16 compute counts (logical ops: 13)
BIN_SLOT = {(op, f): ((1, 2, 3, 4, 6) if f else (8, 9, 10, 11, 12))[k]
            for op, k in _KIND.items() for f in (True, False)}
BIN_SLOT.update({(op, f): 13 for op in (_B.AND, _B.OR) for f in (True, False)})


def op_slot(e) -> int | None:
    """Index into the 16 compute counts of one expression node (None: not an operation)."""
    if isinstance(e, BinOp):
        return BIN_SLOT[e.op, e.a.dtype.is_float]
    if isinstance(e, UnOp):
        return 13 if e.op is UnOpKind.NOT else 5 if e.op.is_math else \
            6 if e.dtype.is_float else 12
    if isinstance(e, Select):
        return 14
    return 15 if isinstance(e, Cast) else None
