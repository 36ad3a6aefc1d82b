"""The cuda-python runtime: what must hold without a GPU (errors, protocol parsing, argument
packing) and, where a GPU exists, copies, launches of hand-written PTX and event timing."""
import ctypes
import gc
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tecomp.codegen import cuda_driver, cuda_interop
from tecomp.codegen import cuda_runtime as cr
from tecomp.testing.ptx_kernels import PTX

HAVE_GPU = cr.available()
gpu = pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)
no_gpu = pytest.mark.skipif(HAVE_GPU, reason="a CUDA GPU is present")


class CAI:
    """A producer implementing __cuda_array_interface__ (no memory behind it: never touched)."""

    def __init__(self, **iface):
        base = {"shape": (4, 5), "typestr": "<f4", "data": (0x7F0000001000, False), "version": 3,
                "strides": None}
        base.update(iface)
        self.__cuda_array_interface__ = base


# ----------------------------------------------------------------------------- without a GPU
@no_gpu
def test_unavailable_is_explained():
    assert cr.available() is False
    with pytest.raises(cr.CudaUnavailableError) as e:
        cr.require()
    msg = str(e.value)
    assert any(w in msg for w in ("cuda-python", "driver", "device")), msg
    with pytest.raises(cr.CudaUnavailableError):
        cr.DeviceArray.from_numpy(np.ones(3, np.float32))
    with pytest.raises(cr.CudaUnavailableError):
        cr.probe()


def test_host_arrays_are_refused():
    with pytest.raises(TypeError, match="host \\(numpy\\) array"):
        cr.as_device_array(np.ones(3, np.float32))

    a = np.ones(3, np.float32)

    class HostDLPack:  # a DLPack producer on the CPU
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    with pytest.raises(TypeError, match="kDLCPU.*numpy"):
        cr.as_device_array(HostDLPack())
    with pytest.raises(TypeError, match="neither __cuda_array_interface__ nor __dlpack__"):
        cr.as_device_array([1.0, 2.0])


def test_cuda_array_interface_is_parsed_without_touching_memory():
    src = CAI()
    v = cr.as_device_array(src)
    assert (v.ptr, v.shape, v.dtype, v.nbytes) == (0x7F0000001000, (4, 5), np.float32, 80)
    assert not v.owning and v._owner is src  # the view keeps its producer alive
    back = v.__cuda_array_interface__
    assert back["data"][0] == v.ptr and back["shape"] == (4, 5) and np.dtype(back["typestr"]) == v.dtype
    # explicit C-contiguous strides (an extent-1 axis may have any stride), v2 without a stream
    v2 = cr.as_device_array(CAI(shape=(3, 1, 2), typestr="<i8", strides=(16, 999, 8), version=2))
    assert (v2.shape, v2.dtype, v2.nbytes) == ((3, 1, 2), np.int64, 48)


@pytest.mark.parametrize("iface, match", [
    ({"strides": (4, 16)}, "not C-contiguous"),
    ({"mask": (1, False)}, "masked"),
    ({"stream": 0}, "stream 0"),
    ({"version": 4}, "version 4"),
    ({"typestr": ">f4"}, "byte order"),
    ({"typestr": "<c8"}, "not supported"),
    ({"data": (0, False)}, "null data pointer"),
])
def test_cuda_array_interface_problems_are_named(iface, match):
    with pytest.raises(ValueError, match=match):
        cr.as_device_array(CAI(**iface))


def test_cuda_array_interface_missing_keys():
    class Bad:
        __cuda_array_interface__ = {"shape": (2,), "version": 3}
    with pytest.raises(ValueError, match="lacks typestr, data"):
        cr.as_device_array(Bad())


