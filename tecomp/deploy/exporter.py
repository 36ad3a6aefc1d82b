"""``export``: compile the best record of a tuning log for each DAG and write its object code,
the files that go with it and the manifest (see :mod:`.manifest` for the format)."""
from __future__ import annotations

import datetime
import json
import os
import re
import warnings

from ..ir.dag import ComputeDAG
from ..target import Target, TargetKind
from .dag_json import dag_to_json
from .manifest import FORMAT, FORMAT_VERSION, MANIFEST, RUNTIME_OBJECT, arg_list, sha256, write_file

__all__ = ["export"]


def _ident(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]+", "_", str(s)).strip("_")
    return s or "kernel"


def _as_named_dag(item):
    """``(base name or None, dag)`` from a ComputeDAG, a Workload or a ``(name, dag)`` pair."""
    if isinstance(item, ComputeDAG):
        return None, item
    dag = getattr(item, "dag", None)
    if isinstance(dag, ComputeDAG):  # a tecomp.workloads.Workload
        return getattr(item, "name", None) or None, dag
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], ComputeDAG):
        return str(item[0]), item[1]
    raise TypeError(f"export: dags must hold ComputeDAGs (or Workloads, or (name, dag) pairs), got "
                    f"{type(item).__name__}")


def _index_checks(dag: ComputeDAG) -> dict:
    from ..ir.validate import IndexValidator
    v = IndexValidator(dag)
    csr = [{"indptr": c.indptr.name, "nnz": int(c.nnz),
            "indices": None if c.indices is None else c.indices.name,
            "ncols": None if c.ncols is None else int(c.ncols)} for c in dag.checks]
    bounds = [{"compute": s.name, "access": what, "tensor": t.name, "dim": d, "index": repr(ix)}
              for s, _axes, t, d, ix, what, *_ in v.rules]
    return {"csr": csr, "bounds": bounds}


def _select(log, dag: ComputeDAG, target: Target, on_missing: str):
    """``(schedule or None, record or None)``: the best replayable record of ``log`` for ``dag``
    (of its own workload key, else of its family: the same sparse DAG with another nnz)."""
    from ..schedule.log_schedule import select_from_log
    return select_from_log(dag, log, target, "default" if on_missing == "default" else "error")


def export(log, out_dir, dags, target="llvm", *, on_missing: str = "error", assembly: bool = True,
           opt_level: int = 3) -> dict:
    """Compile the best record of ``log`` for each of ``dags`` and write the object code and a
    manifest to ``out_dir`` (created if needed).

    Parameters
    ----------
    log : str or path
        A tuning log (JSON lines); records are matched by ``dag.workload_key`` and ``str(target)``
        as :func:`tecomp.build` matches them (records of another CPU of the same kind are used,
        with a warning, when none match exactly).
    out_dir : str or path
    dags : list
        ComputeDAGs (or ``tecomp.workloads`` Workloads, or ``(name, dag)`` pairs, whose name
        starts the kernel's name). A DAG whose workload key is already in the list is skipped.
    target : str or Target
        ``"llvm"``: the code is compiled for this host CPU (as ``tc.build`` compiles it).
    on_missing : "error", "skip" or "default"
        A DAG without a usable record: ``LookupError`` before anything is written, left out (with
        a warning), or exported with the default schedule (with a warning).
    assembly : bool
        Also write each kernel's assembly text.
    opt_level : int
        LLVM optimization level (``tc.build`` uses 3).

    Returns
    -------
    dict
        The manifest written (see the module docstring).
    """
    from .. import __version__
    from ..codegen import objects
    from ..codegen.threadpool import SYMBOLS, calls_runtime, object_code
    from ..ir.loop import verify
    from ..lowering import lower

    if on_missing not in ("error", "skip", "default"):
        raise ValueError(f"on_missing must be 'error', 'skip' or 'default', got {on_missing!r}")
    target = Target.parse(target).require_host()
    if target.kind is not TargetKind.LLVM:
        raise ValueError(f"export: target {target} is not supported; only 'llvm' (this CPU) is")
    if (isinstance(dags, ComputeDAG) or isinstance(getattr(dags, "dag", None), ComputeDAG)
            or (isinstance(dags, tuple) and len(dags) == 2 and isinstance(dags[0], str))):
        dags = [dags]

    # 1. resolve every schedule first, so that a missing record fails before anything is written
    plan, seen = [], set()
    for item in dags:
        base, dag = _as_named_dag(item)
        key = dag.workload_key
        if key in seen:
            continue
        seen.add(key)
        try:
            sched, rec = _select(log, dag, target, on_missing)
        except LookupError as e:
            if on_missing == "error":
                raise
            warnings.warn(f"export: skipped workload {key}: {e}", UserWarning, stacklevel=2)
            continue
        base = _ident(base or dag.outputs[0].name)
        plan.append((f"{base}_{key[:8]}", dag, sched, rec))
    if not plan:
        raise LookupError(f"export: nothing to export from {os.fspath(log)!r}")

    # 2. compile and write
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    host = objects.host_info()
    names: set = set()
    kernels = []
    for name, dag, sched, rec in plan:
        n = 2
        unique = name
        while unique in names:
            unique, n = f"{name}_{n}", n + 1
        name = unique
        names.add(name)
        func = lower(dag if sched is None else sched)
        verify(func)
        ko = objects.compile_object(func, opt_level)
        blob = json.dumps(dag_to_json(dag), separators=(",", ":")).encode()
        files = {f"{name}.o": ko.object, f"{name}.dag.json": blob,
                 f"{name}.ll": ko.source.encode(), f"{name}.loop.txt": repr(func).encode()}
        if assembly:
            from ..codegen.llvm_jit import assembly as to_asm
            files[f"{name}.s"] = to_asm(ko.source).encode()
        for fname, data in files.items():
            write_file(os.path.join(out_dir, fname), data)
        sha = {fname: sha256(data) for fname, data in files.items()}
        kernels.append({
            "name": name, "workload_key": dag.workload_key, "symbol": ko.symbol,
            "object": f"{name}.o", "object_sha256": sha[f"{name}.o"],
            "dag": f"{name}.dag.json", "dag_sha256": sha[f"{name}.dag.json"],
            "llvm_ir": f"{name}.ll", "llvm_ir_sha256": sha[f"{name}.ll"],
            "assembly": f"{name}.s" if assembly else None,
            "assembly_sha256": sha.get(f"{name}.s"),
            "loop_ir": f"{name}.loop.txt", "loop_ir_sha256": sha[f"{name}.loop.txt"],
            "args": arg_list(dag), "parallel": ko.parallel, "imports": ko.imports,
            "index_checks": _index_checks(dag),
            "record": None if sched is None else {
                "target": None if rec is None else rec.target, "steps": sched.records(),
                "cost": None if rec is None else rec.cost,
                "flops": None if rec is None else rec.flop_count},
        })
    runtime = None
    if any(calls_runtime(k["imports"]) for k in kernels):
        rt = object_code()
        write_file(os.path.join(out_dir, RUNTIME_OBJECT), rt)
        runtime = {"object": RUNTIME_OBJECT, "sha256": sha256(rt), "symbols": list(SYMBOLS)}
    import llvmlite
    import llvmlite.binding as llvm
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tecomp_version": __version__,
        "llvm_version": ".".join(map(str, llvm.llvm_version_info)),
        "llvmlite_version": llvmlite.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": str(Target(TargetKind.LLVM, host["cpu"], host["features"])),
        "host": host, "runtime": runtime, "kernels": kernels,
    }
    write_file(os.path.join(out_dir, MANIFEST), (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest
