"""Standard workloads for the CLI, tuning, benchmarks and tests.

Every builder returns a :class:`Workload`, which unpacks as ``(dag, make_inputs, reference)``:

- ``dag``: the ComputeDAG (inputs first, output last);
- ``make_inputs(rng)``: a list of input arrays, one per ``dag.inputs``, for a
  ``numpy.random.Generator``;
- ``reference(inputs)``: the list of expected outputs (numpy/scipy).

Sparse workloads fix their sparsity pattern when built (the DAG's nnz is static): ``make_inputs``
draws fresh values but always the same ``indptr``/``indices``, available as
``workload.index_data`` (``{"indptr": ..., "indices": ...}``, e.g. for ``SearchTask(inputs=...)``).
"""
from __future__ import annotations

import numpy as np

from .. import ir, ops
from . import reference as ref

__all__ = ["Workload", "random_csr", "random_bsr", "random_pattern_like", "matmul", "batch_matmul",
           "conv2d", "conv2d_flat", "csr_spmm",
           "bsr_spmm", "sddmm", "softmax", "matmul_bias_relu", "WORKLOADS", "get_workload",
           "parse_value", "workload_from_spec"]


class Workload(tuple):
    """``(dag, make_inputs, reference)`` with attributes ``dag``, ``make_inputs``, ``reference``,
    ``name``, ``params`` (the builder's arguments) and ``index_data`` (sparse index arrays by
    input name)."""

    def __new__(cls, dag, make_inputs, reference, name="", params=None, index_data=None):
        self = super().__new__(cls, (dag, make_inputs, reference))
        self.name = name
        self.params = dict(params or {})
        self.index_data = dict(index_data or {})
        return self

    @property
    def dag(self):
        return self[0]

    @property
    def make_inputs(self):
        return self[1]

    @property
    def reference(self):
        return self[2]

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"Workload({self.name}({args}))"


def _rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(-4, 5, size=shape).astype(dtype)


def _nonzero_values(rng, n, dtype):
    """Values bounded away from zero: uniform in +-[0.5, 1.5] (ints: +-1..3)."""
    dtype = np.dtype(dtype)
    sign = np.where(rng.random(n) < 0.5, -1, 1)
    if np.issubdtype(dtype, np.floating):
        return (sign * rng.uniform(0.5, 1.5, n)).astype(dtype)
    return (sign * rng.integers(1, 4, n)).astype(dtype)


