"""Export a :class:`~.compiled.CompiledModel` as object code, weights and a manifest; load it in
another process without compiling anything or importing onnx (``tc.load(DIR)``).

Export directory::

    DIR/
      model.json           the manifest below
      tecomp_runtime.o     the thread pool (when a kernel has parallel loops)
      kN.o, kN.dag.json    each distinct kernel: its object code, its ComputeDAG as JSON data
      sN_cM.bin, sN_bM.bin step N's constant inputs and bound arrays (raw little-endian bytes)
      oN.bin               a model output that is a constant

``model.json``: ``{"format": "tecomp-model", "format_version": 1, "name", "host", "runtime",
"inputs": [{"name", "shape", "dtype", "slot"}], "outputs": [{"name", "slot"} or {"name", "array"}],
"slots": [{"shape", "dtype"}], "kernels": [{"workload_key", "symbol", "object", "object_sha256",
"dag", "dag_sha256", "steps", "constant_inputs", "loop_ir_sha256", "imports"}], "steps":
[{"kernel", "args", "out", "name", "gather_checks", "constants": [array], "bound": [array]}]}``
where an array is ``{"file", "sha256", "shape", "dtype"}``.

What loading trusts is what :mod:`tecomp.deploy` trusts: the object code. Everything else is
data checked before anything is linked: file names confined to the directory and checked against
their SHA-256 (:func:`tecomp.deploy.manifest.read_export_file`), the DAG rebuilt from JSON to the
manifest's workload key and lowered under the record's steps to the exported loop IR, each object
defining its function and needing only its listed imports, every array's dtype, shape and size,
and every slot, argument and bound array against the kernel's parameters. A bad export raises
``ValueError`` (``TargetMismatchError`` for another CPU), never a crash.
"""
from __future__ import annotations

import json
import os

import numpy as np

__all__ = ["export_model", "load_model", "is_model_export", "load", "MODEL_MANIFEST"]

MODEL_MANIFEST = "model.json"
FORMAT, VERSION = "tecomp-model", 1


def is_model_export(path) -> bool:
    return os.path.isfile(os.path.join(os.fspath(path), MODEL_MANIFEST))


def load(path, *args, **kwargs):
    """``tc.load``: a model export (``model.json``) as a CompiledModel, else the kernels of a
    kernel export (:func:`tecomp.deploy.load`)."""
    if is_model_export(path):
        return load_model(path, **kwargs)
    from ..deploy import load as load_kernels
    return load_kernels(path, *args, **kwargs)


def _write_array(out_dir: str, name: str, a: np.ndarray) -> dict:
    from ..deploy.manifest import sha256, write_file
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    data = a.tobytes()
    write_file(os.path.join(out_dir, name), data)
    return {"file": name, "sha256": sha256(data), "shape": list(a.shape), "dtype": a.dtype.name}


def _split(dag, schedule, names):
    from ..ir.loop import verify
    from ..lowering import lower
    from ..lowering.constants import split_constants
    func = lower(schedule if schedule is not None else dag)
    verify(func)
    return split_constants(func, len(dag.inputs), names)


