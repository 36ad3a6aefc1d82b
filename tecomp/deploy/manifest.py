"""The export format: directory layout, ``manifest.json``, format versions, file hashing.

Export directory (format version 2; version 1 stored the DAG as a pickle, which ``load`` no
longer reads: unpickling runs code)::

    out_dir/
      manifest.json          what is below, the host it was compiled for, the kernels' signatures
      tecomp_runtime.o       the runtime: parallel-loop thread pool and scratch-buffer cache
                             (when a kernel calls it: parallel loops, intermediate buffers)
      NAME.o                 the kernel's machine code (relocatable object, JIT code model)
      NAME.dag.json          the ComputeDAG as plain JSON data (:mod:`.dag_json`): argument checks,
                             index-data checks, emulate() and loop_ir, rebuilt without compiling
      NAME.ll                the optimized LLVM IR the object was generated from (Kernel.source())
      NAME.s                 its assembly (kernel._compiled.assembly()), unless assembly=False
      NAME.loop.txt          the loop IR, for reading

``manifest.json``::

    {"format": "tecomp-export", "format_version": 2, "tecomp_version": "0.1.0",
     "llvm_version": "22.1.0", "llvmlite_version": "0.50.0", "created": "2025-...Z",
     "target": "llvm -mcpu=znver4",
     "host": {"machine": "x86_64", "triple": "x86_64-unknown-linux-gnu", "data_layout": "e-m:e-...",
              "cpu": "znver4", "features": "+avx,+avx2,-amx-tile,..."},
     "runtime": {"object": "tecomp_runtime.o", "sha256": "...", "symbols": ["tecomp_parallel_for",
                 ...]} or null,
     "kernels": [{"name": "matmul_679be33c", "workload_key": "679be33c...", "symbol": "tecomp_...",
                  "object": "matmul_679be33c.o", "object_sha256": "...",
                  "dag": "matmul_679be33c.dag.json", "dag_sha256": "...",
                  "llvm_ir": "matmul_679be33c.ll", "llvm_ir_sha256": "...",
                  "assembly": "matmul_679be33c.s" or null, "assembly_sha256": "..." or null,
                  "loop_ir": "matmul_679be33c.loop.txt", "loop_ir_sha256": "...",
                  "args": [{"name": "A", "shape": [1024, 1024], "dtype": "float32",
                            "role": "input"}, ..., {"name": "matmul", ..., "role": "output"}],
                  "parallel": true, "imports": ["tecomp_parallel_for", "tecomp_scratch_alloc",
                                                "tecomp_scratch_free"],
                  "index_checks": {"csr": [{"indptr": "indptr", "nnz": 346, "indices": "indices",
                                            "ncols": 50}],
                                   "bounds": [{"compute": "csr_spmm", "access": "read",
                                               "tensor": "dense", "dim": 0,
                                               "index": "(int64)indices[k]"}, ...]},
                  "record": {"target": "llvm -mcpu=znver4", "steps": [["SP", 2, 0, [8], true], ...],
                             "cost": 0.0012, "flops": 2.1e9}}, ...]}

``index_checks`` describes the per-call checks for readers; ``load`` rebuilds them (and everything
else a Kernel needs) from the DAG, so they are the same checks ``tc.build`` makes. ``record``
keeps the schedule's steps: ``load`` lowers the DAG under them again (Python, no compiler) and
requires the loop IR to be the exported one (``loop_ir_sha256``), and the kernel can be rebuilt
from the manifest alone (``Schedule.from_records(dag, steps)``) on a machine the code does not fit.

Every file name in a manifest is a plain name inside the export directory, and every file has
its SHA-256; :func:`read_manifest` checks the whole manifest against :data:`SCHEMA` before
anything else is read.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat

from ..ir.dag import ComputeDAG

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "RUNTIME_OBJECT", "read_manifest", "sha256",
           "arg_list", "write_file", "SCHEMA", "export_path", "read_export_file", "MAX_FILE_BYTES",
           "read_regular_file"]

#: the manifest's ``format`` value
FORMAT = "tecomp-export"
#: the export format this code writes, and the only one it reads (1 held pickles)
FORMAT_VERSION = 2
#: the manifest's file name in an export directory
MANIFEST = "manifest.json"
#: the thread pool's object file in an export directory
RUNTIME_OBJECT = "tecomp_runtime.o"


def sha256(data: bytes) -> str:
    """The hex SHA-256 of ``data``, as the manifest records files."""
    return hashlib.sha256(data).hexdigest()


def arg_list(dag: ComputeDAG) -> list:
    """The manifest's ``args`` of a kernel: name, shape, dtype and role of each of its tensors."""
    n_in = len(dag.inputs)
    return [{"name": t.name, "shape": [int(d) for d in t.shape], "dtype": t.dtype.np.name,
             "role": "input" if n < n_in else "output"} for n, t in enumerate(dag.tensors)]


def write_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (a reader never sees half a
    file)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


#: the largest file an export may hold (a guard against a directory made to exhaust memory)
MAX_FILE_BYTES = 1 << 30
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _opt(spec):
    return ("optional", spec)


def _str(x):
    return isinstance(x, str) and len(x) <= 1 << 16


def _file(x):
    return isinstance(x, str) and _FILE.fullmatch(x) is not None and x != MANIFEST


def _sha(x):
    return isinstance(x, str) and _HEX64.fullmatch(x) is not None


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _anything(x):
    return True


