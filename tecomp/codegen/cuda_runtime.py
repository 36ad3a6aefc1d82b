"""The CUDA runtime of tecomp: device memory, PTX modules, kernel launches and event timing,
through cuda-python's driver API (:mod:`.cuda_driver` holds the context and the error checks).

Imported lazily by the CUDA target, so that building PTX never needs cuda-python. Initialization
is lazy and thread-safe; kernels run on the legacy default stream unless a stream is given, so
copies and :func:`synchronize` order after them.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from . import cuda_interop
from .cuda_driver import (
    CudaError,
    CudaUnavailableError,
    Device,
    as_stream,
    available,
    check_call,
    current_driver,
    device,
    probe,
    require,
    synchronize,
)

__all__ = ["CudaUnavailableError", "CudaError", "available", "require", "device", "Device",
           "Module", "Function", "DeviceArray", "as_device_array", "synchronize", "time_function",
           "probe"]

# ----------------------------------------------------------------------------- memory
def _free(ptr: int) -> None:
    try:
        d = current_driver()
        d.cuMemFree(d.CUdeviceptr(ptr))
    except Exception:  # noqa: BLE001 - a finalizer must not raise (e.g. after a sticky error)
        pass


class DeviceArray:
    """A C-contiguous array in device memory.

    Owning arrays (:meth:`empty`, :meth:`from_numpy`) free their memory on :meth:`free` or when
    collected; views (:func:`as_device_array`) keep their source alive instead. Exposes
    ``__cuda_array_interface__`` (v3), so torch/CuPy can view it without copying.
    """

    def __init__(self, ptr: int, shape, dtype, *, owner=None, readonly=False, _owning=False):
        self._ptr, self.shape, self.dtype = int(ptr), tuple(int(s) for s in shape), np.dtype(dtype)
        self.readonly, self._owner, self._owns = readonly, owner, bool(_owning)
        # an empty array owns no allocation (cuMemAlloc(0) fails) but is still no view
        self._fin = weakref.finalize(self, _free, self._ptr) if _owning and self._ptr else None
        if self._fin is not None:
            self._fin.atexit = False  # the driver may be torn down already at exit

    @classmethod
    def empty(cls, shape, dtype) -> "DeviceArray":
        """Uninitialized device memory for ``shape`` x ``dtype``."""
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        d = current_driver()
        ptr = int(check_call("cuMemAlloc", d.cuMemAlloc(nbytes))) if nbytes else 0
        return cls(ptr, shape, dtype, _owning=True)

    @classmethod
    def from_numpy(cls, a) -> "DeviceArray":
        """A device copy of the numpy array ``a``."""
        a = np.ascontiguousarray(a)
        out = cls.empty(a.shape, a.dtype)
        out.copy_from_numpy(a)
        return out

    @property
    def ptr(self) -> int:
        if self._ptr == 0 and self.nbytes:
            raise ValueError("this DeviceArray was freed")
        return self._ptr

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def owning(self) -> bool:
        return self._owns

    def copy_from_numpy(self, a) -> None:
        """Upload ``a`` (same shape and dtype) into this array."""
        a = np.ascontiguousarray(a)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise ValueError(f"cannot copy a {a.dtype}{list(a.shape)} array into a device array "
                             f"of {self.dtype}{list(self.shape)}")
        if self.readonly:
            raise ValueError("this device array is read-only")
        if self.nbytes:
            d = current_driver()
            check_call("cuMemcpyHtoD", d.cuMemcpyHtoD(d.CUdeviceptr(self.ptr), a.ctypes.data, self.nbytes))

    def to_numpy(self, out=None) -> np.ndarray:
        """Copy to the host (waits for earlier launches on the default stream); into ``out`` (a
        C-contiguous numpy array of the same shape and dtype) if given."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif (not isinstance(out, np.ndarray) or out.shape != self.shape or out.dtype != self.dtype
              or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"out must be a writeable C-contiguous numpy array of "
                             f"{self.dtype}{list(self.shape)}")
        if self.nbytes:
            d = current_driver()
            check_call("cuMemcpyDtoH", d.cuMemcpyDtoH(out.ctypes.data, d.CUdeviceptr(self.ptr), self.nbytes))
        return out

    def fill_bytes(self, value: int) -> None:
        """Set every byte to ``value`` (0xFF makes every float NaN: used to poison outputs)."""
        if self.nbytes:
            d = current_driver()
            check_call("cuMemsetD8", d.cuMemsetD8(d.CUdeviceptr(self.ptr), int(value) & 0xFF, self.nbytes))

    def free(self) -> None:
        """Release the memory now (owning arrays; a no-op for views)."""
        if self._fin is not None:
            self._fin()
            self._ptr = 0
        self._owner = None

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly),
                "strides": None, "version": 3, "stream": 1}  # our work is on the legacy stream

    def __repr__(self):
        kind = "owning" if self.owning else "view"
        return f"DeviceArray({self.dtype}{list(self.shape)}, ptr=0x{self._ptr:x}, {kind})"


