"""The CUDA driver through cuda-python: loading, errors, lazy thread-safe context, device facts.

Used by :mod:`.cuda_runtime` (memory, modules, launches, timing), which re-exports the public
names. Every driver call returns ``(CUresult, *values)``; :func:`check_call` checks each one and raises
:class:`CudaError` naming the call, the error's name and the driver's description. The first use
runs ``cuInit``, retains device 0's primary context (the one CuPy and torch share) and makes it
current; each further thread makes it current on its first use.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["CudaUnavailableError", "CudaError", "available", "require", "probe", "device",
           "Device", "synchronize", "check_call", "current_driver", "as_stream"]

_STICKY = {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
           "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
           "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
           "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED"}


class CudaUnavailableError(RuntimeError):
    """CUDA cannot be used in this process: cuda-python is missing, the driver (libcuda) is not
    found or fails to initialize, or there is no device."""


class CudaError(RuntimeError):
    """A driver call failed. ``call`` is the function's name, ``code`` the CUresult value, ``name``
    its enum name; ``sticky`` is True for errors that leave the context unusable (a faulting
    kernel): the process must be restarted to use the GPU again."""

    def __init__(self, call: str, code: int, name: str, text: str = "", detail: str = ""):
        self.call, self.code, self.name, self.text, self.detail = call, int(code), name, text, detail
        msg = f"{call} failed: {name} ({int(code)})" + (f": {text}" if text else "")
        super().__init__(msg + (f"\n{detail.strip()}" if detail.strip() else ""))

    @property
    def sticky(self) -> bool:
        return self.name in _STICKY


class _State:
    lock = threading.RLock()
    tls = threading.local()
    driver = None
    unavailable: CudaUnavailableError | None = None
    ordinal = None
    ctx = None
    generation = 0   # bumped when device(n) switches contexts: threads re-set theirs
    info = None


def _import_driver():
    try:
        from cuda.bindings import driver  # cuda-python >= 12.8 (cuda-bindings)
    except ImportError:
        try:
            from cuda import cuda as driver  # older cuda-python
        except ImportError:
            raise CudaUnavailableError(
                "cuda-python is not installed: pip install cuda-python (or tecomp[cuda]) to run "
                "kernels on an NVIDIA GPU; kernel.emulate() runs them on the CPU") from None
    return driver


def _error_text(d, err) -> tuple:
    name = getattr(err, "name", f"CUresult {int(err)}")
    text = ""
    try:  # the driver's own words; these two need libcuda loaded, so they may fail themselves
        e2, n = d.cuGetErrorName(err)
        if int(e2) == 0 and n:
            name = n.decode() if isinstance(n, bytes) else str(n)
        e2, s = d.cuGetErrorString(err)
        if int(e2) == 0 and s:
            text = s.decode() if isinstance(s, bytes) else str(s)
    except Exception:  # noqa: BLE001 - the enum name is still a good message
        pass
    return name, text


def check_call(name: str, result, detail: str = ""):
    """Check one driver call's ``(err, *values)``; return the values (one value bare)."""
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if int(err) != 0:
        raise CudaError(name, int(err), *_error_text(_State.driver, err), detail=detail)
    return None if not values else values[0] if len(values) == 1 else values


def _driver_init() -> int:
    """Import cuda-python and run cuInit; the number of devices. Creates no context. A failure is
    a :class:`CudaUnavailableError`, remembered for the life of the process."""
    if _State.unavailable is not None:
        raise _State.unavailable
    try:
        d = _State.driver = _State.driver or _import_driver()
        try:
            res = d.cuInit(0)
        except Exception as e:  # noqa: BLE001 - libcuda missing: the binding raises on loading it
            raise CudaUnavailableError(f"no NVIDIA driver: libcuda could not be loaded ({e})") from None
        if int(res[0]) != 0:
            name, text = _error_text(d, res[0])
            what = "no CUDA device" if name == "CUDA_ERROR_NO_DEVICE" else "the CUDA driver failed"
            raise CudaUnavailableError(f"{what}: cuInit returned {name}: {text}")
        count = check_call("cuDeviceGetCount", d.cuDeviceGetCount())
        if not count:
            raise CudaUnavailableError("no CUDA device: the driver reports 0 devices")
    except CudaUnavailableError as e:
        _State.unavailable = e
        raise
    return int(count)