_ARG = {"name": _str, "shape": [_int], "dtype": _str, "role": _str}
_KERNEL = {
    "name": _str, "workload_key": _str, "symbol": _str,
    "object": _file, "object_sha256": _sha, "dag": _file, "dag_sha256": _sha,
    "llvm_ir": _opt(_file), "llvm_ir_sha256": _opt(_sha),
    "assembly": _opt(_file), "assembly_sha256": _opt(_sha),
    "loop_ir": _file, "loop_ir_sha256": _sha,
    "args": [_ARG], "parallel": bool, "imports": [_str], "index_checks": _anything,
    "record": _opt({"target": _opt(_str), "steps": [list], "cost": _opt(_num),
                    "flops": _opt(_num)}),
}
#: what a manifest holds: a dict is an object with exactly these keys, a one-element list a list
#: of such values, a type or predicate a leaf, ``("optional", spec)`` also allows null
SCHEMA = {
    "format": _str, "format_version": _int, "tecomp_version": _str, "llvm_version": _str,
    "llvmlite_version": _str, "created": _str, "target": _str,
    "host": {"machine": _str, "triple": _str, "data_layout": _str, "cpu": _str, "features": _str},
    "runtime": _opt({"object": _file, "sha256": _sha, "symbols": [_str]}),
    "kernels": [_KERNEL],
}


def _check(value, spec, where: str) -> None:
    if isinstance(spec, tuple):
        if value is not None:
            _check(value, spec[1], where)
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object")
        missing, extra = set(spec) - set(value), set(value) - set(spec)
        if missing or extra:
            what = "; ".join(x for x in (missing and f"missing {sorted(missing)}",
                                         extra and f"unknown {sorted(extra)}") if x)
            raise ValueError(f"{where}: {what}")
        for k, sub in spec.items():
            _check(value[k], sub, f"{where}.{k}")
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be a list")
        for n, v in enumerate(value):
            _check(v, spec[0], f"{where}[{n}]")
        return
    ok = isinstance(value, spec) and not (spec is not bool and isinstance(value, bool)) \
        if isinstance(spec, type) else spec(value)
    if not ok:
        kind = getattr(spec, "__name__", "value").strip("_")
        raise ValueError(f"{where}: {value!r:.60} is not a valid {kind}")


def export_path(dirpath: str, name: str, what: str) -> str:
    """The path of the manifest's file ``name``: a plain name (no directories) whose real path
    lies inside the export directory (a symbolic link out of it is refused)."""
    if not _file(name):
        raise ValueError(f"{dirpath}: the manifest names {what} {name!r}, which is not a plain "
                         f"file name inside the export directory")
    root = os.path.realpath(dirpath)
    path = os.path.realpath(os.path.join(root, name))
    if os.path.dirname(path) != root:
        raise ValueError(f"{dirpath}: {what} {name!r} leads outside the export directory")
    return path


def read_regular_file(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path``.

    Opened without blocking and checked on the open descriptor (no race with a rename): a named
    pipe, a device or a directory in an export would block the read forever or never end.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    OSError
        It cannot be opened or read.
    ValueError
        It is not a regular file (the message says what it is; the caller names the file).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) \
            else "a device or socket"
        raise ValueError(f"{kind}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        return f.read(limit + 1)


def read_export_file(dirpath: str, name: str, sha: str, what: str) -> bytes:
    """The bytes of the export's file ``name`` (a regular file), checked against its SHA-256
    (required)."""
    path = export_path(dirpath, name, what)
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except ValueError as e:
        raise ValueError(f"{dirpath}: {what} {name!r} is {e}") from None
    except FileNotFoundError:
        raise FileNotFoundError(f"{dirpath}: the manifest names {what} {name!r}, which is "
                                f"missing") from None
    except OSError as e:
        raise ValueError(f"{dirpath}: {what} {name!r} cannot be read: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{dirpath}: {what} {name!r} is larger than {MAX_FILE_BYTES} bytes")
    if sha256(data) != sha:
        raise ValueError(f"{path}: {what} does not match its SHA-256 in the manifest (corrupt or "
                         f"replaced); export again")
    return data


def read_manifest(path) -> dict:
    """The manifest of the export directory ``path`` (or of a ``manifest.json`` path), checked for
    its format, its version and against :data:`SCHEMA` (ValueError naming the first problem)."""
    path = os.fspath(path)
    mpath = path if os.path.isfile(path) else os.path.join(path, MANIFEST)
    try:
        raw = read_regular_file(mpath, MAX_FILE_BYTES // 64)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path!r} is not a tecomp export: no {MANIFEST}") from None
    except ValueError as e:
        raise ValueError(f"{mpath}: {e}") from None
    if len(raw) > MAX_FILE_BYTES // 64:
        raise ValueError(f"{mpath}: larger than a manifest can be ({MAX_FILE_BYTES // 64} bytes)")
    try:
        m = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{mpath}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{mpath}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise ValueError(f"{mpath}: JSON nested too deeply") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ValueError(f"{mpath}: not a tecomp export manifest (format {FORMAT!r})")
    v = m.get("format_version")
    if not _int(v) or v < 1:
        raise ValueError(f"{mpath}: bad format_version {v!r}")
    if v > FORMAT_VERSION:
        raise ValueError(f"{mpath}: export format version {v} is newer than this tecomp reads "
                         f"(up to {FORMAT_VERSION}); upgrade tecomp to load it")
    if v < FORMAT_VERSION:
        raise ValueError(f"{mpath}: export format version {v} stored its DAGs as pickles, which "
                         f"this tecomp does not load (unpickling runs code); export it again")
    _check(m, SCHEMA, "manifest")
    return m