def test_dlpack_struct_layout_and_deleter():
    """Read a real DLPack capsule (numpy's) with our ctypes structs; the producer's deleter runs
    when the view is collected (numpy's deleter drops its reference to the array)."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    before = sys.getrefcount(a)
    view = cuda_interop.read_dlpack(a, stream=None)
    assert (view.ptr, view.shape, view.dtype) == (a.ctypes.data, (2, 3, 4), np.float32)
    del view
    gc.collect()
    assert sys.getrefcount(a) == before
    strided = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    with pytest.raises(ValueError, match="not C-contiguous"):
        cuda_interop.read_dlpack(strided, stream=None)


def test_cuda_error_message():
    e = cr.CudaError("cuLaunchKernel('k')", 700, "CUDA_ERROR_ILLEGAL_ADDRESS",
                     "an illegal memory access was encountered", detail="JIT log:\nline 3")
    msg = str(e)
    assert msg.startswith("cuLaunchKernel('k') failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal")
    assert msg.endswith("JIT log:\nline 3")
    assert e.sticky and e.code == 700
    assert not cr.CudaError("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY").sticky


def test_driver_results_are_checked():
    pytest.importorskip("cuda.bindings.driver", reason="cuda-python not installed")
    cr.available()  # loads the binding (the driver itself may be missing)
    d = cuda_driver._State.driver
    assert cuda_driver.check_call("cuDeviceGetCount", (d.CUresult.CUDA_SUCCESS, 3)) == 3
    assert cuda_driver.check_call("cuCtxSynchronize", (d.CUresult.CUDA_SUCCESS,)) is None
    with pytest.raises(cr.CudaError, match="cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY \\(2\\)"):
        cuda_driver.check_call("cuMemAlloc", (d.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))


def test_kernel_argument_packing():
    v = cr.as_device_array(CAI())
    vals = [cr._param(x, i)[0] for i, x in enumerate(
        [v, 7, 1.5, np.int64(1 << 40), np.float64(0.25), np.uint32(5), ctypes.c_int16(-3)])]
    assert [type(x) for x in vals] == [ctypes.c_uint64, ctypes.c_int32, ctypes.c_float,
                                       ctypes.c_int64, ctypes.c_double, ctypes.c_uint32,
                                       ctypes.c_int16]
    assert [x.value for x in vals] == [v.ptr, 7, 1.5, 1 << 40, 0.25, 5, -3]
    assert cr._param(CAI(), 0)[0].value == 0x7F0000001000  # any device array, by address
    with pytest.raises(OverflowError, match="argument 1.*i32"):
        cr._param(1 << 31, 1)
    with pytest.raises(TypeError, match="argument 2 of type str"):
        cr._param("x", 2)
    assert cr._dim3(8, "grid") == (8, 1, 1) and cr._dim3((2, 3), "grid") == (2, 3, 1)
    with pytest.raises(ValueError, match="block"):
        cr._dim3((0, 1), "block")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not found")
def test_test_kernels_pass_ptxas(tmp_path):
    """The PTX the GPU tests launch is valid (checked here, where there may be no GPU)."""
    src = tmp_path / "k.ptx"
    src.write_text(PTX)
    r = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ----------------------------------------------------------------------------- with a GPU
@gpu
def test_round_trip_copies():
    rng = np.random.default_rng(0)
    for a in (rng.standard_normal((17, 33)).astype(np.float32),
              rng.integers(-100, 100, 1000).astype(np.int32), np.zeros((0, 4), np.float64)):
        d = cr.DeviceArray.from_numpy(a)
        assert d.owning and d.shape == a.shape and d.dtype == a.dtype
        np.testing.assert_array_equal(d.to_numpy(), a)
        out = np.empty_like(a)
        assert d.to_numpy(out=out) is out
        d.free()
    p = cr.DeviceArray.empty((5,), np.float32)
    p.fill_bytes(0xFF)
    assert np.isnan(p.to_numpy()).all()


@gpu
def test_launch_hand_written_ptx():
    mod = cr.Module(PTX)
    n = 1000
    out = cr.DeviceArray.empty((n,), np.int32)
    mod.function("write_tid").launch((8,), (128,), [out, n])
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n, dtype=np.int32))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = cr.DeviceArray.from_numpy(x), cr.DeviceArray.from_numpy(y)
    mod.function("axpy").launch(((n + 255) // 256, 1, 1), (256, 1, 1), [dx, dy, 0.5, n])
    np.testing.assert_allclose(dy.to_numpy(), 0.5 * x + y, rtol=1e-6)
    with pytest.raises(cr.CudaError, match="cuModuleGetFunction"):
        mod.function("nope")


@gpu
def test_bad_ptx_reports_the_jit_log():
    with pytest.raises(cr.CudaError, match="cuModuleLoadDataEx") as e:
        cr.Module(PTX.replace("mad.lo.s32", "mad.bogus.s32"))
    assert "JIT log" in str(e.value) or e.value.name.startswith("CUDA_ERROR")


@gpu
def test_event_timing_is_positive():
    f = cr.Module(PTX).function("write_tid")
    n = 1 << 20
    out = cr.DeviceArray.empty((n,), np.int32)
    times = cr.time_function(lambda: f.launch((n // 256,), (256,), [out, n]), number=5, repeat=3)
    assert len(times) == 3 and all(0 < t < 1 for t in times)
    assert cr.device().arch.startswith("sm_") and cr.device().multiprocessors > 0


@gpu
def test_zero_copy_torch_tensor():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    t = torch.zeros(300, dtype=torch.int32, device="cuda")
    v = cr.as_device_array(t)
    assert v.ptr == t.data_ptr() and v.shape == (300,) and v.dtype == np.int32
    cr.Module(PTX).function("write_tid").launch((3,), (128,), [t, 300])  # passed by address
    cr.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(300, dtype=np.int32))

    class OnlyDLPack:
        def __dlpack__(self, stream=None):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    w = cr.as_device_array(OnlyDLPack())
    assert w.ptr == t.data_ptr() and w.shape == (300,)
    np.testing.assert_array_equal(w.to_numpy(), np.arange(300, dtype=np.int32))
