"""``load``: link the object code of an export into this process, without compiling anything.

Loading checks the host first: the same machine architecture (triple and data layout), and every
CPU feature the export was compiled with (``+`` in ``host.features``) present on this CPU; a CPU
lacking one raises :class:`TargetMismatchError` naming the features (running the code there would
die of an illegal instruction). Objects and pickles are verified against their SHA-256 before use.
Pickles run code when loaded: load only exports you trust (as for the object code itself).
"""
from __future__ import annotations

import os
import pickle
import warnings

from ..build import Kernel
from ..target import Target, TargetKind
from .manifest import arg_list, read_manifest, sha256

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


def _read(dirpath: str, name: str, sha: str | None, what: str) -> bytes:
    path = os.path.join(dirpath, name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{dirpath}: the manifest names {what} {name!r}, which is "
                                f"missing") from None
    if sha is not None and sha256(data) != sha:
        raise ValueError(f"{path}: {what} does not match its SHA-256 in the manifest (corrupt or "
                         f"replaced); export again")
    return data


def _text_reader(dirpath: str, name: str | None):
    if not name:
        return None

    def read():
        try:
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                return f.read()
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
    kernels = m.get("kernels") or []
    if any(k.get("parallel") for k in kernels):
        rt = m.get("runtime")
        if threadpool.loaded() is None:  # one pool per process: reuse one already running
            if not rt:
                raise ValueError(f"{dirpath}: kernels with parallel loops but no runtime object in "
                                 f"the manifest")
            threadpool.runtime(_read(dirpath, rt["object"], rt.get("sha256"),
                                     "the thread pool object"))
    missing = objects.unresolved(sorted({s for k in kernels for s in k.get("imports", [])}))
    if missing:
        raise RuntimeError(f"{dirpath}: the kernels call function(s) this process cannot resolve: "
                           f"{', '.join(missing)}")
    h = m["host"]
    target = Target(TargetKind.LLVM, h["cpu"], h["features"])
    out = {}
    for k in kernels:
        obj = _read(dirpath, k["object"], k.get("object_sha256"), "object file")
        blob = _read(dirpath, k["dag"], k.get("dag_sha256"), "DAG pickle")
        try:
            dag, func = pickle.loads(blob)
        except Exception as e:  # noqa: BLE001 - a pickle of another tecomp version
            raise ValueError(f"{dirpath}: kernel {k['name']!r}: its DAG pickle (tecomp "
                             f"{m.get('tecomp_version')}) does not load with this tecomp "
                             f"({type(e).__name__}: {e}); export it again") from None
        if arg_list(dag) != k["args"]:
            raise ValueError(f"{dirpath}: kernel {k['name']!r}: the pickled DAG's arguments do not "
                             f"match the manifest's")
        compiled = objects.load_kernel(func, k["symbol"], obj,
                                       source=_text_reader(dirpath, k.get("llvm_ir")),
                                       assembly=_text_reader(dirpath, k.get("assembly")))
        out[k["workload_key"] if by == "key" else k["name"]] = Kernel(dag, target, func, compiled)
    return out
