"""The CPU thread pool that runs parallel loops, written in LLVM IR and JIT-compiled once per process.

No C compiler is needed: the runtime below is LLVM IR text, compiled with the same MCJIT as the
kernels. Its entry point ``void tecomp_parallel_for(ptr body, ptr closure, i64 n)`` is registered as
a process symbol (``llvm.add_symbol``), so kernel modules simply declare and call it. It splits
``[0, n)`` into about :data:`BALANCE_GRAIN` contiguous chunks per thread, which the threads claim
in order from a shared counter, wakes one worker per thread but the first, runs chunks itself and
returns when every chunk is done; ``body(begin, end, closure)`` runs one chunk. (With grain 0,
``parallel.set_balance(0)``, each thread runs one equal chunk.) Claiming matters on a shared host:
a core whose sibling hyperthread is busy, or a vCPU the host preempts, runs its thread slower,
and with one fixed chunk per thread the whole launch waits for it; with a 37%-duty busy loop
beside a 2-thread launch, grain 8-16 ran ResNet-50 layers 5-15% faster than equal chunks, and
level with them on a quiet host (``docs/search_notes.md``).

The balanced entry ``void tecomp_parallel_for_dynamic(ptr body, ptr closure, i64 n, i64 chunk)``
hands out ``chunk`` iterations at a time from a shared atomic counter instead: a thread that got
short iterations (empty sparse rows) takes the next chunk while another still runs a long one (a
dense row), which equal static chunks cannot do. Both entries share the launch code; the static
path only gains one well-predicted branch per worker wake-up.

The same module holds the scratch-block cache (:mod:`.scratch_ir`): ``tecomp_scratch_alloc`` and
``tecomp_scratch_free``, which a kernel calls for its intermediate buffers of a constant size, so
that calling it again reuses the pages of the last call instead of faulting in fresh ones.

Design:

- Workers are native threads (``pthread_create`` from the JIT code, started lazily by the first
  launch that needs them), one per core (``os.sched_getaffinity``) less the calling thread; they
  never touch Python, so the kernel call (ctypes, GIL released) is all native.
- Each worker waits on its own cache line: a ``go`` counter the launcher increments. Waiting spins
  (``pause``, with a ``sched_yield`` every few microseconds so that an oversubscribed core still
  runs the thread that has work) for :data:`SPIN_SECONDS`, then sleeps on a futex; a ``sleeping``
  flag tells the waker whether the futex wake syscall is needed (Dekker-style, sequentially
  consistent on both sides). The launcher waits on the ``remaining`` counter the same way.
- Only the workers that get a chunk are woken, and the launcher waits for all of them, so the job
  descriptor is never overwritten while a worker can still read it.
- One launch at a time: a launch takes a ``busy`` flag with compare-and-swap; a launch that finds it
  taken (another Python thread's kernel, or a nested launch from inside a body) runs its whole range
  serially instead of waiting, so the pool cannot deadlock.
- Shutdown joins the workers (also run by ``atexit``, since the JIT code must not be freed under
  running threads); a forked child resets the pool state and starts fresh workers.

The settings (``set_num_threads``, ...) are in :mod:`.parallel`.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import platform
import threading

import llvmlite.binding as llvm

from .llvm_jit import LOCK, compile_object, jit, load_object, triple_and_layout
from .scratch_ir import IR as _SCRATCH_IR
from .threadpool_ir import IR as _IR

__all__ = ["ENTRY", "DYNAMIC_ENTRY", "MAX_THREADS", "SPIN_SECONDS", "BALANCE_GRAIN", "SYMBOLS",
           "runtime", "loaded",
           "object_code", "default_num_threads", "SCRATCH_ALLOC", "SCRATCH_FREE", "SCRATCH_SLOTS",
           "SCRATCH_CAP", "KERNEL_SYMBOLS", "has_runtime", "calls_runtime"]

#: the symbol kernels call
ENTRY = "tecomp_parallel_for"
#: the symbol kernels call for a loop with dynamic (balanced) chunking
DYNAMIC_ENTRY = "tecomp_parallel_for_dynamic"
#: most threads a launch uses (the caller included)
MAX_THREADS = 256
#: how long a waiting worker (or launcher) spins before it sleeps on a futex
SPIN_SECONDS = 1e-3
#: chunks per thread of a static parallel loop, claimed in order (0: one equal chunk per thread)
BALANCE_GRAIN = 8
#: the symbols kernels call for an intermediate buffer of a constant size (:mod:`.scratch_ir`)
SCRATCH_ALLOC, SCRATCH_FREE = "tecomp_scratch_alloc", "tecomp_scratch_free"
#: blocks the scratch cache holds at most, and its default cap in bytes
SCRATCH_SLOTS, SCRATCH_CAP = 256, 512 << 20
#: the functions the runtime defines (the entries kernels call, and the pool's controls)
SYMBOLS = (ENTRY, DYNAMIC_ENTRY, "tecomp_pool_set", "tecomp_pool_stats", "tecomp_pool_shutdown",
           "tecomp_pool_after_fork", SCRATCH_ALLOC, SCRATCH_FREE, "tecomp_scratch_set",
           "tecomp_scratch_stats")
#: the symbols a kernel module may call in the runtime
KERNEL_SYMBOLS = (ENTRY, DYNAMIC_ENTRY, SCRATCH_ALLOC, SCRATCH_FREE)
#: optimization level the runtime is compiled at
_OPT = 2

# futex syscall numbers and the spin-wait hint instruction per architecture
_ARCH = {"x86_64": (202, "pause"), "amd64": (202, "pause"), "aarch64": (98, "yield"),
         "arm64": (98, "yield"), "riscv64": (98, ""), "ppc64le": (221, "or 27,27,27"),
         "s390x": (238, "")}



def _require() -> None:
    if not has_runtime():
        raise NotImplementedError(f"parallel loops: no thread pool for architecture "
                                  f"{platform.machine()!r}")


def _source() -> str:
    """The runtime's LLVM IR for this host."""
    _require()
    sys_futex, pause = _ARCH[platform.machine().lower()]
    triple, layout = triple_and_layout()
    return (f'target triple = "{triple}"\ntarget datalayout = "{layout}"\n'
            + _IR.format(MAXT=MAX_THREADS, GRAIN=BALANCE_GRAIN, SYS_FUTEX=sys_futex, PAUSE=pause,
                         ENTRY=ENTRY, DYNAMIC_ENTRY=DYNAMIC_ENTRY)
            + _SCRATCH_IR.format(SLOTS=SCRATCH_SLOTS, CAP=SCRATCH_CAP, PAUSE=pause))


