"""Every operator of tecomp.ops built with the default schedule (``tc.build(dag, "llvm")``):
the compiled kernel and, for small shapes, the loop-IR interpreter (``kernel.emulate``) against the
numpy/scipy references."""
import numpy as np
import pytest

import tecomp
from tecomp.testing import workloads as W

if not hasattr(tecomp, "build"):  # pragma: no cover - only while the build layer is missing
    pytest.skip("tecomp.build is not available", allow_module_level=True)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if np.dtype(dtype) == np.float32 else dict(rtol=1e-10,
                                                                                  atol=1e-10)


# moderate shapes for the compiled kernel
NATIVE = [
    ("matmul", lambda: W.matmul(64, 48, 97)),
    ("matmul_prime", lambda: W.matmul(7, 17, 1)),
    ("matmul_f64_t", lambda: W.matmul(17, 33, 29, "float64", transpose_a=True, transpose_b=True)),
    ("matmul_int32", lambda: W.matmul(9, 5, 13, "int32")),
    ("batch_matmul", lambda: W.batch_matmul(3, 17, 16, 7)),
    ("batch_matmul_tb", lambda: W.batch_matmul(2, 7, 9, 5, transpose_b=True)),
    ("conv_nchw_direct", lambda: W.conv2d(2, 8, 14, 13, 16, 3, 3, 1, 1, 1, 1, "NCHW", "direct")),
    ("conv_nchw_gemm", lambda: W.conv2d(2, 8, 14, 13, 16, 3, 3, 1, 1, 1, 1, "NCHW",
                                        "implicit_gemm")),
    ("conv_nhwc_direct", lambda: W.conv2d(1, 8, 15, 15, 12, 3, 3, 2, (1, 0, 2, 1), 1, 2, "NHWC",
                                          "direct")),
    ("conv_nhwc_gemm", lambda: W.conv2d(1, 8, 15, 15, 12, 3, 3, 2, (1, 0, 2, 1), 1, 2, "NHWC",
                                        "implicit_gemm")),
    ("conv_depthwise", lambda: W.conv2d(1, 16, 12, 12, 16, 3, 3, 1, 1, 1, 16, "NCHW", "direct")),
    ("conv_dilated_gemm", lambda: W.conv2d(1, 4, 17, 17, 6, 3, 5, (2, 3), 2, 2, 1, "NCHW",
                                           "implicit_gemm")),
    ("conv_1x1_f64", lambda: W.conv2d(2, 6, 7, 7, 5, 1, 1, dtype="float64")),
    ("csr_spmm", lambda: W.csr_spmm(97, 64, 17, 0.1, empty_rows=True, dense_row=True)),
    ("csr_spmm_f64", lambda: W.csr_spmm(33, 17, 8, 0.3, empty_rows=3, dtype="float64")),
    ("csr_spmm_nnz0", lambda: W.csr_spmm(5, 4, 3, 0.0)),
    ("bsr_spmm", lambda: W.bsr_spmm(13, 9, 17, 4, 2, 0.3, empty_rows=2)),
    ("sddmm", lambda: W.sddmm(33, 29, 17, 0.2, empty_rows=True, dense_row=True)),
    ("softmax", lambda: W.softmax(17, 97)),
    ("softmax_axis0", lambda: W.softmax(13, 7, axis=0, dtype="float64")),
    ("matmul_bias_relu", lambda: W.matmul_bias_relu(31, 17, 9)),
    ("matmul_1000", lambda: W.matmul(1000, 7, 1)),
    ("matmul_1_1000", lambda: W.matmul(1, 17, 1000, "float64")),
    ("softmax_1000", lambda: W.softmax(1, 1000)),
    ("conv_prime_7x7_s2", lambda: W.conv2d(1, 3, 97, 17, 7, 7, 7, 2, 3, 1, 1, "NCHW", "direct")),
    ("conv_prime_7x7_s2_gemm", lambda: W.conv2d(1, 3, 97, 17, 7, 7, 7, 2, 3, 1, 1, "NHWC",
                                                "implicit_gemm")),
    ("csr_spmm_1000", lambda: W.csr_spmm(1000, 97, 7, 0.01, empty_rows=True, dense_row=True)),
    ("bsr_spmm_1x1", lambda: W.bsr_spmm(17, 7, 5, 1, 1, 0.3, empty_rows=2)),
    ("sddmm_1000", lambda: W.sddmm(1000, 17, 7, 0.02, empty_rows=True)),
]