def as_device_array(obj, name: str = "array") -> DeviceArray:
    """A zero-copy :class:`DeviceArray` view of a device array of another library.

    Accepts a DeviceArray, an object with ``__cuda_array_interface__`` (CuPy, torch, Numba) or
    with DLPack (``__dlpack__``/``__dlpack_device__`` on a CUDA device). The view keeps ``obj``
    alive. Host arrays are refused: pass numpy arrays to the kernel (they are copied).
    """
    if isinstance(obj, DeviceArray):
        return obj
    if isinstance(obj, np.ndarray):
        raise TypeError(f"{name} is a host (numpy) array; pass numpy arrays to the kernel itself "
                        f"(they are copied) or upload with DeviceArray.from_numpy")
    if hasattr(obj, "__cuda_array_interface__"):
        view = cuda_interop.parse_cuda_array_interface(obj.__cuda_array_interface__, name)
        if view.stream is not None:  # CAI v3: the producer's work on that stream must finish first
            d = current_driver()
            check_call("cuStreamSynchronize", d.cuStreamSynchronize(d.CUstream(view.stream)))
        return DeviceArray(view.ptr, view.shape, view.dtype, owner=obj, readonly=view.readonly)
    if hasattr(obj, "__dlpack_device__") and hasattr(obj, "__dlpack__"):
        kind, _ = cuda_interop.dlpack_device(obj)
        host = cuda_interop.host_device_name(kind)
        if host is not None:
            raise TypeError(f"{name} is a host array (DLPack device {host}); pass it as a numpy "
                            f"array instead (np.asarray(...)), which the kernel copies")
        if kind not in (cuda_interop.KDL_CUDA, cuda_interop.KDL_CUDA_MANAGED):
            raise TypeError(f"{name} lives on DLPack device type {kind}, not a CUDA device")
        current_driver()
        view = cuda_interop.read_dlpack(obj, name)
        return DeviceArray(view.ptr, view.shape, view.dtype, owner=view.keepalive)
    raise TypeError(f"{name} of type {type(obj).__name__} is not a device array: it has neither "
                    f"__cuda_array_interface__ nor __dlpack__; pass a numpy array (copied) instead")


# ----------------------------------------------------------------------------- modules, launches
class Module:
    """PTX loaded into the current context (JIT-compiled by the driver for this device).

    Raises
    ------
    CudaError
        When loading fails; the message carries the driver JIT's error log.
    """

    def __init__(self, ptx):
        d = current_driver()
        image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        if not image.endswith(b"\0"):
            image += b"\0"  # the driver reads PTX as a NUL-terminated string
        size = 1 << 14
        err_log, info_log = bytearray(size), bytearray(size)
        J = d.CUjit_option
        opts = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        res = d.cuModuleLoadDataEx(image, len(opts), opts, [err_log, size, info_log, size])
        detail = err_log.split(b"\0", 1)[0].decode(errors="replace")
        self._handle = check_call("cuModuleLoadDataEx", res, detail=detail and f"JIT log:\n{detail}")
        self.info_log = info_log.split(b"\0", 1)[0].decode(errors="replace")
        self._functions: dict = {}
        self._fin = weakref.finalize(self, _unload, self._handle)
        self._fin.atexit = False

    def function(self, name: str) -> "Function":
        """The kernel (``.entry``) called ``name``."""
        f = self._functions.get(name)
        if f is None:
            d = current_driver()
            h = check_call(f"cuModuleGetFunction({name!r})",
                           d.cuModuleGetFunction(self._handle, name.encode()))
            f = self._functions[name] = Function(self, name, h)
        return f


def _unload(handle) -> None:
    try:
        current_driver().cuModuleUnload(handle)
    except Exception:  # noqa: BLE001 - finalizer
        pass


_SCALARS = {np.dtype(np.int8): ctypes.c_int8, np.dtype(np.uint8): ctypes.c_uint8,
            np.dtype(np.int16): ctypes.c_int16, np.dtype(np.uint16): ctypes.c_uint16,
            np.dtype(np.int32): ctypes.c_int32, np.dtype(np.uint32): ctypes.c_uint32,
            np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint64): ctypes.c_uint64,
            np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


