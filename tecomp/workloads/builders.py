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

from .. import ir, ops
from . import reference as ref
from .sparse_builders import bsr_spmm, csr_spmm, random_bsr, random_csr, random_pattern_like, sddmm
from .workload import Workload, random_values

__all__ = ["Workload", "random_csr", "random_bsr", "random_pattern_like", "matmul", "batch_matmul",
           "conv2d", "conv2d_flat", "csr_spmm",
           "bsr_spmm", "sddmm", "softmax", "matmul_bias_relu", "WORKLOADS", "get_workload",
           "parse_value", "workload_from_spec"]


# ----------------------------------------------------------------------------- dense builders

def matmul(M: int, N: int, K: int, dtype="float32", transpose_a=False, transpose_b=False):
    """``C = A @ B`` with A (M, K) and B (K, N) (stored transposed when the flags say so)."""
    A = ir.placeholder((K, M) if transpose_a else (M, K), dtype, name="A")
    B = ir.placeholder((N, K) if transpose_b else (K, N), dtype, name="B")
    C = ops.matmul(A, B, transpose_a, transpose_b)
    dag = ir.ComputeDAG([A, B, C])

    def make_inputs(rng):
        return [random_values(rng, A.shape, dtype), random_values(rng, B.shape, dtype)]

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
        return [random_values(rng, X.shape, dtype), random_values(rng, Y.shape, dtype)]

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
        return [random_values(rng, dshape, dtype), random_values(rng, wshape, dtype)]

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
        return [random_values(rng, dshape, dtype), random_values(rng, wshape, dtype)]

    def reference(inputs):
        return [ref.ref_conv2d(*inputs, stride=(sh, sw), groups=groups,
                               layout=layout).reshape(flat_shape)]

    return Workload(dag, make_inputs, reference, f"conv2d_flat_{layout.lower()}",
                    dict(N=N, C=C, H=H, W=W, O=O, KH=1, KW=1, stride=(sh, sw), padding=0,
                         dilation=1, groups=groups, layout=layout, method="flat", dtype=dtype))


# ----------------------------------------------------------------------------- nn builders

def softmax(M: int, N: int, axis: int = -1, dtype="float32"):
    """Row softmax of an (M, N) matrix (four stages)."""
    x = ir.placeholder((M, N), dtype, name="x")
    out = ops.softmax(x, axis=axis)
    dag = ir.ComputeDAG([x, out])

    def make_inputs(rng):
        return [random_values(rng, (M, N), dtype)]

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
        return [random_values(rng, (M, K), dtype), random_values(rng, (K, N), dtype),
                random_values(rng, (N,), dtype)]

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

