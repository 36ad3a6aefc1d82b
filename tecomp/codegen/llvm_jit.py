"""LLVM for the host CPU: initialization, host detection, target machine, optimization and MCJIT.

Everything that touches LLVM's process-wide state runs under :data:`LOCK` (LLVM's global context
and MCJIT creation are not thread-safe); callers that emit IR and then JIT it hold the lock across
both steps.
"""
from __future__ import annotations

import ctypes.util
import threading

import llvmlite.binding as llvm

__all__ = ["LOCK", "ensure_init", "host_cpu", "target_machine", "triple_and_layout", "jit",
           "assembly", "compile_object", "load_object", "optimize_module", "optimized_module"]

LOCK = threading.RLock()
_INITIALIZED = False
_HOST: tuple | None = None
_LAYOUT: tuple | None = None  # (triple, data layout)


def ensure_init() -> None:
    """Initialize LLVM's native target once, and load the C runtime libraries for the JIT."""
    global _INITIALIZED
    if _INITIALIZED:
        return
    with LOCK:
        if _INITIALIZED:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        # MCJIT resolves external symbols (libm calls that intrinsics lower to, memset/memcpy formed
        # by loop idiom recognition, malloc/free, half-precision helpers) only in libraries loaded
        # permanently; the process itself is not searched.
        for lib in ("m", "c", "gcc_s"):
            name = ctypes.util.find_library(lib)
            if name:
                try:
                    llvm.load_library_permanently(name)
                except RuntimeError:
                    pass
        _INITIALIZED = True


def host_cpu() -> tuple:
    """``(cpu name, feature string)`` of the host, as LLVM detects them."""
    global _HOST
    ensure_init()
    if _HOST is None:
        _HOST = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return _HOST


def target_machine(opt_level: int = 3):
    """A JIT target machine for the host CPU and its features."""
    cpu, features = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=opt_level,
                                        codemodel="jitdefault", jit=True)


def triple_and_layout() -> tuple:
    """``(target triple, data layout string)`` of the host target machine."""
    global _LAYOUT
    if _LAYOUT is None:
        tm = target_machine()
        _LAYOUT = (tm.triple, str(tm.target_data))
    return _LAYOUT


def optimize_module(mod, tm, opt_level: int, off: tuple = ()) -> None:
    """Run LLVM's new-pass-manager pipeline at ``opt_level`` on ``mod`` in place; ``off`` names
    tuning options (``"slp_vectorization"``, ...) to leave out."""
    if opt_level == 0:
        return
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    if opt_level >= 2:
        for opt in ("loop_vectorization", "slp_vectorization", "loop_interleaving",
                    "loop_unrolling"):
            setattr(pto, opt, opt not in off)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


#: pipelines tried in turn while LLVM's optimizer leaves a module that does not verify: LLVM 22's
#: SLP vectorizer, after loop vectorization and unrolling, can emit a shuffle that does not
#: dominate its use (a random schedule of a 9 x 11 matmul's epilogue, vectorized across rows),
#: and machine code generation then aborts the process
_FALLBACKS = ((), ("slp_vectorization",), ("slp_vectorization", "loop_vectorization"))


def optimized_module(text: str, tm, opt_level: int):
    """Parse and verify the IR ``text`` and optimize it for ``tm``; the module, verified.

    Raises
    ------
    RuntimeError
        ``text`` does not verify, or no pipeline of :data:`_FALLBACKS` gives a module that does.
    """
    err = None
    for k, off in enumerate(_FALLBACKS):
        mod = llvm.parse_assembly(text)
        if k == 0:
            mod.verify()
        optimize_module(mod, tm, opt_level, off)
        try:
            mod.verify()
            return mod
        except RuntimeError as e:
            err = e
    raise RuntimeError(f"LLVM's optimizer left a module that does not verify: {err}")


def jit(text: str, symbol: str, opt_level: int) -> tuple:
    """Parse and verify the IR ``text``, optimize it for the host and JIT it with MCJIT.

    Returns ``(optimized IR text, engine, address of symbol)``; the code lives as long as the engine.
    """
    with LOCK:
        ensure_init()
        tm = target_machine(opt_level)
        mod = optimized_module(text, tm, opt_level)
        optimized = str(mod)
        engine = llvm.create_mcjit_compiler(mod, tm)  # the engine takes ownership of tm and mod
        engine.finalize_object()
        address = engine.get_function_address(symbol)
        if not address:
            raise RuntimeError(f"JIT produced no address for '{symbol}'")
    return optimized, engine, address


def assembly(text: str) -> str:
    """The host assembly of the LLVM IR ``text``."""
    with LOCK:
        return target_machine().emit_assembly(llvm.parse_assembly(text))


def compile_object(text: str, opt_level: int) -> tuple:
    """What :func:`jit` does up to machine code, written as a relocatable object instead of loaded:
    parse and verify ``text``, optimize it for the host at ``opt_level`` and emit it with the same
    target machine (JIT code model) that :func:`jit` hands to MCJIT, so that the object loaded by
    :func:`load_object` runs the same instructions as the JIT-compiled module.

    Returns ``(optimized IR text, object file bytes)``.
    """
    with LOCK:
        ensure_init()
        tm = target_machine(opt_level)
        mod = optimized_module(text, tm, opt_level)
        optimized = str(mod)
        obj = tm.emit_object(mod)
    return optimized, bytes(obj)


def load_object(obj: bytes, symbols) -> tuple:
    """Load the relocatable object ``obj`` (from :func:`compile_object`) into a new MCJIT engine
    without compiling anything: the engine is made over an empty module and the object is linked
    into it (its undefined symbols resolve to the process's: libc/libm, and symbols registered with
    ``llvm.add_symbol`` such as the thread pool's entry).

    Every undefined symbol of ``obj`` must resolve (LLVM aborts the process otherwise): callers
    check them first (``llvm.address_of_symbol``).

    Returns ``(engine, {symbol: address})`` for the defined ``symbols``; the code lives as long as
    the engine.
    """
    with LOCK:
        ensure_init()
        empty = llvm.parse_assembly("")  # no functions: nothing for MCJIT to compile
        triple, layout = triple_and_layout()
        empty.triple, empty.data_layout = triple, layout
        engine = llvm.create_mcjit_compiler(empty, target_machine(0))
        objref = llvm.ObjectFileRef.from_data(bytes(obj))
        engine.add_object_file(objref)
        engine.finalize_object()
        engine._tecomp_object = (obj, objref)  # keep the buffers alive with the code
        addresses = {}
        for name in symbols:
            addr = engine.get_function_address(name)
            if not addr:
                raise RuntimeError(f"the object file defines no symbol '{name}'")
            addresses[name] = addr
    return engine, addresses
