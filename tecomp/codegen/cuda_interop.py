"""Reading device arrays of other libraries: ``__cuda_array_interface__`` and DLPack.

Pure parsing, no driver calls: the functions here turn a producer's description of its memory into
``(pointer, shape, dtype)`` and say clearly what they cannot accept (host memory, strided views,
masks). :func:`tecomp.codegen.cuda_runtime.as_device_array` wraps the result as a non-owning
``DeviceArray``.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

__all__ = ["ArrayView", "parse_cuda_array_interface", "dlpack_device", "read_dlpack",
           "host_device_name", "KDL_CPU", "KDL_CUDA", "KDL_CUDA_HOST", "KDL_CUDA_MANAGED"]

# DLPack device types (dlpack.h, DLDeviceType)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_HOST_TYPES = {KDL_CPU: "kDLCPU", KDL_CUDA_HOST: "kDLCUDAHost"}


class ArrayView:
    """What a producer says of its array: ``ptr`` (device address), ``shape``, ``dtype``,
    ``readonly``, ``stream`` (CAI v3: the stream to synchronize with, or None) and ``keepalive``
    (an object that must outlive every use of the memory)."""

    __slots__ = ("ptr", "shape", "dtype", "readonly", "stream", "keepalive")

    def __init__(self, ptr, shape, dtype, readonly=False, stream=None, keepalive=None):
        self.ptr, self.shape, self.dtype = int(ptr), tuple(int(s) for s in shape), np.dtype(dtype)
        self.readonly, self.stream, self.keepalive = bool(readonly), stream, keepalive


def _c_contiguous(shape, strides, itemsize) -> bool:
    if any(s == 0 for s in shape):
        return True
    expect = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expect:  # the stride of an extent-1 axis is never used
            return False
        expect *= extent
    return True


def parse_cuda_array_interface(iface, what: str = "array") -> ArrayView:
    """Validate a ``__cuda_array_interface__`` dict (versions 0-3) and return its :class:`ArrayView`.

    Raises
    ------
    TypeError, ValueError
        Naming the problem: a missing key, a mask, a non-native byte order, a non-C-contiguous
        layout, a stream of 0 (which the protocol forbids as ambiguous).
    """
    if not isinstance(iface, dict):
        raise TypeError(f"{what}: __cuda_array_interface__ must be a dict, got {type(iface).__name__}")
    missing = [k for k in ("shape", "typestr", "data", "version") if k not in iface]
    if missing:
        raise ValueError(f"{what}: __cuda_array_interface__ lacks {', '.join(missing)}")
    version = int(iface["version"])
    if not 0 <= version <= 3:
        raise ValueError(f"{what}: __cuda_array_interface__ version {version} is not supported (0-3)")
    shape = tuple(int(s) for s in iface["shape"])
    try:
        dtype = np.dtype(iface["typestr"])
    except TypeError as e:
        raise ValueError(f"{what}: typestr {iface['typestr']!r} is not a numpy type string") from e
    if dtype.fields is not None or dtype.hasobject or dtype.kind not in "biuf":
        raise ValueError(f"{what}: dtype {dtype} is not supported (bool, integer or float only)")
    if dtype.byteorder == ">" or (dtype.byteorder == "<" and not np.little_endian):
        raise ValueError(f"{what}: typestr {iface['typestr']!r} is not in native byte order")
    data = iface["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ValueError(f"{what}: 'data' must be (pointer, read_only), got {data!r}")
    ptr, readonly = int(data[0] or 0), bool(data[1])
    if iface.get("mask") is not None:
        raise ValueError(f"{what}: masked arrays are not supported (__cuda_array_interface__ mask)")
    strides = iface.get("strides")
    if strides is not None:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape) or not _c_contiguous(shape, strides, dtype.itemsize):
            raise ValueError(f"{what}: strides {strides} (bytes) for shape {shape} and "
                             f"{dtype.itemsize}-byte elements are not C-contiguous; make a "
                             f"contiguous copy first (e.g. .contiguous() / cupy.ascontiguousarray)")
    if int(np.prod(shape, dtype=np.int64)) and not ptr:
        raise ValueError(f"{what}: a null data pointer for a non-empty array")
    stream = iface.get("stream") if version >= 3 else None
    if stream is not None:
        stream = int(stream)
        if stream == 0:
            raise ValueError(f"{what}: stream 0 is not allowed by __cuda_array_interface__ v3 "
                             f"(use 1 for the legacy default stream, 2 for per-thread)")
    return ArrayView(ptr, shape, dtype, readonly, stream)


# ----------------------------------------------------------------------------- DLPack (dlpack.h)
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

_capi = ctypes.pythonapi
_capi.PyCapsule_IsValid.restype = ctypes.c_int
_capi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_SetName.restype = ctypes.c_int
_capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_NAME, _USED = b"dltensor", b"used_dltensor"  # module constants: the capsule keeps the pointer
_DL_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}   # kDLInt, kDLUInt, kDLFloat, kDLBool


def _call_deleter(addr: int) -> None:
    managed = _DLManagedTensor.from_address(addr)
    if managed.deleter:
        managed.deleter(ctypes.cast(addr, ctypes.POINTER(_DLManagedTensor)))


class _DLPackOwner:
    """Holds a consumed DLPack tensor; calls its deleter when garbage collected."""

    def __init__(self, addr: int, source):
        self.source = source  # the producer object too, for good measure
        self._fin = weakref.finalize(self, _call_deleter, addr)


def dlpack_device(obj) -> tuple:
    """``(device_type, device_id)`` from ``obj.__dlpack_device__()``."""
    dev = obj.__dlpack_device__()
    return int(dev[0]), int(dev[1])


def read_dlpack(obj, what: str = "array", stream: int | None = 1) -> ArrayView:
    """Consume ``obj.__dlpack__()`` (asking the producer to order its work before ``stream``:
    1 is the legacy default stream, where tecomp launches) and return its :class:`ArrayView`; the
    view's ``keepalive`` calls the producer's deleter when collected.

    Raises
    ------
    TypeError, ValueError
        When the capsule is not a DLPack tensor or the tensor is not C-contiguous, has vector
        lanes or an unsupported dtype.
    """
    if stream is None:  # host producers (numpy) refuse any stream
        capsule = obj.__dlpack__()
    else:
        try:
            capsule = obj.__dlpack__(stream=stream)
        except TypeError:  # producers of older protocol versions take no stream
            capsule = obj.__dlpack__()
    if not _capi.PyCapsule_IsValid(capsule, _NAME):
        raise TypeError(f"{what}: __dlpack__ did not return an unused 'dltensor' capsule")
    addr = _capi.PyCapsule_GetPointer(capsule, _NAME)
    t = _DLManagedTensor.from_address(addr).dl_tensor
    # from here on the deleter is ours to call (the protocol's consumer rule)
    if _capi.PyCapsule_SetName(capsule, _USED) != 0:
        raise RuntimeError(f"{what}: could not mark the DLPack capsule as used")
    owner = _DLPackOwner(addr, obj)
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    if lanes != 1 or code not in _DL_KINDS:
        raise ValueError(f"{what}: DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is not "
                         f"supported (bool, integer or float scalars only)")
    dtype = np.dtype(f"{_DL_KINDS[code]}{bits // 8}") if code != 6 else np.dtype(np.bool_)
    if t.strides:  # NULL strides mean C-contiguous; strides count elements, not bytes
        strides = tuple(int(t.strides[i]) * dtype.itemsize for i in range(ndim))
        if not _c_contiguous(shape, strides, dtype.itemsize):
            raise ValueError(f"{what}: DLPack strides {strides} (bytes) for shape {shape} are not "
                             f"C-contiguous; make a contiguous copy first")
    ptr = int(t.data or 0) + int(t.byte_offset)
    return ArrayView(ptr, shape, dtype, False, None, owner)


def host_device_name(device_type: int) -> str | None:
    """The DLPack name of a host device type, or None for a device type."""
    return _HOST_TYPES.get(device_type)
