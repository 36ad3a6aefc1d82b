"""Deployment: export the best tuned kernels of a log as object code, load them without compiling.

``export(log, out_dir, dags)`` builds, for each DAG, the best record of the log (the schedule's
steps replayed, lowered and compiled for this host CPU, exactly as ``tc.build(dag, log=log)``
does) and writes its machine code as a relocatable object file next to a ``manifest.json``.
``load(out_dir)`` (also ``tc.load``) links those objects into MCJIT engines in any process on a
compatible CPU and returns the same :class:`~tecomp.build.Kernel` callables (argument checks,
index-data validation, ``source()``, ``emulate()``), without parsing, optimizing or compiling any
LLVM IR and without the search (no xgboost, no tuning code is imported).

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

Loading checks the host first: the same machine architecture (triple and data layout), and every
CPU feature the export was compiled with (``+`` in ``host.features``) present on this CPU; a CPU
lacking one raises :class:`TargetMismatchError` naming the features (running the code there would
die of an illegal instruction). Objects and pickles are verified against their SHA-256 before use.
Pickles run code when loaded: load only exports you trust (as for the object code itself).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import inspect
import json
import os
import pickle
import re
import sys
import warnings

from .build import Kernel
from .ir.dag import ComputeDAG
from .target import Target, TargetKind

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "TargetMismatchError", "export", "load",
           "read_manifest", "main_export", "standard_workloads"]

#: the manifest's ``format`` value
FORMAT = "tecomp-export"
#: the export format this code writes, and the newest it reads
FORMAT_VERSION = 1
#: the manifest's file name in an export directory
MANIFEST = "manifest.json"
#: the thread pool's object file in an export directory
RUNTIME_OBJECT = "tecomp_runtime.o"


class TargetMismatchError(RuntimeError):
    """The export's machine code does not fit this machine (another architecture, or a CPU lacking
    features it was compiled with)."""


# ----------------------------------------------------------------------------- export

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ident(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]+", "_", str(s)).strip("_")
    return s or "kernel"


def _as_named_dag(item):
    """``(base name or None, dag)`` from a ComputeDAG, a Workload or a ``(name, dag)`` pair."""
    if isinstance(item, ComputeDAG):
        return None, item
    dag = getattr(item, "dag", None)
    if isinstance(dag, ComputeDAG):  # a testing.workloads.Workload
        return getattr(item, "name", None) or None, dag
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], ComputeDAG):
        return str(item[0]), item[1]
    raise TypeError(f"export: dags must hold ComputeDAGs (or Workloads, or (name, dag) pairs), got "
                    f"{type(item).__name__}")


def _arg_list(dag: ComputeDAG) -> list:
    n_in = len(dag.inputs)
    return [{"name": t.name, "shape": [int(d) for d in t.shape], "dtype": t.dtype.np.name,
             "role": "input" if n < n_in else "output"} for n, t in enumerate(dag.tensors)]


def _index_checks(dag: ComputeDAG) -> dict:
    from .ir.validate import IndexValidator
    v = IndexValidator(dag)
    csr = [{"indptr": c.indptr.name, "nnz": int(c.nnz),
            "indices": None if c.indices is None else c.indices.name,
            "ncols": None if c.ncols is None else int(c.ncols)} for c in dag.checks]
    bounds = [{"compute": s.name, "access": what, "tensor": t.name, "dim": d, "index": repr(ix)}
              for s, _axes, t, d, ix, what in v.rules]
    return {"csr": csr, "bounds": bounds}


def _select(log, dag: ComputeDAG, target: Target, on_missing: str):
    """``(schedule or None, record or None)``: the best replayable record of ``log`` for ``dag``."""
    from .schedule.records import _load_cached, ranked_records, schedule_from_log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranked, _ = ranked_records(_load_cached(log), dag.workload_key, str(target))
    sched = schedule_from_log(dag, log, target,
                              "default" if on_missing == "default" else "error")
    if sched is None:
        return None, None
    rec = next((r for r in ranked if r.key == sched.key), None)
    return sched, rec


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
        ComputeDAGs (or ``testing.workloads`` Workloads, or ``(name, dag)`` pairs, whose name
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
    from . import __version__
    from .codegen import objects
    from .codegen.threadpool import SYMBOLS, object_code
    from .ir.loop import verify
    from .schedule import lower

    if on_missing not in ("error", "skip", "default"):
        raise ValueError(f"on_missing must be 'error', 'skip' or 'default', got {on_missing!r}")
    target = Target.parse(target)
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
        blob = pickle.dumps((dag, func), protocol=pickle.HIGHEST_PROTOCOL)
        files = {f"{name}.o": ko.object, f"{name}.pkl": blob,
                 f"{name}.ll": ko.source.encode(), f"{name}.loop.txt": repr(func).encode()}
        if assembly:
            from .codegen.llvm_jit import assembly as to_asm
            files[f"{name}.s"] = to_asm(ko.source).encode()
        for fname, data in files.items():
            _write(os.path.join(out_dir, fname), data)
        kernels.append({
            "name": name, "workload_key": dag.workload_key, "symbol": ko.symbol,
            "object": f"{name}.o", "object_sha256": _sha256(ko.object),
            "dag": f"{name}.pkl", "dag_sha256": _sha256(blob),
            "llvm_ir": f"{name}.ll", "assembly": f"{name}.s" if assembly else None,
            "loop_ir": f"{name}.loop.txt",
            "args": _arg_list(dag), "parallel": ko.parallel, "imports": ko.imports,
            "index_checks": _index_checks(dag),
            "record": None if sched is None else {
                "target": None if rec is None else rec.target, "steps": sched.records(),
                "cost": None if rec is None else rec.cost,
                "flops": None if rec is None else rec.flop_count},
        })
    runtime = None
    if any(k["parallel"] for k in kernels):
        rt = object_code()
        _write(os.path.join(out_dir, RUNTIME_OBJECT), rt)
        runtime = {"object": RUNTIME_OBJECT, "sha256": _sha256(rt), "symbols": list(SYMBOLS)}
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
    _write(os.path.join(out_dir, MANIFEST), (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def _write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (a reader never sees half a
    file)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- load

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


def _check_host(m: dict, where: str) -> None:
    from .codegen import objects
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
    if sha is not None and _sha256(data) != sha:
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
    from .codegen import objects, threadpool
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
        if _arg_list(dag) != k["args"]:
            raise ValueError(f"{dirpath}: kernel {k['name']!r}: the pickled DAG's arguments do not "
                             f"match the manifest's")
        compiled = objects.load_kernel(func, k["symbol"], obj,
                                       source=_text_reader(dirpath, k.get("llvm_ir")),
                                       assembly=_text_reader(dirpath, k.get("assembly")))
        out[k["workload_key"] if by == "key" else k["name"]] = Kernel(dag, target, func, compiled)
    return out


# ----------------------------------------------------------------------------- CLI

#: Standard workloads ``export --all`` tries to match the log's workload keys with:
#: ``(name, params)`` for :func:`tecomp.testing.workloads.get_workload`.
_STANDARD = (
    [("matmul", dict(M=n, N=n, K=n)) for n in (64, 128, 256, 512, 1024, 2048)]
    + [("batch_matmul", dict(B=b, M=n, N=n, K=n)) for b, n in ((8, 128), (16, 256), (12, 512))]
    + [(f"conv2d_{lay.lower()}", dict(N=1, C=c, H=h, W=h, O=o, KH=k, KW=k, stride=s,
                                      padding=k // 2, method=meth))
       for lay in ("NCHW", "NHWC") for meth in ("direct", "implicit_gemm")
       for c, h, o, k, s in ((64, 56, 64, 3, 1), (3, 224, 64, 7, 2), (128, 28, 128, 3, 1),
                             (256, 14, 256, 3, 1), (512, 7, 512, 3, 1), (64, 56, 64, 1, 1))]
    + [("softmax", dict(M=m, N=n)) for m, n in ((1024, 1024), (128, 4096))]
    + [("matmul_bias_relu", dict(M=n, N=n, K=n)) for n in (512, 1024)]
)


def standard_workloads():
    """The ``(name, params)`` specs ``export --all`` matches log keys against: the standard shapes
    of the benchmarks and tuning logs, and ``tecomp.testing.workloads.STANDARD`` when that exists.
    Sparse workloads depend on their pattern seed and density, so give them with ``--workload``."""
    from .testing import workloads as W
    extra = list(getattr(W, "STANDARD", ()) or ())
    return list(_STANDARD) + extra


def _parse_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def workload_from_spec(name: str, shape=(), params=None):
    """Build the standard workload ``name`` from positional ``shape`` values (in the builder's
    parameter order, ``dtype``/``layout``/``method`` excepted) and keyword ``params``."""
    from .testing.workloads import WORKLOADS, get_workload
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    kw = dict(params or {})
    if shape:
        names = [p for p in inspect.signature(WORKLOADS[name]).parameters
                 if p not in ("dtype", "layout", "method")]
        if len(shape) > len(names):
            raise ValueError(f"{name} takes at most {len(names)} shape values ({' '.join(names)})")
        kw.update(zip(names, shape))
    try:
        return get_workload(name, **kw)
    except TypeError as e:
        raise ValueError(f"{name}: {e}") from None


class _NewSpec(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        specs = getattr(ns, "specs", None) or []
        specs.append({"name": value, "shape": [], "params": {}})
        ns.specs = specs


class _SpecField(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        specs = getattr(ns, "specs", None)
        if not specs:
            parser.error(f"{option_string} must follow a --workload NAME")
        spec = specs[-1]
        if self.dest == "shape":
            spec["shape"] = list(value)
        elif self.dest == "dtype":
            spec["params"]["dtype"] = value
        else:
            if "=" not in value:
                parser.error(f"--param takes KEY=VALUE, got {value!r}")
            k, v = value.split("=", 1)
            spec["params"][k] = _parse_value(v)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tecomp export",
        description="Write the best tuned kernels of a log as object code with a manifest; "
                    "tc.load(DIR) loads them without compiling. Each --workload NAME is followed "
                    "by its own --shape/--param/--dtype.",
        epilog="example: tecomp export tuning_logs/matmul.jsonl --out deploy/ "
               "--workload matmul --shape 1024 1024 1024 --workload conv2d_nhwc --shape "
               "1 64 56 56 64 3 3 1 1")
    ap.add_argument("log", help="tuning log (JSON lines)")
    ap.add_argument("--out", "-o", required=True, metavar="DIR", help="export directory")
    ap.add_argument("--workload", action=_NewSpec, metavar="NAME", dest="specs_name",
                    help="a standard workload (matmul, conv2d_nchw, csr_spmm, ...) to export")
    ap.add_argument("--shape", action=_SpecField, type=int, nargs="+", dest="shape",
                    help="the preceding workload's shape values, in its builder's order")
    ap.add_argument("--param", action=_SpecField, dest="param", metavar="KEY=VALUE",
                    help="another parameter of the preceding workload (repeatable)")
    ap.add_argument("--dtype", action=_SpecField, dest="dtype",
                    help="the preceding workload's dtype")
    ap.add_argument("--all", action="store_true",
                    help="also export every workload key of the log that a standard workload "
                         "shape (or a given --workload) rebuilds; others are skipped with a note")
    ap.add_argument("--target", default="llvm", help="records for this target (default: llvm)")
    ap.add_argument("--no-assembly", action="store_true", help="do not write assembly text")
    return ap


def main_export(argv=None) -> int:
    """``tecomp export LOG --out DIR (--workload NAME --shape ... | --all)``; returns the exit
    status (errors are one line on stderr and status 1; bad usage exits with status 2)."""
    ap = _parser()
    args = ap.parse_args(argv)
    specs = getattr(args, "specs", None) or []
    if not specs and not args.all:
        ap.error("give --workload NAME --shape ... (repeatable) or --all")
    try:
        return _run_export(args, specs)
    except (LookupError, ValueError, TypeError, FileNotFoundError, OSError,
            TargetMismatchError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"tecomp export: error: {msg}", file=sys.stderr)
        return 1


def _run_export(args, specs) -> int:
    from .schedule.records import load_records
    dags = []
    for s in specs:
        wl = workload_from_spec(s["name"], s["shape"], s["params"])
        dags.append((wl.name, wl.dag))
    if args.all:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            recs = load_records(args.log)
        counts: dict = {}
        for r in recs:
            if r.result.is_valid:
                counts[r.workload_key] = counts.get(r.workload_key, 0) + 1
        found = {d.workload_key for _, d in dags}
        for name, params in standard_workloads():
            if all(k in found for k in counts):
                break
            try:
                wl = workload_from_spec(name, (), params)
            except ValueError:
                continue
            key = wl.dag.workload_key
            if key in counts and key not in found:
                found.add(key)
                dags.append((wl.name, wl.dag))
        for key, n in counts.items():
            if key not in found:
                print(f"note: skipped workload key {key} ({n} valid record(s)): no standard "
                      f"workload has this key; export it with --workload NAME --shape ...",
                      file=sys.stderr)
        if not dags:
            raise LookupError(f"{args.log}: no valid record of the log belongs to a standard "
                              f"workload; name them with --workload NAME --shape ...")
    m = export(args.log, args.out, dags, target=args.target, on_missing="error",
               assembly=not args.no_assembly)
    print(f"{'kernel':<36} {'workload key':<14} {'parallel':<9} {'object':>10}")
    for k in m["kernels"]:
        size = os.path.getsize(os.path.join(args.out, k["object"]))
        print(f"{k['name']:<36} {k['workload_key'][:12]:<14} {str(k['parallel']).lower():<9} "
              f"{size:>9}B")
    print(f"wrote {len(m['kernels'])} kernel(s) for {m['target']} to "
          f"{os.path.join(args.out, MANIFEST)}")
    return 0

