"""Loading a checked model manifest: the host check, each kernel's program rebuilt from data and
checked against its object code, the objects linked (nothing compiled), the weights read, and
every step's slots, arguments and bound arrays checked against the kernel's parameters."""
from __future__ import annotations

import json
import math

import numpy as np

__all__ = ["link_model"]


def _check_host(h: dict, where: str) -> None:
    from ..codegen import objects
    from ..deploy import TargetMismatchError
    here = objects.host_info()
    arch = lambda t: t.split("-")[0]  # noqa: E731
    if arch(h["triple"]) != arch(here["triple"]) or h["machine"] != here["machine"] or \
            h["data_layout"] != here["data_layout"]:
        raise TargetMismatchError(f"{where}: the model was compiled for {h['triple']} "
                                  f"({h['machine']}); this machine is {here['triple']}; export "
                                  f"it again here")
    missing, unknown = objects.missing_features(h["features"], here["features"])
    if missing or unknown:
        raise TargetMismatchError(f"{where}: this CPU lacks feature(s) the model was compiled "
                                  f"with: {', '.join(missing + unknown)}; export it again here")


def _array(dirpath: str, spec: dict, what: str, cache: dict | None = None) -> np.ndarray:
    key = (spec["file"], spec["sha256"], tuple(spec["shape"]), spec["dtype"])
    if cache is not None and key in cache:
        return cache[key]
    from ..deploy.manifest import read_export_file
    data = read_export_file(dirpath, spec["file"], spec["sha256"], what)
    dtype = np.dtype(spec["dtype"]).newbyteorder("<")
    n = int(np.prod(spec["shape"], dtype=np.int64))
    if len(data) != n * dtype.itemsize:
        raise ValueError(f"{dirpath}: {what} {spec['file']!r} has {len(data)} bytes, not the "
                         f"{n * dtype.itemsize} of {spec['dtype']}{spec['shape']}")
    from ..codegen.memory import aligned_empty
    a = aligned_empty(spec["shape"], spec["dtype"])  # one copy: byte order and alignment at once
    a[...] = np.frombuffer(data, dtype).reshape(spec["shape"])
    a.flags.writeable = False
    if cache is not None:
        cache[key] = a
    return a


def _program(dirpath: str, kd: dict, where: str):
    """``(dag, main function, split)`` of a kernel, rebuilt and checked against the manifest."""
    from ..deploy.dag_json import dag_from_json
    from ..deploy.manifest import read_export_file, sha256
    from ..ir.loop import verify
    from ..lowering import lower
    from ..lowering.constants import split_constants
    from ..schedule import Schedule
    data = read_export_file(dirpath, kd["dag"], kd["dag_sha256"], "DAG file")
    try:
        dag = dag_from_json(json.loads(data.decode("utf-8")), f"{where}: DAG")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{where}: its DAG file is not JSON data ({type(e).__name__})") from None
    if dag.workload_key != kd["workload_key"]:
        raise ValueError(f"{where}: its DAG has workload key {dag.workload_key}, the manifest "
                         f"says {kd['workload_key']}")
    pos = kd["constant_inputs"]
    if any(p >= len(dag.inputs) for p in pos) or len(set(pos)) != len(pos):
        raise ValueError(f"{where}: constant_inputs {pos} are not inputs of its DAG")
    try:
        sched = None if kd["steps"] is None else Schedule.from_records(dag, kd["steps"])
        func = lower(dag if sched is None else sched)
        verify(func)
        split = split_constants(func, len(dag.inputs), [dag.inputs[p].name for p in pos])
        verify(split.main)
    except Exception as e:  # noqa: BLE001 - a record this version cannot replay, or garbage
        raise ValueError(f"{where}: its schedule does not lower with this tecomp "
                         f"({type(e).__name__}: {e}); export it again") from None
    if sha256(repr(split.main).encode()) != kd["loop_ir_sha256"]:
        raise ValueError(f"{where}: lowering its record with this tecomp gives another loop IR "
                         f"than the exported one; export it again")
    return dag, split


def _check_object(obj: bytes, kd: dict, func, allowed: set, where: str) -> None:
    from ..codegen import objects
    from ..codegen.elf import read_symbols
    from ..codegen.llvm_cpu import kernel_symbol
    if kd["symbol"] != kernel_symbol(func.name):
        raise ValueError(f"{where}: symbol {kd['symbol']!r} is not the kernel's function")
    syms = read_symbols(obj, f"{where}: object file")
    if kd["symbol"] not in syms.defined:
        raise ValueError(f"{where}: the object does not define {kd['symbol']!r}")
    if syms.undefined != set(kd["imports"]):
        raise ValueError(f"{where}: the object needs {sorted(syms.undefined)}, the manifest lists "
                         f"{sorted(kd['imports'])}")
    missing = objects.unresolved(sorted(syms.undefined - allowed))
    if missing:
        raise RuntimeError(f"{where}: the object calls function(s) this process cannot resolve: "
                           f"{', '.join(missing)}")


