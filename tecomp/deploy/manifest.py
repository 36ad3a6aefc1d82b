"""The export format: directory layout, ``manifest.json``, format versions, file hashing.

Export directory (format version 1)::

    out_dir/
      manifest.json          what is below, the host it was compiled for, the kernels' signatures
      tecomp_runtime.o       the parallel-loop thread pool (when a kernel has parallel loops)
      NAME.o                 the kernel's machine code (relocatable object, JIT code model)
      NAME.pkl               pickle of (ComputeDAG, PrimFunc): argument checks, index-data checks,
                             emulate() and loop_ir, rebuilt without compiling
      NAME.ll                the optimized LLVM IR the object was generated from (Kernel.source())
      NAME.s                 its assembly (kernel._compiled.assembly()), unless assembly=False
      NAME.loop.txt          the loop IR, for reading

``manifest.json``::

    {"format": "tecomp-export", "format_version": 1, "tecomp_version": "0.1.0",
     "llvm_version": "22.1.0", "llvmlite_version": "0.50.0", "created": "2025-...Z",
     "target": "llvm -mcpu=znver4",
     "host": {"machine": "x86_64", "triple": "x86_64-unknown-linux-gnu", "data_layout": "e-m:e-...",
              "cpu": "znver4", "features": "+avx,+avx2,-amx-tile,..."},
     "runtime": {"object": "tecomp_runtime.o", "sha256": "...", "symbols": ["tecomp_parallel_for",
                 ...]} or null,
     "kernels": [{"name": "matmul_679be33c", "workload_key": "679be33c...", "symbol": "tecomp_...",
                  "object": "matmul_679be33c.o", "object_sha256": "...",
                  "dag": "matmul_679be33c.pkl", "dag_sha256": "...",
                  "llvm_ir": "matmul_679be33c.ll", "assembly": "matmul_679be33c.s" or null,
                  "loop_ir": "matmul_679be33c.loop.txt",
                  "args": [{"name": "A", "shape": [1024, 1024], "dtype": "float32",
                            "role": "input"}, ..., {"name": "matmul", ..., "role": "output"}],
                  "parallel": true, "imports": ["aligned_alloc", "free", "tecomp_parallel_for"],
                  "index_checks": {"csr": [{"indptr": "indptr", "nnz": 346, "indices": "indices",
                                            "ncols": 50}],
                                   "bounds": [{"compute": "csr_spmm", "access": "read",
                                               "tensor": "dense", "dim": 0,
                                               "index": "(int64)indices[k]"}, ...]},
                  "record": {"target": "llvm -mcpu=znver4", "steps": [["SP", 2, 0, [8], true], ...],
                             "cost": 0.0012, "flops": 2.1e9}}, ...]}

``index_checks`` describes the per-call checks for readers; ``load`` rebuilds them (and everything
else a Kernel needs) from the pickled DAG, so they are the same checks ``tc.build`` makes.
``record`` keeps the schedule's steps, so the kernel can be rebuilt from the manifest alone
(``Schedule.from_records(dag, steps)``) on a machine the object code does not fit.
"""
from __future__ import annotations

import hashlib
import json
import os

from ..ir.dag import ComputeDAG

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "RUNTIME_OBJECT", "read_manifest", "sha256",
           "arg_list", "write_file"]

#: the manifest's ``format`` value
FORMAT = "tecomp-export"
#: the export format this code writes, and the newest it reads
FORMAT_VERSION = 1
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


def read_manifest(path) -> dict:
    """The manifest of the export directory ``path`` (or of a ``manifest.json`` path), checked for
    its format and version."""
    path = os.fspath(path)
    mpath = path if os.path.isfile(path) else os.path.join(path, MANIFEST)
    try:
        with open(mpath, encoding="utf-8") as f:
            m = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path!r} is not a tecomp export: no {MANIFEST}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{mpath}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ValueError(f"{mpath}: not a tecomp export manifest (format {FORMAT!r})")
    v = m.get("format_version")
    if not isinstance(v, int) or v < 1:
        raise ValueError(f"{mpath}: bad format_version {v!r}")
    if v > FORMAT_VERSION:
        raise ValueError(f"{mpath}: export format version {v} is newer than this tecomp reads "
                         f"(up to {FORMAT_VERSION}); upgrade tecomp to load it")
    return m
