"""``load``: link the object code of an export into this process, without compiling anything.

Loading checks the host first: the same machine architecture (triple and data layout), and every
CPU feature the export was compiled with (``+`` in ``host.features``) present on this CPU; a CPU
lacking one raises :class:`TargetMismatchError` naming the features (running the code there would
die of an illegal instruction).

What ``load`` trusts and what it checks: the object code is machine code and runs as it is, like
any native library, so load only exports you trust. Everything else is data and is checked
before any object is linked: the manifest against its schema (:data:`.manifest.SCHEMA`); every
file name confined to the export directory; every file against its SHA-256 (corruption, not
authenticity: the hashes sit beside the files); the DAG is plain JSON (nothing is unpickled or
run), rebuilt to the manifest's workload key and arguments, and lowered again under the record's
steps to the exported loop IR (``loop_ir_sha256``); each object is an ELF object that defines
the manifest's symbol (the kernel's public function, not an internal one) and needs exactly the
imports the manifest lists, consistent with its ``parallel`` flag, all resolvable here.
"""
from __future__ import annotations

import json
import os
import warnings

from ..build import Kernel
from ..target import Target, TargetKind
from .manifest import arg_list, read_export_file, read_manifest

__all__ = ["TargetMismatchError", "load"]


class TargetMismatchError(RuntimeError):
    """The export's machine code does not fit this machine (another architecture, or a CPU lacking
    features it was compiled with)."""


def _check_host(m: dict, where: str) -> None:
    from ..codegen import objects
    exp, here = m["host"], objects.host_info()
    arch = lambda t: t.split("-")[0]  # noqa: E731
    if arch(exp["triple"]) != arch(here["triple"]) or exp["machine"] != here["machine"]:
        raise TargetMismatchError(
            f"{where}: the export was compiled for {exp['triple']} ({exp['machine']}); this "
            f"machine is {here['triple']} ({here['machine']}); export it again on this machine")
    if exp["data_layout"] != here["data_layout"]:
        raise TargetMismatchError(
            f"{where}: the export's data layout {exp['data_layout']!r} differs from this machine's "
            f"{here['data_layout']!r}; export it again on this machine")
    missing, unknown = objects.missing_features(exp["features"], here["features"])
    if unknown:
        warnings.warn(f"{where}: the export was compiled with CPU feature(s) this LLVM does not "
                      f"know ({', '.join(unknown)}; another LLVM version); loading it anyway",
                      RuntimeWarning, stacklevel=3)
    if missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more"
                                           if len(missing) > 12 else "")
        raise TargetMismatchError(
            f"{where}: the export was compiled for CPU {exp['cpu']!r} with features this CPU "
            f"({here['cpu']!r}) lacks: {shown}; its code could die of an illegal instruction here. "
            f"Export it again on this machine (or on one with no more features than this one)")


def _text_reader(dirpath: str, name: str | None, sha: str | None):
    """A reader of an optional text file, checked like the others when it is first read."""
    if not name or not sha:
        return None

    def read():
        try:
            return read_export_file(dirpath, name, sha, "text file").decode("utf-8", "replace")
        except FileNotFoundError:
            return None
    return read


def load(path, by: str = "key", check_target: bool = True) -> dict:
    """Load the kernels of the export directory ``path`` without compiling anything.

    Parameters
    ----------
    path : str or path
        An export directory (or its ``manifest.json``).
    by : "key" or "name"
        Key the result by workload key (``dag.workload_key``; what ``export`` matched the log with)
        or by kernel name (as in the manifest, e.g. ``"matmul_679be33c"``).
    check_target : bool
        Refuse (``TargetMismatchError``) an export whose code does not fit this CPU. Turning it off
        is for experts: the code may then die of an illegal instruction.

    Returns
    -------
    dict of str to Kernel
        The same callables ``tc.build`` gives (``kernel(*inputs)``, ``out=``, argument and
        index-data checks, ``emulate()``, ``loop_ir``); ``kernel.source()`` is the stored
        optimized LLVM IR.

    Raises
    ------
    FileNotFoundError, ValueError
        Not an export, a newer format, a missing or corrupt file.
    TargetMismatchError
        Another architecture, or a CPU lacking features the code was compiled with.
    RuntimeError
        A function the code calls cannot be resolved in this process.
    """
    from ..codegen import objects, threadpool
    if by not in ("key", "name"):
        raise ValueError(f"by must be 'key' or 'name', got {by!r}")
    m = read_manifest(path)
    dirpath = os.fspath(path)
    if os.path.isfile(dirpath):
        dirpath = os.path.dirname(dirpath) or "."
    if check_target:
        _check_host(m, dirpath)
    kernels = m["kernels"]
    # every check before anything is linked
    checked = []
    for k in kernels:
        where = f"{dirpath}: kernel {k['name']!r}"
        obj = read_export_file(dirpath, k["object"], k["object_sha256"], "object file")
        dag, func = _kernel_program(dirpath, k, where)
        _check_object(obj, k, func, where)
        checked.append((k, obj, dag, func))
    pool = None
    if any(threadpool.calls_runtime(k["imports"]) for k in kernels) and threadpool.loaded() is None:
        rt = m["runtime"]  # one pool per process: one already running is reused
        if not rt:
            raise ValueError(f"{dirpath}: kernels that call the runtime (parallel loops, scratch "
                             f"buffers) but no runtime object in the manifest")
        pool = read_export_file(dirpath, rt["object"], rt["sha256"], "the thread pool object")
        _check_runtime(pool, rt, dirpath)
    missing = objects.unresolved(sorted({s for k in kernels for s in k["imports"]}
                                        - (set(threadpool.SYMBOLS) if pool else set())))
    if missing:
        raise RuntimeError(f"{dirpath}: the kernels call function(s) this process cannot resolve: "
                           f"{', '.join(missing)}")
    if pool is not None:
        threadpool.runtime(pool)
    h = m["host"]
    target = Target(TargetKind.LLVM, h["cpu"], h["features"])
    out = {}
    for k, obj, dag, func in checked:
        compiled = objects.load_kernel(
            func, k["symbol"], obj,
            source=_text_reader(dirpath, k["llvm_ir"], k["llvm_ir_sha256"]),
            assembly=_text_reader(dirpath, k["assembly"], k["assembly_sha256"]))
        out[k["workload_key"] if by == "key" else k["name"]] = Kernel(dag, target, func, compiled)
    return out