def calls_runtime(imports) -> bool:
    """Whether a kernel importing the symbols ``imports`` calls the runtime (parallel loops,
    scratch buffers): its export must carry the runtime object, its load must register it."""
    return not set(imports).isdisjoint(KERNEL_SYMBOLS)


def has_runtime() -> bool:
    """Whether this architecture has the runtime (thread pool and scratch cache). Elsewhere a
    kernel with parallel loops cannot be built, and a kernel's intermediate buffers come from
    ``aligned_alloc`` on every call."""
    return platform.machine().lower() in _ARCH


_OBJECT: bytes | None = None


def object_code() -> bytes:
    """The runtime as a relocatable object for this host (compiled once per process, as the JIT
    would compile it), defining :data:`SYMBOLS`; ``runtime(obj)`` in another process loads it
    without compiling. Used by :mod:`tecomp.deploy`."""
    global _OBJECT
    if _OBJECT is None:
        with LOCK:
            if _OBJECT is None:
                _OBJECT = compile_object(_source(), _OPT)[1]
    return _OBJECT


class _Runtime:
    """The JIT-compiled (or loaded) pool: its engine (kept alive for the process) and ctypes entry
    points."""

    def __init__(self, obj: bytes | None = None):
        if obj is None:
            self.engine = jit(_source(), ENTRY, _OPT)[1]
        else:
            self.engine = load_object(obj, SYMBOLS)[0]
        self.from_object = obj is not None
        fn = self.engine.get_function_address
        self.set = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int64)(fn("tecomp_pool_set"))
        self.stats = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int32)(fn("tecomp_pool_stats"))
        # absent from the runtime object of an export made before static loops were balanced
        grain = fn("tecomp_pool_set_grain")
        self.set_grain = ctypes.CFUNCTYPE(None, ctypes.c_int64)(grain) if grain else None
        self.shutdown = ctypes.CFUNCTYPE(None, ctypes.c_int32)(fn("tecomp_pool_shutdown"))
        self.after_fork = ctypes.CFUNCTYPE(None)(fn("tecomp_pool_after_fork"))
        self.scratch_set = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
            fn("tecomp_scratch_set"))
        self.scratch_stats = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int32)(
            fn("tecomp_scratch_stats"))
        self.kernel_addresses = {s: fn(s) for s in KERNEL_SYMBOLS}
        self.threads = default_num_threads()
        self.spin = SPIN_SECONDS
        self.grain = BALANCE_GRAIN if self.set_grain else 0
        self.push()

    def push(self) -> None:
        self.set(self.threads, int(self.spin * 1e9))
        if self.set_grain:
            self.set_grain(self.grain)


_RT: _Runtime | None = None
_RT_LOCK = threading.Lock()


def default_num_threads() -> int:
    """Threads a parallel loop uses by default: the cores this process may run on
    (``os.sched_getaffinity``), at most :data:`MAX_THREADS`. ``set_num_threads`` changes it."""
    if hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def runtime(obj: bytes | None = None) -> _Runtime:
    """The pool runtime, JIT-compiled on first use; registers :data:`ENTRY` as a process symbol so
    that kernel modules compiled (or loaded) afterwards resolve their calls to it.

    Parameters
    ----------
    obj : bytes, optional
        The runtime's object code (:func:`object_code`, e.g. from an export): when the runtime is
        not yet initialized in this process it is loaded from this instead of compiled. An already
        initialized runtime (compiled or loaded) is always reused: there is one pool per process.

    Raises
    ------
    NotImplementedError
        On an architecture whose futex syscall number is not known here.
    """
    global _RT
    if _RT is not None:
        return _RT
    with LOCK, _RT_LOCK:
        if _RT is None:
            _require()
            rt = _Runtime(obj)
            for name, addr in rt.kernel_addresses.items():
                llvm.add_symbol(name, addr)
            atexit.register(_at_exit)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork)
            _RT = rt
    return _RT


def loaded():
    """The pool runtime if it has been JIT-compiled in this process, else None."""
    return _RT


def _at_exit() -> None:
    # the JIT code must not be freed under running workers: join them, and start no more
    if _RT is not None:
        _RT.shutdown(1)


def _after_fork() -> None:
    if _RT is not None:
        _RT.after_fork()