def export_model(cm, path) -> dict:
    """Write ``cm`` (from :func:`tecomp.compile_model`) to directory ``path``; see the module
    docstring. Returns the manifest."""
    from .. import __version__
    from ..codegen import objects, threadpool
    from ..codegen.llvm_cpu import compile_cpu
    from ..deploy.dag_json import dag_to_json
    from ..deploy.manifest import sha256, write_file
    if any(st.schedule is None and st.constants is None for st in cm.steps):
        raise ValueError("export: this model was loaded from an export; export the original")
    out_dir = os.fspath(path)
    os.makedirs(out_dir, exist_ok=True)
    kernels, kernel_of, steps = [], {}, []
    for n, st in enumerate(cm.steps):
        dag, consts = st.kernel.dag, st.constants or {}
        names = [t.name for t in dag.inputs if t.name in consts]
        pos = [k for k, t in enumerate(dag.inputs) if t.name in consts]
        kkey = (dag.workload_key, st.schedule.key if st.schedule is not None else "", tuple(pos))
        split = _split(dag, st.schedule, names)
        if kkey not in kernel_of:
            k = len(kernels)
            ko = objects.compile_object(split.main)
            dag_bytes = json.dumps(dag_to_json(dag)).encode()
            write_file(os.path.join(out_dir, f"k{k}.o"), ko.object)
            write_file(os.path.join(out_dir, f"k{k}.dag.json"), dag_bytes)
            kernels.append({
                "workload_key": dag.workload_key, "symbol": ko.symbol, "object": f"k{k}.o",
                "object_sha256": sha256(ko.object), "dag": f"k{k}.dag.json",
                "dag_sha256": sha256(dag_bytes), "constant_inputs": pos,
                "steps": st.schedule.records() if st.schedule is not None else None,
                "loop_ir_sha256": sha256(repr(split.main).encode()),
                "imports": ko.imports,
                "parallel": ko.parallel})
            kernel_of[kkey] = k
        by_param = {b: consts[b.name] for b in split.prologue_inputs + split.bound
                    if b.name in consts}
        if split.prologue is not None:  # the packed weights, computed once, here
            from ..codegen.memory import aligned_empty
            folded = [aligned_empty(b.shape, b.dtype.np) for b in split.folded]
            compile_cpu(split.prologue).run([by_param[b] for b in split.prologue_inputs] + folded)
            by_param.update(zip(split.folded, folded))
        written: dict = {}  # a weight the kernel reads as it is: one file for both lists

        def put(name, a):
            if id(a) not in written:
                written[id(a)] = _write_array(out_dir, name, a)
            return written[id(a)]
        steps.append({
            "kernel": kernel_of[kkey], "args": list(st.args), "out": st.out, "name": st.name,
            "gather_checks": [[s, size, where] for s, size, where in st.gather_checks],
            "constants": [put(f"s{n}_c{j}.bin", consts[nm]) for j, nm in enumerate(names)],
            "bound": [put(f"s{n}_b{j}.bin", by_param[b]) for j, b in enumerate(split.bound)]})
    runtime = None
    if any(k["parallel"] for k in kernels):
        rt = threadpool.object_code()
        write_file(os.path.join(out_dir, "tecomp_runtime.o"), rt)
        runtime = {"object": "tecomp_runtime.o", "sha256": sha256(rt)}
    outputs = []
    for j, (name, s) in enumerate(zip(cm.output_names, cm.output_slots)):
        outputs.append({"name": name, "slot": s} if isinstance(s, int)
                       else {"name": name, "array": _write_array(out_dir, f"o{j}.bin", s)})
    manifest = {
        "format": FORMAT, "format_version": VERSION, "tecomp_version": __version__,
        "name": cm.name, "host": objects.host_info(), "runtime": runtime,
        "inputs": [{"name": n, "shape": list(s), "dtype": d.name, "slot": slot}
                   for n, (s, d), slot in zip(cm.input_names, cm.input_specs, cm.input_slots)],
        "outputs": outputs,
        "slots": [{"shape": list(s), "dtype": np.dtype(d).name} for s, d in cm.slot_specs],
        "kernels": kernels, "steps": steps}
    write_file(os.path.join(out_dir, MODEL_MANIFEST),
               (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def load_model(path, check_target: bool = True):
    """The :class:`~.compiled.CompiledModel` exported to ``path``, without compiling anything.

    Raises
    ------
    FileNotFoundError, ValueError
        Not a model export, or a malformed, inconsistent or corrupt one.
    TargetMismatchError
        Code compiled for another architecture or for CPU features this one lacks.
    """
    from .deploy_check import read_model_manifest
    dirpath = os.fspath(path)
    m = read_model_manifest(dirpath)
    from .deploy_link import link_model
    return link_model(dirpath, m, check_target)