def _kernel_program(dirpath: str, k: dict, where: str) -> tuple:
    """``(dag, loop IR)`` of a manifest kernel: the DAG from its JSON data, checked against the
    manifest's workload key and arguments, lowered under the record's steps and checked to be the
    exported loop IR."""
    from ..ir.loop import verify
    from ..lowering import lower
    from ..schedule import Schedule
    from .dag_json import dag_from_json
    from .manifest import sha256
    data = read_export_file(dirpath, k["dag"], k["dag_sha256"], "DAG file")
    try:
        dag = dag_from_json(json.loads(data.decode("utf-8")), f"{where}: DAG")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{where}: its DAG file is not JSON data ({type(e).__name__})") from None
    try:
        key, args = dag.workload_key, arg_list(dag)
    except RecursionError:
        raise ValueError(f"{where}: its DAG is nested too deeply") from None
    if key != k["workload_key"]:
        raise ValueError(f"{where}: its DAG has workload key {key}, the manifest says "
                         f"{k['workload_key']}")
    if args != k["args"]:
        raise ValueError(f"{where}: the DAG's arguments {args} do not match the manifest's "
                         f"{k['args']}")
    try:
        sched = None if k["record"] is None else Schedule.from_records(dag, k["record"]["steps"])
        func = lower(dag if sched is None else sched)
        verify(func)
    except Exception as e:  # noqa: BLE001 - a record this version cannot replay, or garbage
        raise ValueError(f"{where}: its schedule does not lower with this tecomp "
                         f"({type(e).__name__}: {e}); export it again") from None
    if sha256(repr(func).encode()) != k["loop_ir_sha256"]:
        raise ValueError(f"{where}: lowering its record with this tecomp gives another loop IR "
                         f"than the exported one (exported by another tecomp version?); export "
                         f"it again")
    return dag, func


def _check_runtime(obj: bytes, rt: dict, where: str) -> None:
    """The thread pool object defines the pool's entry points and needs only what resolves."""
    from ..codegen import objects, threadpool
    from ..codegen.elf import is_elf, read_symbols
    if rt["symbols"] != list(threadpool.SYMBOLS):
        raise ValueError(f"{where}: the runtime's symbols {rt['symbols']} are not this tecomp's "
                         f"thread pool ({list(threadpool.SYMBOLS)}); export it again")
    if not is_elf(obj):
        if os.uname().sysname == "Linux":
            raise ValueError(f"{where}: the thread pool object is not an ELF object")
        return
    syms = read_symbols(obj, f"{where}: the thread pool object")
    lacking = set(rt["symbols"]) - syms.defined
    if lacking:
        raise ValueError(f"{where}: the thread pool object does not define {sorted(lacking)}")
    missing = objects.unresolved(sorted(syms.undefined))
    if missing:
        raise RuntimeError(f"{where}: the thread pool object calls function(s) this process "
                           f"cannot resolve: {', '.join(missing)}")


def _check_object(obj: bytes, k: dict, func, where: str) -> None:
    """The object defines the kernel's public function and needs exactly the manifest's imports
    (LLVM aborts the process on a symbol it cannot resolve)."""
    from ..codegen.elf import is_elf, read_symbols
    from ..codegen.llvm_cpu import kernel_symbol
    from ..codegen.threadpool import DYNAMIC_ENTRY, ENTRY
    if k["symbol"] != kernel_symbol(func.name):
        raise ValueError(f"{where}: symbol {k['symbol']!r} is not the kernel's function "
                         f"{kernel_symbol(func.name)!r}")
    if len(func.params) != len(k["args"]):
        raise ValueError(f"{where}: the kernel takes {len(func.params)} arguments, the manifest "
                         f"lists {len(k['args'])}")
    if k["parallel"] != bool({ENTRY, DYNAMIC_ENTRY} & set(k["imports"])):
        raise ValueError(f"{where}: 'parallel' is {k['parallel']} but its imports "
                         f"{k['imports']} say otherwise")
    if not is_elf(obj):
        if os.uname().sysname == "Linux":
            raise ValueError(f"{where}: its object file is not an ELF object")
        return  # Mach-O: not inspected; the SHA-256 and the manifest's imports stand
    syms = read_symbols(obj, f"{where}: object file")
    if k["symbol"] not in syms.defined:
        raise ValueError(f"{where}: the object does not define the function {k['symbol']!r}")
    if syms.undefined != set(k["imports"]):
        raise ValueError(f"{where}: the object needs {sorted(syms.undefined)}, the manifest lists "
                         f"imports {sorted(k['imports'])}")
