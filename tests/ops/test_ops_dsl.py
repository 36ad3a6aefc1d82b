"""tecomp.ops: every operator evaluated schedule-free (tecomp.testing.evaluate_dag) against the
numpy/scipy references, construction errors, and FLOP counts."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp.ir as ir
import tecomp.ops as ops
from tecomp.ir.tensor import CSRCheck
from tecomp.testing import evaluate_dag, random_bsr, random_csr
from tecomp.testing import reference as ref
from tecomp.testing import workloads as W

pytestmark = pytest.mark.nodevice  # no compiled code: the fast tier


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if np.dtype(dtype) == np.float32 else dict(rtol=1e-10,
                                                                                  atol=1e-10)


def _check(wl, seed=0):
    dag, make_inputs, reference = wl
    rng = np.random.default_rng(seed)
    inputs = make_inputs(rng)
    got = evaluate_dag(dag, inputs)
    want = reference(inputs)
    assert len(got) == len(want)
    for g, w, t in zip(got, want, dag.outputs):
        assert g.shape == t.shape and g.dtype == t.dtype.np
        np.testing.assert_allclose(g, w, **_tol(g.dtype))
    return inputs, got


# ----------------------------------------------------------------------------- dense


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 17, 97), (97, 1, 7), (16, 16, 16), (3, 5, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul(M, N, K, dtype):
    _check(W.matmul(M, N, K, dtype))


@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
def test_matmul_transposed(ta, tb):
    _check(W.matmul(7, 17, 13, "float32", transpose_a=ta, transpose_b=tb))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_matmul_int(dtype):
    inputs, (got,) = _check(W.matmul(5, 7, 9, dtype))
    np.testing.assert_array_equal(got, inputs[0] @ inputs[1])


@pytest.mark.parametrize("B,M,N,K,ta,tb", [(1, 1, 1, 1, False, False), (3, 7, 17, 5, False, False),
                                           (2, 5, 3, 7, True, False), (4, 3, 6, 2, False, True)])
def test_batch_matmul(B, M, N, K, ta, tb):
    _check(W.batch_matmul(B, M, N, K, "float32", ta, tb))
    _check(W.batch_matmul(B, M, N, K, "float64", ta, tb))


CONV_CASES = [
    # N, C, H, W, O, KH, KW, stride, padding, dilation, groups
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1),
    (1, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1),
    (2, 4, 9, 7, 6, 3, 2, (2, 1), (1, 0, 2, 1), (1, 2), 2),
    (1, 6, 8, 8, 6, 3, 3, 2, 1, 1, 6),         # depthwise
    (1, 4, 5, 5, 8, 3, 3, 1, (2, 1), 1, 4),    # depthwise, channel multiplier 2
    (1, 2, 17, 13, 3, 5, 3, 3, 2, 2, 1),       # large stride/dilation, floor division
    (2, 3, 6, 5, 2, 1, 1, 1, 0, 1, 1),         # 1x1, no padding stage
    (1, 2, 4, 4, 2, 4, 4, 1, 0, 1, 1),         # kernel covers the whole input
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("method", ["direct", "implicit_gemm"])
def test_conv2d(case, layout, method):
    N, C, H, W_, O, KH, KW, s, p, d, g = case
    _check(W.conv2d(N, C, H, W_, O, KH, KW, s, p, d, g, layout, method))


def test_conv2d_float64_and_int():
    _check(W.conv2d(1, 4, 6, 6, 4, 3, 3, 1, 1, 1, 2, "NCHW", "implicit_gemm", dtype="float64"))
    inputs, (got,) = _check(W.conv2d(1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, "NHWC", "direct",
                                     dtype="int32"))
    assert got.dtype == np.int32


def test_conv2d_structure():
    data = ir.placeholder((1, 4, 8, 8), name="data")
    w = ir.placeholder((8, 2, 3, 3), name="w")
    out = ops.conv2d(data, w, padding=1, groups=2)
    dag = ir.ComputeDAG([data, w, out])
    assert [s.name for s in dag.stages] == ["data", "w", "pad", "conv2d"]
    assert dag.stage("pad").has_branch
    assert [a.name for a in out.op.reduce_axes] == ["rc", "ry", "rx"]
    out = ops.conv2d(data, w, padding=1, groups=2, method="implicit_gemm")
    (rk,) = out.op.reduce_axes
    assert rk.name == "rk" and rk.const_extent == 2 * 3 * 3
    # no padding: no pad stage, the conv reads the data directly
    out = ops.conv2d(data, w, groups=2, method="implicit_gemm")
    assert out.op.inputs[0] is data
    nhwc = ops.conv2d(ir.placeholder((1, 8, 8, 4)), ir.placeholder((3, 3, 4, 5)), layout="NHWC")
    assert [a.name for a in nhwc.op.reduce_axes] == ["ry", "rx", "rc"]
    assert nhwc.shape == (1, 6, 6, 5)


def test_conv2d_reference_against_scipy():
    """The conv reference itself, for groups=1 stride=1: sum of per-channel 2-d correlations."""
    from scipy.signal import correlate2d
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    want = np.zeros((2, 4, 5, 5))
    for n in range(2):
        for o in range(4):
            for c in range(3):
                want[n, o] += correlate2d(x[n, c], w[o, c], mode="valid")
    np.testing.assert_allclose(ref.ref_conv2d(x, w), want, rtol=1e-12, atol=1e-12)
    got = ref.ref_conv2d(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), layout="NHWC")
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_reference_against_torch(case):
    torch = pytest.importorskip("torch")
    N, C, H, W_, O, KH, KW, s, p, d, g = case
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, C, H, W_))
    w = rng.standard_normal((O, C // g, KH, KW))
    pt = p if isinstance(p, tuple) else (p, p)
    if len(pt) == 4:  # asymmetric: pad explicitly
        top, left, bottom, right = pt
        xt = torch.nn.functional.pad(torch.from_numpy(x), (left, right, top, bottom))
        want = torch.nn.functional.conv2d(xt, torch.from_numpy(w), stride=s, dilation=d, groups=g)
    else:
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=s,
                                          padding=pt, dilation=d, groups=g)
    np.testing.assert_allclose(ref.ref_conv2d(x, w, s, p, d, g), want.numpy(), rtol=1e-10,
                               atol=1e-10)


# ----------------------------------------------------------------------------- sparse


@pytest.mark.parametrize("M,K,N,density,empty,dense_row", [
    (1, 1, 1, 1.0, 0, False),
    (7, 17, 1, 0.3, 0, False),
    (17, 7, 97, 0.2, True, True),
    (97, 13, 7, 0.05, 10, False),
    (5, 4, 3, 0.0, 0, False),  # nnz == 0
    (6, 9, 4, 0.5, 6, False),  # every row empty
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_csr_spmm(M, K, N, density, empty, dense_row, dtype):
    wl = W.csr_spmm(M, K, N, density, empty, dense_row, dtype)
    inputs, (got,) = _check(wl)
    indptr = inputs[2]
    for i in np.flatnonzero(np.diff(indptr) == 0):
        assert np.all(got[i] == 0)


@pytest.mark.parametrize("Mb,Kb,N,bs_r,bs_c,density,empty", [
    (1, 1, 1, 1, 1, 1.0, 0),
    (5, 4, 7, 2, 3, 0.4, 1),
    (7, 3, 17, 3, 1, 0.5, True),
    (3, 5, 4, 4, 4, 0.0, 0),
])
def test_bsr_spmm(Mb, Kb, N, bs_r, bs_c, density, empty):
    _check(W.bsr_spmm(Mb, Kb, N, bs_r, bs_c, density, empty))
    _check(W.bsr_spmm(Mb, Kb, N, bs_r, bs_c, density, empty, dtype="float64"))


@pytest.mark.parametrize("M,N,K,density,empty,dense_row", [
    (1, 1, 1, 1.0, 0, False),
    (7, 17, 5, 0.3, True, False),
    (17, 7, 97, 0.3, 3, True),
    (4, 6, 3, 0.0, 0, False),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sddmm(M, N, K, density, empty, dense_row, dtype):
    _check(W.sddmm(M, N, K, density, empty, dense_row, dtype))


def test_sparse_checks_attached():
    wl = W.csr_spmm(7, 9, 4, 0.3)
    (c,) = wl.dag.checks
    data, indices, indptr, dense = wl.dag.inputs
    assert c == CSRCheck(indptr, data.shape[0], indices, ncols=9)
    wl = W.bsr_spmm(4, 5, 3, 2, 3, 0.5)
    (c,) = wl.dag.checks
    data, indices, indptr, dense = wl.dag.inputs
    assert (c.indptr, c.nnz, c.indices, c.ncols) == (indptr, data.shape[0], indices, 5)
    wl = W.sddmm(4, 6, 3, 0.5)
    (c,) = wl.dag.checks
    a, b, indices, indptr = wl.dag.inputs
    assert (c.indptr, c.nnz, c.indices, c.ncols) == (indptr, indices.shape[0], indices, 6)


def test_evaluate_dag_rejects_bad_index_data():
    wl = W.csr_spmm(5, 6, 3, 0.5, dense_row=True)
    inputs = wl.make_inputs(np.random.default_rng(0))
    bad = [a.copy() for a in inputs]
    bad[1][0] = 6  # column out of range
    with pytest.raises(ValueError, match="indices"):
        evaluate_dag(wl.dag, bad)
    bad = [a.copy() for a in inputs]
    bad[2][-1] += 1  # indptr does not end at nnz
    with pytest.raises(ValueError, match="indptr"):
        evaluate_dag(wl.dag, bad)


def test_random_csr_properties():
    rng = np.random.default_rng(0)
    data, indices, indptr = random_csr(rng, 40, 30, 0.2, empty_rows=5, dense_row=True)
    assert indices.dtype == np.int32 and indptr.dtype == np.int32
    assert indptr[0] == 0 and indptr[-1] == len(indices) == len(data)
    lengths = np.diff(indptr)
    assert np.all(lengths >= 0) and np.sum(lengths == 0) >= 5 and np.max(lengths) == 30
    assert np.all(data != 0) and np.all(np.abs(data) >= 0.5)
    for i in range(40):
        row = indices[indptr[i]:indptr[i + 1]]
        assert np.all(np.diff(row) > 0) and np.all((row >= 0) & (row < 30))
    bdata, bind, bptr = random_bsr(rng, 6, 4, 2, 3, 0.5)
    assert bdata.shape == (len(bind), 2, 3) and bptr[-1] == len(bind)


# ----------------------------------------------------------------------------- nn


@pytest.mark.parametrize("shape,axis", [((7, 17), -1), ((1, 1), 1), ((5, 97), 0),
                                        ((2, 3, 7), 1)])
def test_softmax(shape, axis):
    for dtype in ("float32", "float64"):
        x = ir.placeholder(shape, dtype, name="x")
        out = ops.softmax(x, axis=axis)
        dag = ir.ComputeDAG([x, out])
        assert [s.name for s in dag.stages] == ["x", "softmax_max", "softmax_exp", "softmax_sum",
                                                "softmax"]
        a = np.random.default_rng(1).standard_normal(shape).astype(dtype) * 10
        (got,) = evaluate_dag(dag, [a])
        np.testing.assert_allclose(got, ref.ref_softmax(a, axis), **_tol(dtype))
        np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-5)


def test_softmax_workload():
    _check(W.softmax(7, 17))
    _check(W.softmax(17, 7, axis=0, dtype="float64"))


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 17), -1), ((2, 5, 4), 1)])
def test_bias_add_relu(shape, axis):
    x = ir.placeholder(shape, name="x")
    b = ir.placeholder((shape[axis],), name="b")
    out = ops.relu(ops.bias_add(x, b, axis=axis))
    dag = ir.ComputeDAG([x, b, out])
    rng = np.random.default_rng(2)
    a, c = rng.standard_normal(shape).astype("f4"), rng.standard_normal(shape[axis]).astype("f4")
    (got,) = evaluate_dag(dag, [a, c])
    np.testing.assert_allclose(got, ref.ref_relu(ref.ref_bias_add(a, c, axis)), rtol=1e-6)
    assert dag.stage("bias_add").strictly_inlineable


def test_matmul_bias_relu_workload():
    _check(W.matmul_bias_relu(7, 17, 5))
    _check(W.matmul_bias_relu(1, 3, 97, dtype="float64"))


def test_get_workload():
    wl = W.get_workload("conv2d_nhwc", N=1, C=2, H=5, W=5, O=3, KH=3, KW=3, padding=1)
    assert wl.params["layout"] == "NHWC" and wl.dag.outputs[0].shape == (1, 5, 5, 3)
    assert W.get_workload("csr_spmm", M=5, K=5, N=2).index_data.keys() == {"indptr", "indices"}
    with pytest.raises(ValueError, match="unknown workload"):
        W.get_workload("nope")


# ----------------------------------------------------------------------------- FLOPs


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 17, 97), (64, 32, 16)])
def test_flops_matmul(M, N, K):
    assert W.matmul(M, N, K).dag.flop_count() == 2 * M * N * K
    assert W.batch_matmul(3, M, N, K).dag.flop_count() == 2 * 3 * M * N * K


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("method", ["direct", "implicit_gemm"])
def test_flops_conv2d(case, layout, method):
    N, C, H, W_, O, KH, KW, s, p, d, g = case
    dag = W.conv2d(N, C, H, W_, O, KH, KW, s, p, d, g, layout, method).dag
    OH, OW = ops.conv2d_output_shape(H, W_, KH, KW, s, p, d)
    assert dag.flop_count() == 2 * N * O * OH * OW * (C // g) * KH * KW


def test_flops_sparse():
    wl = W.csr_spmm(97, 31, 7, 0.1, empty_rows=True, dense_row=True)
    inputs = wl.make_inputs(np.random.default_rng(0))
    nnz = inputs[0].shape[0]
    assert wl.dag.flop_count(inputs={"indptr": inputs[2], "indices": inputs[1]}) == 2 * nnz * 7
    assert wl.dag.flop_count(inputs=wl.index_data) == 2 * nnz * 7
    wl = W.bsr_spmm(7, 5, 3, 2, 4, 0.4, empty_rows=2)
    nnzb = wl.dag.inputs[0].shape[0]
    assert wl.dag.flop_count(inputs=wl.index_data) == 2 * nnzb * 2 * 4 * 3
    wl = W.sddmm(17, 13, 5, 0.3, empty_rows=True)
    nnz = wl.dag.inputs[2].shape[0]
    assert wl.dag.flop_count(inputs=wl.index_data) == 2 * nnz * 5


# ----------------------------------------------------------------------------- errors


def _ph(shape, dtype="float32", name="t"):
    return ir.placeholder(shape, dtype, name=name)


def test_matmul_errors():
    with pytest.raises(ValueError, match="inner dimensions"):
        ops.matmul(_ph((3, 4)), _ph((5, 6)))
    with pytest.raises(ValueError, match="'A' must have rank 2"):
        ops.matmul(_ph((3, 4, 5)), _ph((5, 6)))
    with pytest.raises(TypeError, match="dtype mismatch"):
        ops.matmul(_ph((3, 4)), _ph((4, 6), "float64"))
    with pytest.raises(TypeError, match="'B' must be a tecomp Tensor"):
        ops.matmul(_ph((3, 4)), np.zeros((4, 6)))
    with pytest.raises(ValueError, match="batch sizes differ"):
        ops.batch_matmul(_ph((2, 3, 4)), _ph((3, 4, 5)))
    with pytest.raises(ValueError, match="inner dimensions"):
        ops.batch_matmul(_ph((2, 3, 4)), _ph((2, 5, 5)))


@pytest.mark.parametrize("kwargs,exc,pattern", [
    (dict(stride=0), ValueError, "'stride'"),
    (dict(stride=(1, 2, 3)), ValueError, "'stride'"),
    (dict(stride=1.5), TypeError, "'stride'"),
    (dict(dilation=0), ValueError, "'dilation'"),
    (dict(padding=-1), ValueError, "'padding'"),
    (dict(padding=(1, 2, 3)), ValueError, "'padding'"),
    (dict(padding=(1, 1.0)), TypeError, "'padding'"),
    (dict(groups=0), ValueError, "'groups'"),
    (dict(groups=3), ValueError, "not divisible by groups"),
    (dict(groups=2), ValueError, "input channels per group"),
    (dict(layout="NWHC"), ValueError, "'layout'"),
    (dict(method="fft"), ValueError, "'method'"),
])
def test_conv2d_argument_errors(kwargs, exc, pattern):
    data, w = _ph((1, 4, 8, 8), name="data"), _ph((6, 4, 3, 3), name="w")
    with pytest.raises(exc, match=pattern):
        ops.conv2d(data, w, **kwargs)


def test_conv2d_shape_errors():
    with pytest.raises(ValueError, match="'data' must have rank 4"):
        ops.conv2d(_ph((4, 8, 8)), _ph((6, 4, 3, 3)))
    with pytest.raises(ValueError, match="'weight' must have rank 4"):
        ops.conv2d(_ph((1, 4, 8, 8)), _ph((6, 4, 3)))
    with pytest.raises(ValueError, match="input channels per group"):
        ops.conv2d(_ph((1, 4, 8, 8)), _ph((6, 3, 3, 3)))
    with pytest.raises(ValueError, match="input channels per group"):  # OIHW weight with NHWC
        ops.conv2d(_ph((1, 8, 8, 4)), _ph((6, 4, 3, 3)), layout="NHWC")
    with pytest.raises(ValueError, match="output would be empty"):
        ops.conv2d(_ph((1, 4, 2, 2)), _ph((6, 4, 3, 3)))
    with pytest.raises(ValueError, match="output channels O=6 .* not divisible"):
        ops.conv2d(_ph((1, 4, 8, 8)), _ph((6, 1, 3, 3)), groups=4)
    with pytest.raises(TypeError, match="dtype mismatch"):
        ops.conv2d(_ph((1, 4, 8, 8)), _ph((6, 4, 3, 3), "float64"))
    with pytest.raises(TypeError, match="bool"):
        ops.conv2d(_ph((1, 4, 8, 8), "bool"), _ph((6, 4, 3, 3), "bool"))


def test_sparse_errors():
    data, ind, ptr = _ph((10,), name="data"), _ph((10,), "int32", "ind"), _ph((5,), "int32", "ptr")
    dense = _ph((8, 3), name="dense")
    with pytest.raises(TypeError, match="'indices' must have dtype int32, got int64"):
        ops.csr_spmm(data, _ph((10,), "int64"), ptr, dense)
    with pytest.raises(TypeError, match="'indptr' must have dtype int32"):
        ops.csr_spmm(data, ind, _ph((5,), "float32"), dense)
    with pytest.raises(ValueError, match="'indices' has 9 entries but 'data' has 10"):
        ops.csr_spmm(data, _ph((9,), "int32"), ptr, dense)
    with pytest.raises(ValueError, match="'indptr' must have rank 1"):
        ops.csr_spmm(data, ind, _ph((5, 1), "int32"), dense)
    with pytest.raises(TypeError, match="dtype mismatch"):
        ops.csr_spmm(data, ind, ptr, _ph((8, 3), "float64"))
    with pytest.raises(ValueError, match="'dense' must have rank 2"):
        ops.csr_spmm(data, ind, ptr, _ph((8,)))
    with pytest.raises(ValueError, match="not a multiple of the block width"):
        ops.bsr_spmm(_ph((10, 2, 3)), ind, ptr, _ph((8, 3)))
    with pytest.raises(ValueError, match="'data' must have rank 3"):
        ops.bsr_spmm(data, ind, ptr, dense)
    a, b = _ph((4, 6), name="a"), _ph((7, 6), name="b")
    with pytest.raises(ValueError, match="M \\+ 1 = 5"):
        ops.sddmm(a, b, ind, _ph((6,), "int32"))
    with pytest.raises(ValueError, match="second dimensions"):
        ops.sddmm(a, _ph((7, 5)), ind, ptr)
    with pytest.raises(TypeError, match="int32"):
        ops.sddmm(a, b, _ph((10,), "int64"), ptr)


def test_nn_errors():
    x = _ph((3, 4), name="x")
    with pytest.raises(ValueError, match="'bias' has length 3"):
        ops.bias_add(x, _ph((3,)))
    with pytest.raises(ValueError, match="'axis'=2 is out of range"):
        ops.bias_add(x, _ph((4,)), axis=2)
    with pytest.raises(ValueError, match="'bias' must have rank 1"):
        ops.bias_add(x, _ph((1, 4)))
    with pytest.raises(TypeError, match="float dtype"):
        ops.softmax(_ph((3, 4), "int32"))
    with pytest.raises(ValueError, match="out of range"):
        ops.softmax(x, axis=-3)
    with pytest.raises(TypeError, match="bool"):
        ops.relu(_ph((3,), "bool"))


# ----------------------------------------------------------------------------- properties


@st.composite
def conv_configs(draw):
    g = draw(st.sampled_from([1, 1, 2, 3]))
    C = g * draw(st.integers(1, 3))
    O = g * draw(st.integers(1, 3))
    KH, KW = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    # input at least as large as the dilated kernel after padding
    H = max(1, dil[0] * (KH - 1) + 1 - pad[0] - pad[2]) + draw(st.integers(0, 5))
    W_ = max(1, dil[1] * (KW - 1) + 1 - pad[1] - pad[3]) + draw(st.integers(0, 5))
    return (draw(st.integers(1, 2)), C, H, W_, O, KH, KW, stride, pad, dil, g,
            draw(st.sampled_from(["NCHW", "NHWC"])), draw(st.sampled_from(["direct",
                                                                            "implicit_gemm"])))


@settings(max_examples=40, deadline=None)
@given(conv_configs(), st.integers(0, 2**31))
def test_conv2d_property(cfg, seed):
    wl = W.conv2d(*cfg)
    _check(wl, seed=seed)
    N, C, H, W_, O, KH, KW, s, p, d, g, layout, method = cfg
    OH, OW = ops.conv2d_output_shape(H, W_, KH, KW, s, p, d)
    assert wl.dag.flop_count() == 2 * N * O * OH * OW * (C // g) * KH * KW


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 6), st.floats(0.0, 1.0),
       st.integers(0, 5), st.booleans(), st.integers(0, 2**31))
def test_csr_property(M, K, N, density, empty, dense_row, seed):
    wl = W.csr_spmm(M, K, N, density, empty, dense_row, seed=seed)
    inputs, _ = _check(wl, seed=seed)
    assert wl.dag.flop_count(inputs=wl.index_data) == 2 * len(inputs[0]) * N
    _check(W.sddmm(M, K, N, density, empty, dense_row, seed=seed), seed=seed)


# ----------------------------------------------------------------------------- evaluate_dag


def test_evaluate_dag_sparse_max_min_identity():
    """Data-dependent max/min reductions: empty rows give the reduction's identity."""
    rng = np.random.default_rng(0)
    vals, indices, indptr = random_csr(rng, 9, 6, 0.4, empty_rows=3)
    data = ir.placeholder(vals.shape, name="data")
    ptr = ir.placeholder(indptr.shape, "int32", name="indptr")

    def rowred(fn, name):
        def body(i):
            k = ir.reduce_axis((ptr[i], ptr[i + 1]), name="k")
            return fn(data[k], axis=k)
        return ir.compute((9,), body, name=name)

    mx, mn = rowred(ir.max, "mx"), rowred(ir.min, "mn")
    got_max, got_min = evaluate_dag(ir.ComputeDAG([data, ptr, mx, mn]), [vals, indptr])
    for i in range(9):
        row = vals[indptr[i]:indptr[i + 1]]
        assert got_max[i] == (row.max() if row.size else -np.inf)
        assert got_min[i] == (row.min() if row.size else np.inf)