def _same(a_shape, a_dtype, t) -> bool:
    return tuple(a_shape) == tuple(t.shape) and np.dtype(a_dtype) == t.dtype.np


def _viewable(a_shape, a_dtype, t) -> bool:
    """Whether an array of ``a_shape`` can be passed as a view of the shape of ``t``."""
    return math.prod(a_shape) == math.prod(t.shape) and np.dtype(a_dtype) == t.dtype.np


def link_model(dirpath: str, m: dict, check_target: bool = True):
    from ..build import Kernel
    from ..codegen import objects, threadpool
    from ..deploy.manifest import read_export_file
    from ..target import Target, TargetKind
    from .compiled import CompiledModel, Step, fit_kernel
    if check_target:
        _check_host(m["host"], dirpath)
    parallel = any(kd["parallel"] for kd in m["kernels"])
    pool = None
    if parallel and threadpool.loaded() is None:
        if m["runtime"] is None:
            raise ValueError(f"{dirpath}: kernels with parallel loops but no runtime object")
        pool = read_export_file(dirpath, m["runtime"]["object"], m["runtime"]["sha256"],
                                "the thread pool object")
        from ..codegen.elf import read_symbols
        syms = read_symbols(pool, f"{dirpath}: the thread pool object")
        if not set(threadpool.SYMBOLS) <= syms.defined or objects.unresolved(
                sorted(syms.undefined)):
            raise ValueError(f"{dirpath}: the thread pool object is not this tecomp's runtime")
    allowed = set(threadpool.SYMBOLS) if parallel else set()
    programs = []
    for k, kd in enumerate(m["kernels"]):  # every check before anything is linked
        where = f"{dirpath}: kernel {k}"
        dag, split = _program(dirpath, kd, where)
        obj = read_export_file(dirpath, kd["object"], kd["object_sha256"], "object file")
        _check_object(obj, kd, split.main, allowed, where)
        programs.append((dag, split, obj))
    slots = [(tuple(s["shape"]), np.dtype(s["dtype"])) for s in m["slots"]]
    steps_data = []
    for n, st in enumerate(m["steps"]):
        where = f"{dirpath}: step {n} ({st['name'][:60]})"
        dag, split, _ = programs[st["kernel"]]
        pos = m["kernels"][st["kernel"]]["constant_inputs"]
        const_ts = [dag.inputs[p] for p in pos]
        free = [t for k, t in enumerate(dag.inputs) if k not in pos]
        if len(st["constants"]) != len(const_ts) or len(st["bound"]) != len(split.bound) or \
                len(st["args"]) != len(free) or len(dag.outputs) != 1:
            raise ValueError(f"{where}: its arguments do not match its kernel's")
        seen: dict = {}  # a file listed twice is read once
        consts = {t.name: _array(dirpath, spec, "weights", seen) for t, spec in
                  zip(const_ts, st["constants"])}
        bound = [_array(dirpath, spec, "weights", seen) for spec in st["bound"]]
        for a, t in list(zip(consts.values(), const_ts)) + list(zip(bound, split.bound)):
            if not _same(a.shape, a.dtype, t):
                raise ValueError(f"{where}: an array of {a.dtype}{list(a.shape)} stands for "
                                 f"'{t.name}' of {t.dtype}{list(t.shape)}")
        for s, t in zip(st["args"] + [st["out"]], free + list(dag.outputs)):
            # a FLAT step's kernel reads its slots as views of another shape: same dtype, same
            # number of elements (compiled.fit_kernel wraps it below)
            if not _viewable(*slots[s], t):
                raise ValueError(f"{where}: slot {s} ({slots[s][1]}{list(slots[s][0])}) does not "
                                 f"fit '{t.name}' ({t.dtype}{list(t.shape)})")
        for s, _, _ in st["gather_checks"]:
            if slots[s][1].kind != "i":
                raise ValueError(f"{where}: a Gather check on non-integer slot {s}")
        steps_data.append((st, dag, split, consts, bound))
    if pool is not None:
        threadpool.runtime(pool)
    h = m["host"]
    target = Target(TargetKind.LLVM, h["cpu"], h["features"])
    linked = [objects.load_kernel(split.main, kd["symbol"], obj)
              for kd, (_, split, obj) in zip(m["kernels"], programs)]
    steps = []
    for st, dag, split, consts, bound in steps_data:
        kernel = fit_kernel(Kernel(dag, target, split.main, linked[st["kernel"]],
                                   bound=(consts, bound)), slots[st["out"]][0])
        steps.append(Step(kernel, list(st["args"]), st["out"], st["name"],
                          [tuple(g) for g in st["gather_checks"]]))
    inputs = [(i["name"], tuple(i["shape"]), np.dtype(i["dtype"])) for i in m["inputs"]]
    outs = [o["slot"] if "slot" in o else _array(dirpath, o["array"], "output constant")
            for o in m["outputs"]]
    return CompiledModel(m["name"], target, inputs, [o.get("name", "") for o in m["outputs"]],
                         steps, slots, [i["slot"] for i in m["inputs"]], outs, [])