def _rows_setup(rng, M, empty_rows, dense_row):
    if isinstance(empty_rows, bool):
        n_empty = max(1, M // 4) if (empty_rows and M) else 0
    else:
        n_empty = int(empty_rows)
    n_empty = min(n_empty, M)
    perm = rng.permutation(M)
    empty = set(perm[:n_empty].tolist())
    dense = None
    if dense_row and M > n_empty:
        dense = int(perm[n_empty])
    return empty, dense


def random_csr(rng, M: int, K: int, density: float, empty_rows=0, dense_row: bool = False,
               dtype="float32"):
    """A random CSR matrix ``(data, indices, indptr)``.

    Parameters
    ----------
    rng : numpy.random.Generator
    M, K : int
        Rows and columns.
    density : float
        Expected fraction of nonzeros per row (each row draws ``Binomial(K, density)`` distinct,
        sorted columns).
    empty_rows : int or bool
        Rows forced empty: a count, or True for ``max(1, M // 4)``.
    dense_row : bool
        Make one (non-empty-forced) row fully dense.
    dtype : str
        Dtype of ``data``; values are never zero (``+-uniform(0.5, 1.5)``).

    Returns
    -------
    data : ndarray (nnz,) of dtype
    indices : ndarray (nnz,) int32
    indptr : ndarray (M + 1,) int32
    """
    empty, dense = _rows_setup(rng, M, empty_rows, dense_row)
    counts = rng.binomial(K, min(max(density, 0.0), 1.0), size=M) if K else np.zeros(M, np.int64)
    cols = []
    for i in range(M):
        if i in empty:
            n = 0
        elif i == dense:
            n = K
        else:
            n = int(counts[i])
        cols.append(np.sort(rng.choice(K, n, replace=False)) if n else np.zeros(0, np.int64))
    lengths = np.array([len(c) for c in cols], dtype=np.int64)
    indptr = np.zeros(M + 1, dtype=np.int32)
    indptr[1:] = np.cumsum(lengths)
    indices = (np.concatenate(cols) if cols else np.zeros(0)).astype(np.int32)
    data = _nonzero_values(rng, len(indices), dtype)
    return data, indices, indptr


def random_bsr(rng, Mb: int, Kb: int, bs_r: int, bs_c: int, density: float, empty_rows=0,
               dense_row: bool = False, dtype="float32"):
    """A random BSR matrix ``(data (nnzb, bs_r, bs_c), indices (nnzb,), indptr (Mb + 1,))`` with a
    block pattern from :func:`random_csr` (``density`` is the fraction of nonzero blocks)."""
    _, indices, indptr = random_csr(rng, Mb, Kb, density, empty_rows, dense_row, dtype)
    data = _nonzero_values(rng, len(indices) * bs_r * bs_c, dtype).reshape(-1, bs_r, bs_c)
    return data, indices, indptr


def random_pattern_like(rng, indptr, ncols: int, dense_row: bool = False):
    """Other index data of the same shapes: ``(indices, indptr)`` with the rows of ``indptr``, the
    same nnz and columns in ``[0, ncols)``, drawn uniformly over the matrix (so row lengths differ
    from the original's); with ``dense_row``, one row is full when nnz allows. For running a tuned
    sparse kernel on data it was not tuned on."""
    M = len(indptr) - 1
    nnz = int(indptr[-1])
    if nnz > M * ncols:
        raise ValueError(f"random_pattern_like: nnz={nnz} does not fit {M} x {ncols}")
    full = int(rng.integers(M)) if dense_row and M and ncols <= nnz else None
    rest = nnz - (ncols if full is not None else 0)
    free = np.arange(M * ncols)
    if full is not None:
        free = free[free // ncols != full]
        rest = min(rest, len(free))
    pos = rng.choice(free, rest, replace=False)
    if full is not None:
        pos = np.concatenate([pos, full * ncols + np.arange(ncols)])
    pos = np.sort(pos)
    counts = np.bincount(pos // ncols, minlength=M) if M else np.zeros(0, np.int64)
    new_ptr = np.zeros(M + 1, np.int32)
    new_ptr[1:] = np.cumsum(counts)
    return (pos % ncols).astype(np.int32), new_ptr


# ----------------------------------------------------------------------------- dense builders

def matmul(M: int, N: int, K: int, dtype="float32", transpose_a=False, transpose_b=False):
    """``C = A @ B`` with A (M, K) and B (K, N) (stored transposed when the flags say so)."""
    A = ir.placeholder((K, M) if transpose_a else (M, K), dtype, name="A")
    B = ir.placeholder((N, K) if transpose_b else (K, N), dtype, name="B")
    C = ops.matmul(A, B, transpose_a, transpose_b)
    dag = ir.ComputeDAG([A, B, C])

    def make_inputs(rng):
        return [_rand(rng, A.shape, dtype), _rand(rng, B.shape, dtype)]

    def reference(inputs):
        return [ref.ref_matmul(*inputs, transpose_a=transpose_a, transpose_b=transpose_b)]

    return Workload(dag, make_inputs, reference, "matmul",
                    dict(M=M, N=N, K=K, dtype=dtype, transpose_a=transpose_a,
                         transpose_b=transpose_b))


def batch_matmul(B: int, M: int, N: int, K: int, dtype="float32", transpose_a=False,
                 transpose_b=False):
    """``C[b] = A[b] @ B[b]`` with A (B, M, K) and B (B, K, N)."""
    X = ir.placeholder((B, K, M) if transpose_a else (B, M, K), dtype, name="A")
    Y = ir.placeholder((B, N, K) if transpose_b else (B, K, N), dtype, name="B")
    C = ops.batch_matmul(X, Y, transpose_a, transpose_b)
    dag = ir.ComputeDAG([X, Y, C])

    def make_inputs(rng):
        return [_rand(rng, X.shape, dtype), _rand(rng, Y.shape, dtype)]

    def reference(inputs):
        return [ref.ref_batch_matmul(*inputs, transpose_a=transpose_a, transpose_b=transpose_b)]

    return Workload(dag, make_inputs, reference, "batch_matmul",
                    dict(B=B, M=M, N=N, K=K, dtype=dtype, transpose_a=transpose_a,
                         transpose_b=transpose_b))


def conv2d(N: int, C: int, H: int, W: int, O: int, KH: int, KW: int, stride=1, padding=0,
           dilation=1, groups: int = 1, layout: str = "NCHW", method: str = "direct",
           dtype="float32"):
    """A convolution: data (N, C, H, W) / (N, H, W, C), weight OIHW / HWIO."""
    if layout == "NCHW":
        dshape, wshape = (N, C, H, W), (O, C // groups, KH, KW)
    else:
        dshape, wshape = (N, H, W, C), (KH, KW, C // groups, O)
    data = ir.placeholder(dshape, dtype, name="data")
    weight = ir.placeholder(wshape, dtype, name="weight")
    out = ops.conv2d(data, weight, stride, padding, dilation, groups, layout, method)
    dag = ir.ComputeDAG([data, weight, out])

    def make_inputs(rng):
        return [_rand(rng, dshape, dtype), _rand(rng, wshape, dtype)]

    def reference(inputs):
        return [ref.ref_conv2d(*inputs, stride=stride, padding=padding, dilation=dilation,
                               groups=groups, layout=layout)]

    return Workload(dag, make_inputs, reference, f"conv2d_{layout.lower()}",
                    dict(N=N, C=C, H=H, W=W, O=O, KH=KH, KW=KW, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, layout=layout, method=method,
                         dtype=dtype))


def conv2d_flat(N: int, C: int, H: int, W: int, O: int, stride=1, groups: int = 1,
                layout: str = "NCHW", dtype="float32"):
    """A 1x1, unpadded convolution in its FLAT form (``networks.FLAT``): output ``(N, O, 1,
    OH*OW)`` / ``(N, 1, OH*OW, O)``, the plain output's bytes. Stride 1: :func:`conv2d` of the image
    viewed as one row, ``(N, C, 1, H*W)``; strided: of the plain image, whose strided pixels a
    first stage copies into one row (:func:`tecomp.ops.flat_subsample`)."""
    sh, sw = (stride, stride) if isinstance(stride, int) else tuple(stride)  # (checked in ops)
    if (sh, sw) == (1, 1):
        return conv2d(N, C, 1, H * W, O, 1, 1, 1, 0, 1, groups, layout, "direct", dtype)
    if layout == "NCHW":
        dshape, wshape = (N, C, H, W), (O, C // groups, 1, 1)
    else:
        dshape, wshape = (N, H, W, C), (1, 1, C // groups, O)
    data = ir.placeholder(dshape, dtype, name="data")
    weight = ir.placeholder(wshape, dtype, name="weight")
    row = ops.flat_subsample(data, (sh, sw), layout, name="conv2d_subsample")
    out = ops.conv2d(row, weight, 1, 0, 1, groups, layout, "direct")
    dag = ir.ComputeDAG([data, weight, out])
    flat_shape = tuple(out.shape)

    def make_inputs(rng):
        return [_rand(rng, dshape, dtype), _rand(rng, wshape, dtype)]

    def reference(inputs):
        return [ref.ref_conv2d(*inputs, stride=(sh, sw), groups=groups,
                               layout=layout).reshape(flat_shape)]

    return Workload(dag, make_inputs, reference, f"conv2d_flat_{layout.lower()}",
                    dict(N=N, C=C, H=H, W=W, O=O, KH=1, KW=1, stride=(sh, sw), padding=0,
                         dilation=1, groups=groups, layout=layout, method="flat", dtype=dtype))


# ----------------------------------------------------------------------------- sparse builders

def csr_spmm(M: int, K: int, N: int, density: float = 0.1, empty_rows=0, dense_row=False,
             dtype="float32", seed: int = 0):
    """``(M x K CSR) @ (K x N dense)``; inputs ``[data, indices, indptr, dense]``. The sparsity
    pattern is drawn once from ``seed``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, M, K, density, empty_rows, dense_row, dtype)
    nnz = len(indices_np)
    data = ir.placeholder((nnz,), dtype, name="data")
    indices = ir.placeholder((nnz,), "int32", name="indices")
    indptr = ir.placeholder((M + 1,), "int32", name="indptr")
    dense = ir.placeholder((K, N), dtype, name="dense")
    out = ops.csr_spmm(data, indices, indptr, dense)
    dag = ir.ComputeDAG([data, indices, indptr, dense, out])

    def make_inputs(rng):
        return [_nonzero_values(rng, nnz, dtype), indices_np.copy(), indptr_np.copy(),
                _rand(rng, (K, N), dtype)]

    def reference(inputs):
        return [ref.ref_csr_spmm(*inputs)]

    return Workload(dag, make_inputs, reference, "csr_spmm",
                    dict(M=M, K=K, N=N, density=density, empty_rows=empty_rows,
                         dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))


def bsr_spmm(Mb: int, Kb: int, N: int, bs_r: int, bs_c: int, density: float = 0.2, empty_rows=0,
             dense_row=False, dtype="float32", seed: int = 0):
    """``(Mb*bs_r x Kb*bs_c BSR) @ (Kb*bs_c x N dense)``; inputs ``[data, indices, indptr, dense]``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, Mb, Kb, density, empty_rows, dense_row, dtype)
    nnzb = len(indices_np)
    data = ir.placeholder((nnzb, bs_r, bs_c), dtype, name="data")
    indices = ir.placeholder((nnzb,), "int32", name="indices")
    indptr = ir.placeholder((Mb + 1,), "int32", name="indptr")
    dense = ir.placeholder((Kb * bs_c, N), dtype, name="dense")
    out = ops.bsr_spmm(data, indices, indptr, dense)
    dag = ir.ComputeDAG([data, indices, indptr, dense, out])

    def make_inputs(rng):
        vals = _nonzero_values(rng, nnzb * bs_r * bs_c, dtype).reshape(nnzb, bs_r, bs_c)
        return [vals, indices_np.copy(), indptr_np.copy(), _rand(rng, (Kb * bs_c, N), dtype)]

    def reference(inputs):
        return [ref.ref_bsr_spmm(*inputs)]

    return Workload(dag, make_inputs, reference, "bsr_spmm",
                    dict(Mb=Mb, Kb=Kb, N=N, bs_r=bs_r, bs_c=bs_c, density=density,
                         empty_rows=empty_rows, dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))


def sddmm(M: int, N: int, K: int, density: float = 0.1, empty_rows=0, dense_row=False,
          dtype="float32", seed: int = 0):
    """Values of ``a @ b.T`` (a: (M, K), b: (N, K)) at a random M x N CSR pattern; inputs
    ``[a, b, indices, indptr]``."""
    pat_rng = np.random.default_rng(seed)
    _, indices_np, indptr_np = random_csr(pat_rng, M, N, density, empty_rows, dense_row, dtype)
    nnz = len(indices_np)
    a = ir.placeholder((M, K), dtype, name="a")
    b = ir.placeholder((N, K), dtype, name="b")
    indices = ir.placeholder((nnz,), "int32", name="indices")
    indptr = ir.placeholder((M + 1,), "int32", name="indptr")
    out = ops.sddmm(a, b, indices, indptr)
    dag = ir.ComputeDAG([a, b, indices, indptr, out])

    def make_inputs(rng):
        return [_rand(rng, (M, K), dtype), _rand(rng, (N, K), dtype), indices_np.copy(),
                indptr_np.copy()]

    def reference(inputs):
        return [ref.ref_sddmm(*inputs)]

    return Workload(dag, make_inputs, reference, "sddmm",
                    dict(M=M, N=N, K=K, density=density, empty_rows=empty_rows,
                         dense_row=dense_row, dtype=dtype, seed=seed),
                    dict(indptr=indptr_np, indices=indices_np))


# ----------------------------------------------------------------------------- nn builders

def softmax(M: int, N: int, axis: int = -1, dtype="float32"):
    """Row softmax of an (M, N) matrix (four stages)."""
    x = ir.placeholder((M, N), dtype, name="x")
    out = ops.softmax(x, axis=axis)
    dag = ir.ComputeDAG([x, out])

    def make_inputs(rng):
        return [_rand(rng, (M, N), dtype)]

    def reference(inputs):
        return [ref.ref_softmax(inputs[0], axis=axis)]

    return Workload(dag, make_inputs, reference, "softmax", dict(M=M, N=N, axis=axis, dtype=dtype))


def matmul_bias_relu(M: int, N: int, K: int, dtype="float32"):
    """``relu(A @ B + bias)``: matmul followed by two elementwise stages (fusion)."""
    A = ir.placeholder((M, K), dtype, name="A")
    B = ir.placeholder((K, N), dtype, name="B")
    bias = ir.placeholder((N,), dtype, name="bias")
    out = ops.relu(ops.bias_add(ops.matmul(A, B), bias, axis=1))
    dag = ir.ComputeDAG([A, B, bias, out])

    def make_inputs(rng):
        return [_rand(rng, (M, K), dtype), _rand(rng, (K, N), dtype), _rand(rng, (N,), dtype)]

    def reference(inputs):
        a, b, c = inputs
        return [ref.ref_relu(ref.ref_bias_add(ref.ref_matmul(a, b), c, axis=1))]

    return Workload(dag, make_inputs, reference, "matmul_bias_relu",
                    dict(M=M, N=N, K=K, dtype=dtype))


def _conv_nchw(**kw):
    kw.setdefault("layout", "NCHW")
    return conv2d(**kw)


def _conv_nhwc(**kw):
    kw.setdefault("layout", "NHWC")
    return conv2d(**kw)


#: Builders by the CLI's workload names (keyword arguments as the builders take them).
WORKLOADS = {
    "matmul": matmul,
    "batch_matmul": batch_matmul,
    "conv2d": conv2d,
    "conv2d_nchw": _conv_nchw,
    "conv2d_nhwc": _conv_nhwc,
    "csr_spmm": csr_spmm,
    "bsr_spmm": bsr_spmm,
    "sddmm": sddmm,
    "softmax": softmax,
    "matmul_bias_relu": matmul_bias_relu,
}


def get_workload(name: str, **params) -> Workload:
    """Build the workload ``name`` (a key of :data:`WORKLOADS`) with keyword ``params``."""
    try:
        builder = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None
    return builder(**params)


def parse_value(v: str):
    """A workload parameter given as text: int, float, true/false, a comma-separated tuple of
    those, or the text itself."""
    if "," in v:
        return tuple(parse_value(x) for x in v.split(",") if x.strip())
    v = v.strip()
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def workload_from_spec(name: str, shape=(), params=None) -> Workload:
    """Build the workload ``name`` from positional ``shape`` values (in the builder's parameter
    order, ``dtype``/``layout``/``method`` excepted) and keyword ``params``; raises ``ValueError``
    naming the problem."""
    import inspect
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    builder = WORKLOADS[name]
    if builder in (_conv_nchw, _conv_nhwc):  # layout wrappers take conv2d's arguments
        builder = conv2d
    kw = dict(params or {})
    if shape:
        names = [p for p in inspect.signature(builder).parameters
                 if p not in ("dtype", "layout", "method")]
        if len(shape) > len(names):
            raise ValueError(f"{name} takes at most {len(names)} shape values ({' '.join(names)})")
        kw.update(zip(names, shape))
    try:
        return get_workload(name, **kw)
    except TypeError as e:
        raise ValueError(f"{name}: {e}") from None