# small shapes for the interpreter (slow)
EMULATE = [
    ("matmul", lambda: W.matmul(7, 5, 3)),
    ("batch_matmul", lambda: W.batch_matmul(2, 3, 4, 5, transpose_a=True)),
    ("conv_nchw_direct", lambda: W.conv2d(1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, "NCHW", "direct")),
    ("conv_nchw_gemm", lambda: W.conv2d(1, 4, 5, 4, 4, 3, 2, 2, (1, 0, 1, 1), 1, 2, "NCHW",
                                        "implicit_gemm")),
    ("conv_nhwc_direct", lambda: W.conv2d(1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 3, "NHWC", "direct")),
    ("conv_nhwc_gemm", lambda: W.conv2d(1, 2, 6, 5, 3, 2, 3, 1, 1, (2, 1), 1, "NHWC",
                                        "implicit_gemm")),
    ("csr_spmm", lambda: W.csr_spmm(9, 7, 5, 0.3, empty_rows=2, dense_row=True)),
    ("bsr_spmm", lambda: W.bsr_spmm(3, 4, 5, 2, 3, 0.5, empty_rows=1)),
    ("sddmm", lambda: W.sddmm(7, 6, 5, 0.4, empty_rows=1)),
    ("softmax", lambda: W.softmax(3, 7)),
    ("matmul_bias_relu", lambda: W.matmul_bias_relu(5, 4, 3)),
    ("matmul_1000", lambda: W.matmul(1, 7, 1000)),
    ("csr_spmm_97", lambda: W.csr_spmm(97, 17, 7, 0.05, empty_rows=True, dense_row=True)),
    ("sddmm_f64", lambda: W.sddmm(17, 7, 1, 0.3, empty_rows=2, dtype="float64")),
]


def _run(wl, call):
    dag, make_inputs, reference = wl
    inputs = make_inputs(np.random.default_rng(0))
    kernel = tecomp.build(dag, target="llvm")
    got = call(kernel, inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    for g, w, t in zip(got, reference(inputs), dag.outputs):
        assert g.shape == t.shape and g.dtype == t.dtype.np
        np.testing.assert_allclose(g, w, **_tol(g.dtype))


@pytest.mark.parametrize("name,builder", NATIVE, ids=[n for n, _ in NATIVE])
def test_build_native(name, builder):
    _run(builder(), lambda k, x: k(*x))


@pytest.mark.parametrize("name,builder", EMULATE, ids=[n for n, _ in EMULATE])
def test_build_emulate(name, builder):
    pytest.importorskip("tecomp.codegen.interp", reason="the loop-IR interpreter is not available")
    _run(builder(), lambda k, x: k.emulate(*x))


def test_build_out_argument():
    dag, make_inputs, reference = W.conv2d(1, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1, "NHWC",
                                           "implicit_gemm")
    inputs = make_inputs(np.random.default_rng(1))
    out = np.full(dag.outputs[0].shape, np.nan, dtype=np.float32)
    tecomp.build(dag, target="llvm")(*inputs, out=out)
    np.testing.assert_allclose(out, reference(inputs)[0], **_tol(np.float32))


@pytest.mark.parametrize("builder", [lambda: W.csr_spmm(9, 7, 4, 0.4, dense_row=True),
                                     lambda: W.bsr_spmm(4, 5, 3, 2, 2, 0.5, dense_row=True),
                                     lambda: W.sddmm(6, 7, 3, 0.5, dense_row=True)],
                         ids=["csr_spmm", "bsr_spmm", "sddmm"])
def test_build_rejects_bad_index_data(builder):
    wl = builder()
    kernel = tecomp.build(wl.dag, target="llvm")
    inputs = wl.make_inputs(np.random.default_rng(2))
    names = [t.name for t in wl.dag.inputs]
    ii, ip = names.index("indices"), names.index("indptr")
    bad = [a.copy() for a in inputs]
    bad[ii][0] = 1000  # column out of range
    with pytest.raises(ValueError):
        kernel(*bad)
    bad = [a.copy() for a in inputs]
    bad[ip][-1] += 1  # indptr does not end at nnz
    with pytest.raises(ValueError):
        kernel(*bad)


def test_build_varying_sparse_values():
    """Same pattern, fresh values: the kernel is reused with new data."""
    wl = W.csr_spmm(31, 23, 9, 0.2, empty_rows=True)
    kernel = tecomp.build(wl.dag, target="llvm")
    for seed in range(3):
        inputs = wl.make_inputs(np.random.default_rng(seed))
        np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs)[0], **_tol(np.float32))
