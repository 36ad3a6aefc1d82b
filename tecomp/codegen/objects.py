"""CPU kernels as relocatable object code: written once (export), loaded without compiling.

:func:`compile_object` runs the same pipeline as :func:`~.llvm_cpu.compile_cpu` (emit, optimize
for the host at ``opt_level``) and stops at machine code, written as an ELF/Mach-O object with the
target machine the JIT uses (the JIT code model), so the object runs the instructions the
JIT-compiled kernel runs. :func:`load_kernel` links such an object into an MCJIT engine made over an
empty module (no LLVM IR is parsed, optimized or compiled) and gives a :class:`LoadedCPU`, which
the :class:`~tecomp.build.Kernel` wrapper calls like any compiled kernel.

The host checks that protect a load (:func:`host_info`, :func:`missing_features`,
:func:`unresolved`) are here too; :mod:`tecomp.deploy` uses them.
"""
from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass

import llvmlite.binding as llvm

from ..ir.loop import PrimFunc
from . import llvm_jit
from .elf import is_elf, object_imports, read_symbols
from .llvm_cpu import CompiledCPU, emit_cpu
from .llvm_jit import LOCK, ensure_init, host_cpu, load_object, triple_and_layout
from .threadpool import DYNAMIC_ENTRY, ENTRY

__all__ = ["KernelObject", "compile_object", "LoadedCPU", "load_kernel", "host_info",
           "missing_features", "unresolved", "imports_of"]

_DECLARE = re.compile(r'^declare\b[^@\n]*@("?)([^"(\s]+)\1\s*\(', re.M)


@dataclass
class KernelObject:
    """One kernel compiled to object code.

    Attributes
    ----------
    symbol : str
        The kernel's function: ``void symbol(ptr p0, ptr p1, ...)``, one pointer per parameter.
    source : str
        The optimized LLVM IR the object was generated from.
    source_unoptimized : str
        The emitted LLVM IR.
    object : bytes
        The relocatable object.
    imports : list of str
        Functions the object calls outside itself (libc/libm, the thread pool's entry).
    """
    symbol: str
    source: str
    source_unoptimized: str
    object: bytes
    imports: list

    @property
    def parallel(self) -> bool:
        """Whether the kernel runs parallel loops on the thread pool."""
        return ENTRY in self.imports or DYNAMIC_ENTRY in self.imports


def imports_of(ir_text: str) -> list:
    """The non-intrinsic functions an LLVM IR module declares (calls out of the module)."""
    return sorted({m.group(2) for m in _DECLARE.finditer(ir_text)
                   if not m.group(2).startswith("llvm.")})


def compile_object(func: PrimFunc, opt_level: int = 3) -> KernelObject:
    """Translate ``func`` to LLVM IR, optimize it for the host and emit its object code (what
    :func:`~.llvm_cpu.compile_cpu` JIT-compiles, written out instead of loaded)."""
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level}")
    with LOCK:
        em = emit_cpu(func)
        text = str(em.module)
        optimized, obj = llvm_jit.compile_object(text, opt_level)
    return KernelObject(em.symbol, optimized, text, obj, object_imports(obj, imports_of(optimized)))


class LoadedCPU(CompiledCPU):
    """A kernel loaded from object code. ``source`` (the optimized LLVM IR) and ``assembly()``
    come from the export's text files, read when first asked for; nothing is recompiled for them.
    """

    def __init__(self, func: PrimFunc, symbol: str, engine, address: int, source=None,
                 assembly=None):
        self._source_src, self._asm_src = source, assembly
        self._source_text = self._asm_text = None
        super().__init__(func, symbol, None, None, engine, address)

    @staticmethod
    def _text(src):
        return src() if callable(src) else src

    @property
    def source(self) -> str:
        if self._source_text is None:
            text = self._text(self._source_src)
            self._source_text = "" if text is None else text
        return self._source_text

    @source.setter
    def source(self, value):
        if value is not None:
            self._source_text = value

    @property
    def source_unoptimized(self):
        return None  # not kept in an export

    @source_unoptimized.setter
    def source_unoptimized(self, value):
        pass

    def assembly(self) -> str:
        if self._asm_text is None:
            text = self._text(self._asm_src)
            if text is None:
                raise RuntimeError(f"{self.func.name}: the export kept no assembly text (it was "
                                   f"written without it); its LLVM IR is source()")
            self._asm_text = text
        return self._asm_text

    def __repr__(self):
        return f"LoadedCPU({self.func.name!r})"


def load_kernel(func: PrimFunc, symbol: str, obj: bytes, source=None, assembly=None) -> LoadedCPU:
    """Link the object code ``obj`` of ``func`` (from :func:`compile_object`) into a new engine,
    compiling nothing. ``source`` / ``assembly``: texts, or callables giving them on demand.

    The caller makes sure every import resolves first (:func:`unresolved`): a kernel with parallel
    loops or scratch buffers needs the runtime registered (``threadpool.runtime(obj)``).

    An ELF object's structure is checked here too (ValueError), whoever called: LLVM's linker
    trusts it and kills the process on a malformed one (:func:`~.elf.read_symbols`)."""
    if is_elf(obj) or sys.platform.startswith("linux"):
        read_symbols(obj, f"{func.name}: object code")
    engine, addrs = load_object(obj, [symbol])
    return LoadedCPU(func, symbol, engine, addrs[symbol], source, assembly)


def host_info() -> dict:
    """What an object compiled on this host depends on: machine, triple, data layout, CPU name and
    LLVM feature string."""
    cpu, features = host_cpu()
    triple, layout = triple_and_layout()
    return {"machine": platform.machine().lower(), "triple": triple, "data_layout": layout,
            "cpu": cpu, "features": features}


def _enabled(features: str) -> set:
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def _known(features: str) -> set:
    return {f[1:] for f in features.split(",") if f[:1] in "+-" and len(f) > 1}


def missing_features(required: str, host: str | None = None) -> tuple:
    """``(missing, unknown)``: the features enabled in the LLVM feature string ``required`` that
    ``host`` (default: this CPU's) disables, and those ``host`` does not name at all (a feature of
    another LLVM version, which this one cannot tell about), each sorted."""
    if host is None:
        host = host_cpu()[1]
    need = _enabled(required) - _enabled(host)
    known = _known(host)
    return sorted(need & known), sorted(need - known)


def unresolved(names) -> list:
    """Those of the symbol ``names`` that this process cannot resolve for a loaded object."""
    ensure_init()
    return [n for n in names if not llvm.address_of_symbol(n)]