def test_evaluate_dag_guarded_reads_and_errors():
    x = ir.placeholder((5,), name="x")
    # reads of x[i - 2] happen only where i >= 2 (the Select guards them)
    y = ir.compute((7,), lambda i: ir.if_then_else(i >= 2, x[ir.minimum(i - 2, 4)], -1.0), name="y")
    dag = ir.ComputeDAG([x, y])
    a = np.arange(5, dtype=np.float32)
    (got,) = evaluate_dag(dag, [a])
    np.testing.assert_array_equal(got, [-1, -1, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="shape"):
        evaluate_dag(dag, [np.zeros(4, np.float32)])
    with pytest.raises(TypeError, match="inputs"):
        evaluate_dag(dag, [])


def test_evaluate_dag_chunks_large_stage(monkeypatch):
    """The outer dimension is processed in chunks; results do not depend on the chunk size."""
    import tecomp.testing.dag_eval as de
    wl = W.csr_spmm(23, 11, 5, 0.4, empty_rows=True)
    inputs = wl.make_inputs(np.random.default_rng(0))
    (full,) = evaluate_dag(wl.dag, inputs)
    monkeypatch.setattr(de, "_CHUNK_ELEMS", 7)
    (chunked,) = evaluate_dag(wl.dag, inputs)
    # float32 sums: the reduction's padded width (and so numpy's pairwise order) follows the chunk
    np.testing.assert_allclose(full, chunked, rtol=1e-6, atol=1e-6)
    wl = W.sddmm(13, 7, 5, 0.4, empty_rows=True)
    inputs = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(evaluate_dag(wl.dag, inputs)[0], wl.reference(inputs)[0],
                               rtol=1e-5, atol=1e-5)


def test_workload_from_spec_and_parse_value():
    """The one text-to-workload path that the CLI, export and model_eval share."""
    assert W.parse_value("3") == 3 and W.parse_value("0.5") == 0.5
    assert W.parse_value("true") is True and W.parse_value("1,2") == (1, 2)
    assert W.parse_value("NHWC") == "NHWC"
    wl = W.workload_from_spec("conv2d_nchw", (1, 4, 6, 6, 2, 3, 3), {"padding": 1})
    assert wl.params["layout"] == "NCHW" and wl.params["C"] == 4 and wl.params["padding"] == 1
    with pytest.raises(ValueError, match="at most"):
        W.workload_from_spec("matmul", (1, 2, 3, 4, 5, 6, 7, 8))
    with pytest.raises(ValueError, match="unknown workload"):
        W.workload_from_spec("nope")
