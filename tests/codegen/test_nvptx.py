"""The CUDA compile path without a GPU: default GPU schedule and hand GPU matmul -> PTX (checked by
ptxas where it exists), emulation equal to numpy, and launch-time errors."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import cuda_runtime as rt
from tecomp.codegen.ptxas import PTXError, check_ptx, find_ptxas
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W

HAS_PTXAS = find_ptxas() is not None
needs_ptxas = pytest.mark.skipif(not HAS_PTXAS, reason="ptxas not found")
needs_gpu = pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)

# small shapes with non-divisible extents (the default schedule's blocks of 256 are partial)
SMALL = {
    "matmul": dict(M=33, N=20, K=17),
    "batch_matmul": dict(B=2, M=9, N=7, K=5),
    "conv2d_nchw": dict(N=1, C=3, H=7, W=7, O=4, KH=3, KW=3, stride=1, padding=1),
    "conv2d_nhwc": dict(N=1, C=3, H=7, W=7, O=4, KH=3, KW=3, stride=2, padding=1),
    "conv2d_nchw_gemm": dict(N=1, C=3, H=7, W=7, O=4, KH=3, KW=3, stride=2, padding=1,
                             layout="NCHW", method="implicit_gemm"),
    "conv2d_nhwc_gemm": dict(N=1, C=3, H=7, W=7, O=4, KH=3, KW=3, padding=1, layout="NHWC",
                             method="implicit_gemm"),
    "csr_spmm": dict(M=20, K=16, N=6, density=0.2, empty_rows=3),
    "bsr_spmm": dict(Mb=4, Kb=3, N=5, bs_r=2, bs_c=3, density=0.5),
    "sddmm": dict(M=12, N=10, K=6, density=0.3, empty_rows=2),
    "softmax": dict(M=5, N=300),
    "matmul_bias_relu": dict(M=9, N=300, K=4),
}


def _workload(key):
    params = dict(SMALL[key])
    name = key if key in W.WORKLOADS else "conv2d"
    return W.get_workload(name, **params)


def _check(kernel, wl, seed=0, rtol=1e-4, atol=1e-4):
    rng = np.random.default_rng(seed)
    ins = wl.make_inputs(rng)
    got = kernel.emulate(*ins)
    got = got if isinstance(got, tuple) else (got,)
    for g, r in zip(got, wl.reference(ins)):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


@pytest.mark.parametrize("key", sorted(SMALL))
def test_default_gpu_schedule_builds_and_emulates(key):
    wl = _workload(key)
    k = tc.build(wl.dag, target="cuda", cache=False)
    ptx = k.source()
    assert ".entry" in ptx and "%tid.x" in ptx
    assert ptx.count(".entry") == len(k.compiled.launches)
    report = k.compiled.ptxas_report
    if HAS_PTXAS:
        assert set(report.kernels) == {x.name for x in k.compiled.launches}
    else:
        assert report is None
    _check(k, wl)


@pytest.mark.parametrize("shape", [(64, 64, 32), (40, 36, 20)])
def test_hand_gpu_matmul(shape):
    wl = W.matmul(*shape)
    k = tc.build(wl.dag, target="cuda", schedule=H.gpu_matmul_schedule(wl.dag), cache=False)
    ptx = k.source()
    assert ".shared" in ptx and "bar.sync" in ptx
    if HAS_PTXAS:
        (res,) = k.compiled.ptxas_report.kernels.values()
        assert res.shared_bytes == k.compiled.launches[0].shared_bytes > 0
    _check(k, wl)


@needs_ptxas
def test_ptxas_rejects_bad_ptx():
    with pytest.raises(PTXError, match="ptxas -arch=sm_90 failed"):
        check_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n")


def test_math_functions_emit_no_library_calls():
    x = tc.placeholder((100,), "float32", name="x")
    y = tc.compute((100,), lambda i: tc.exp(x[i]) + tc.log(tc.abs(x[i]) + 1.0) + tc.tanh(x[i])
                   + tc.sigmoid(x[i]) + tc.sqrt(tc.abs(x[i])), name="y")
    dag = tc.ComputeDAG([x, y])
    k = tc.build(dag, target="cuda", cache=False)
    ptx = k.source()
    assert "ex2.approx" in ptx and "lg2.approx" in ptx and "sqrt.rn" in ptx
    assert ".extern" not in ptx and "call" not in ptx.split(".entry")[1]
    a = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    np.testing.assert_allclose(k.emulate(a), np.exp(a) + np.log(np.abs(a) + 1) + np.tanh(a)
                               + 1 / (1 + np.exp(-a)) + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [tc.exp, tc.log, tc.tanh, tc.sigmoid], ids=lambda f: f.__name__)
def test_float64_math_is_refused_at_build_time(fn):
    """The GPU's approximate math is float32 only: float64 exp/log/tanh/sigmoid fail at build time
    with a message saying what to do, instead of returning float32 accuracy as float64."""
    x = tc.placeholder((37,), "float64", name="x")
    y = tc.compute((37,), lambda i: fn(x[i]), name="y")
    with pytest.raises(ValueError, match=r"float64 value is not supported on the cuda target.*cast"):
        tc.build(tc.ComputeDAG([x, y]), target="cuda", cache=False)
    z = tc.compute((37,), lambda i: fn(tc.cast(x[i], "float32")), name="z")  # the way out it names
    assert "approx.f32" in tc.build(tc.ComputeDAG([x, z]), target="cuda", cache=False).source()


def test_float64_arithmetic_stays_double_on_cuda():
    """Arithmetic, sqrt and division in float64 are PTX f64 instructions (not float32), and the
    emulated GPU program agrees with numpy in float64."""
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 3.0, 45)
    b = rng.uniform(-2.0, 2.0, 45)
    x = tc.placeholder((45,), "float64", name="x")
    w = tc.placeholder((45,), "float64", name="w")
    y = tc.compute((45,), lambda i: tc.sqrt(x[i]) * w[i] + x[i] / 3.0, name="y")
    k = tc.build(tc.ComputeDAG([x, w, y]), target="cuda", cache=False)
    ptx = k.source()
    assert "sqrt.rn.f64" in ptx and ".f32" not in ptx
    np.testing.assert_allclose(k.emulate(a, b), np.sqrt(a) * b + a / 3.0, rtol=1e-14)


@needs_gpu
def test_math_functions_on_the_gpu():
    """exp/log/tanh/sigmoid built from the PTX approximate instructions: within 4e-6 relative
    (tanh and log: plus 1e-6 absolute near their zeros) of numpy in float64."""
    a = np.concatenate([np.linspace(-80, 80, 4001), np.linspace(-1e-3, 1e-3, 101)]).astype(np.float32)
    x = tc.placeholder(a.shape, "float32", name="x")
    for fn, ref in [(tc.exp, np.exp), (tc.tanh, np.tanh), (tc.sigmoid, lambda v: 1 / (1 + np.exp(-v)))]:
        y = tc.compute(a.shape, lambda i: fn(x[i]), name="y")
        k = tc.build(tc.ComputeDAG([x, y]), target="cuda", cache=False)
        np.testing.assert_allclose(k(a), ref(a.astype(np.float64)), rtol=4e-6, atol=1e-6)
    pos = np.abs(a) + np.float32(1e-30)
    y = tc.compute(a.shape, lambda i: tc.log(x[i]), name="y")
    k = tc.build(tc.ComputeDAG([x, y]), target="cuda", cache=False)
    np.testing.assert_allclose(k(pos), np.log(pos.astype(np.float64)), rtol=4e-6, atol=1e-6)


@needs_gpu
def test_default_schedule_runs_on_the_gpu():
    for key in sorted(SMALL):
        wl = _workload(key)
        k = tc.build(wl.dag, target="cuda", cache=False)
        ins = wl.make_inputs(np.random.default_rng(0))
        got = k(*ins)
        np.testing.assert_allclose(got, wl.reference(ins)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(rt.available(), reason="a GPU is present")
def test_calling_without_gpu_raises():
    wl = W.matmul(8, 8, 8)
    k = tc.build(wl.dag, target="cuda", cache=False)
    a, b = wl.make_inputs(np.random.default_rng(0))
    with pytest.raises(rt.CudaUnavailableError):
        k(a, b)
    np.testing.assert_allclose(k.emulate(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_a_bound_cuda_call_holds_its_arrays_only_when_asked():
    # Kernel's call memo binds a runner without keeping the caller's arrays alive
    import gc
    import weakref
    wl = W.matmul(8, 8, 8)
    k = tc.build(wl.dag, target="cuda", cache=False)
    arrays = [*wl.make_inputs(np.random.default_rng(0)), np.empty((8, 8), np.float32)]
    refs = [weakref.ref(a) for a in arrays]
    kept = k.compiled.bind(arrays)
    loose = k.compiled.bind(arrays, keep=False)
    del arrays
    gc.collect()
    assert all(r() is not None for r in refs)
    del kept
    gc.collect()
    assert all(r() is None for r in refs)
    if not rt.available():
        with pytest.raises(rt.CudaUnavailableError):
            loose()
