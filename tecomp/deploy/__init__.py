"""Deployment: export the best tuned kernels of a log as object code, load them without compiling.

``export(log, out_dir, dags)`` builds, for each DAG, the best record of the log (the schedule's
steps replayed, lowered and compiled for this host CPU, exactly as ``tc.build(dag, log=log)``
does) and writes its machine code as a relocatable object file next to a ``manifest.json``.
``load(out_dir)`` (also ``tc.load``) links those objects into MCJIT engines in any process on a
compatible CPU and returns the same :class:`~tecomp.build.Kernel` callables (argument checks,
index-data validation, ``source()``, ``emulate()``), without parsing, optimizing or compiling any
LLVM IR and without the search (no xgboost, no tuning code is imported).

The package's modules:

- :mod:`.manifest`: the export directory's layout, ``manifest.json``, format versions, hashing;
- :mod:`.exporter`: :func:`export`;
- :mod:`.loader`: :func:`load` and the host checks (:class:`TargetMismatchError`);
- :mod:`.cli`: ``tecomp export`` (:func:`main_export`) and :func:`standard_workloads`.
"""
from __future__ import annotations

from .cli import main_export, standard_workloads, workload_from_spec
from .exporter import export
from .loader import TargetMismatchError, load
from .manifest import FORMAT, FORMAT_VERSION, MANIFEST, RUNTIME_OBJECT, read_manifest

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "RUNTIME_OBJECT", "TargetMismatchError",
           "export", "load", "read_manifest", "main_export", "standard_workloads",
           "workload_from_spec"]