def probe(ordinal: int = 0) -> str:
    """``"sm_XY"`` of device ``ordinal``, without creating a context (cheap: a parent process
    checks this before starting GPU workers). Raises :class:`CudaUnavailableError`."""
    with _State.lock:
        count = _driver_init()
        if not 0 <= ordinal < count:
            raise CudaUnavailableError(f"no CUDA device {ordinal}: this machine has {count}")
        d = _State.driver
        dev = check_call("cuDeviceGet", d.cuDeviceGet(ordinal))
        A = d.CUdevice_attribute
        cc = [check_call("cuDeviceGetAttribute", d.cuDeviceGetAttribute(getattr(A, a), dev))
              for a in ("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
                        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")]
    return "sm_%d%d" % tuple(int(c) for c in cc)


def _init(ordinal: int) -> None:
    """Make ``ordinal``'s primary context this process's (under the lock)."""
    count = _driver_init()
    d = _State.driver
    if not 0 <= ordinal < count:
        raise ValueError(f"device {ordinal} does not exist: this machine has {count} CUDA device(s)")
    dev = check_call("cuDeviceGet", d.cuDeviceGet(ordinal))
    ctx = check_call("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(dev))
    check_call("cuCtxSetCurrent", d.cuCtxSetCurrent(ctx))
    A = d.CUdevice_attribute

    def attr(a):
        return int(check_call("cuDeviceGetAttribute", d.cuDeviceGetAttribute(getattr(A, a), dev)))

    raw = check_call("cuDeviceGetName", d.cuDeviceGetName(256, dev))
    name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    _State.info = Device(ordinal, name.strip(),
                         (attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                          attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
                         attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                         attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
                         attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
                         attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"))
    _State.ordinal, _State.ctx = ordinal, ctx
    _State.generation += 1


def current_driver():
    """The driver module, with this process's context current on the calling thread."""
    tls = _State.tls
    if getattr(tls, "generation", -1) == _State.generation and _State.ctx is not None:
        return _State.driver
    with _State.lock:
        if _State.ctx is None:
            _init(0)
        check_call("cuCtxSetCurrent", _State.driver.cuCtxSetCurrent(_State.ctx))
        tls.generation = _State.generation
    return _State.driver


def available() -> bool:
    """True when kernels can run here (cuda-python, a driver and a device)."""
    try:
        current_driver()
    except (CudaUnavailableError, CudaError):
        return False
    return True


def require() -> None:
    """Raise :class:`CudaUnavailableError` saying why CUDA cannot be used, if it cannot."""
    try:
        current_driver()
    except CudaError as e:
        raise CudaUnavailableError(f"CUDA could not be initialized: {e}") from e


@dataclass(frozen=True)
class Device:
    """The device kernels run on: ``ordinal``, ``name``, ``compute_capability`` (major, minor),
    ``multiprocessors``, ``max_threads_per_block``, ``max_shared_per_block`` (static limit, bytes)
    and ``max_shared_per_block_optin`` (with the dynamic-shared-memory opt-in)."""
    ordinal: int
    name: str
    compute_capability: tuple
    multiprocessors: int
    max_threads_per_block: int
    max_shared_per_block: int
    max_shared_per_block_optin: int

    @property
    def arch(self) -> str:
        """``"sm_XY"``, as the ``cuda`` target names it."""
        return "sm_%d%d" % self.compute_capability


def device(n: int | None = None) -> Device:
    """The current device's description; ``device(n)`` first makes device ``n`` current (memory,
    modules and functions made before belong to the previous device)."""
    current_driver()
    if n is not None and n != _State.ordinal:
        with _State.lock:
            _init(int(n))
        current_driver()
    return _State.info


def synchronize() -> None:
    """Wait for all work on the device (and surface errors of earlier launches)."""
    d = current_driver()
    check_call("cuCtxSynchronize", d.cuCtxSynchronize())


def as_stream(d, stream):
    """``stream`` (None: the default stream, an int handle, or a ``CUstream``) as a ``CUstream``."""
    if stream is None:
        return d.CUstream(0)
    if isinstance(stream, int):
        return d.CUstream(stream)
    return stream