def _param(a, i: int):
    """One kernel parameter as a ctypes value (kept alive by the caller until the launch)."""
    if isinstance(a, DeviceArray):
        return ctypes.c_uint64(a.ptr), a
    if isinstance(a, ctypes._SimpleCData):
        return a, None
    if isinstance(a, np.generic):
        ct = _SCALARS.get(a.dtype)
        if ct is None:
            raise TypeError(f"kernel argument {i}: numpy scalar of dtype {a.dtype} is not supported")
        return ct(a.item()), None
    if isinstance(a, (bool, int)):
        if not -(1 << 31) <= int(a) < (1 << 31):
            raise OverflowError(f"kernel argument {i}: {a} does not fit an i32 (pass np.int64)")
        return ctypes.c_int32(int(a)), None
    if isinstance(a, float):
        return ctypes.c_float(a), None
    if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__"):
        view = as_device_array(a, f"kernel argument {i}")
        return ctypes.c_uint64(view.ptr), view
    raise TypeError(f"kernel argument {i} of type {type(a).__name__} is not a DeviceArray, device "
                    f"array, int (i32), float (f32), numpy scalar or ctypes value")


def _dim3(v, what: str) -> tuple:
    t = (int(v),) if np.isscalar(v) else tuple(int(x) for x in v)
    if not 1 <= len(t) <= 3 or min(t) < 1:
        raise ValueError(f"{what} must be 1 to 3 positive extents, got {v!r}")
    return t + (1,) * (3 - len(t))


class Function:
    """A kernel of a :class:`Module`; :meth:`launch` runs it."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self._handle = module, name, handle
        self._dynamic_shared = 48 << 10  # what a launch may use without the opt-in

    def attribute(self, name: str) -> int:
        """A ``CU_FUNC_ATTRIBUTE_*`` value, e.g. ``attribute("NUM_REGS")``."""
        d = current_driver()
        a = getattr(d.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(check_call("cuFuncGetAttribute", d.cuFuncGetAttribute(a, self._handle)))

    def launch(self, grid, block, args, shared_bytes: int = 0, stream=None) -> None:
        """Launch on ``grid`` x ``block`` (1 to 3 extents each) with ``args``: DeviceArray (or any
        device array: passed as its u64 address), int (i32), float (f32), numpy scalars and ctypes
        values (their own type). ``shared_bytes`` of dynamic shared memory (above 48 KiB the
        function's limit is raised first). Asynchronous: errors of the kernel itself surface at the
        next synchronizing call."""
        d = current_driver()
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        packed = [_param(a, i) for i, a in enumerate(args)]
        values = [p[0] for p in packed]
        params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
        shared_bytes = int(shared_bytes)
        if shared_bytes > self._dynamic_shared:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check_call("cuFuncSetAttribute", d.cuFuncSetAttribute(self._handle, attr, shared_bytes))
            self._dynamic_shared = shared_bytes
        # kernelParams as the address of a void*[] (the binding's int form), kept alive here
        res = d.cuLaunchKernel(self._handle, *g, *b, shared_bytes, as_stream(d, stream),
                               ctypes.addressof(params) if values else 0, 0)
        check_call(f"cuLaunchKernel({self.name!r}, grid={g}, block={b}, shared={shared_bytes})", res)
        del packed  # the driver copied the parameters at launch


def time_function(fn_launch, number: int = 10, repeat: int = 3, warmup: int = 1,
                  stream=None) -> list:
    """Seconds per call of ``fn_launch()`` (which launches work on ``stream``, default the legacy
    default stream), measured with CUDA events: ``warmup`` calls, then ``repeat`` times the
    elapsed event time of ``number`` calls divided by ``number``."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
    d = current_driver()
    s = as_stream(d, stream)
    for _ in range(warmup):
        fn_launch()
    check_call("cuStreamSynchronize", d.cuStreamSynchronize(s))
    start = check_call("cuEventCreate", d.cuEventCreate(0))
    end = check_call("cuEventCreate", d.cuEventCreate(0))
    try:
        out = []
        for _ in range(repeat):
            check_call("cuEventRecord", d.cuEventRecord(start, s))
            for _ in range(number):
                fn_launch()
            check_call("cuEventRecord", d.cuEventRecord(end, s))
            check_call("cuEventSynchronize", d.cuEventSynchronize(end))
            ms = check_call("cuEventElapsedTime", d.cuEventElapsedTime(start, end))
            out.append(float(ms) * 1e-3 / number)
        return out
    finally:
        d.cuEventDestroy(start)
        d.cuEventDestroy(end)
