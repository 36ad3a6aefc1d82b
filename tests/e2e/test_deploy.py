"""Deployment: export the best records of a log as object code, load them in a fresh process
without compiling anything, and get the same results as freshly built kernels.

Tune-free: the log is written by hand (hand schedules' steps with a made-up valid cost).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tecomp as tc
from tecomp import deploy
from tecomp.codegen import threadpool
from tecomp.schedule.records import MeasureResult, Record, append_records
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# one worker under `pytest -n 2 --dist loadgroup`: the module's export (`exported`) is made once
pytestmark = pytest.mark.xdist_group("deploy")


def _matmul():
    return W.matmul(64, 48, 40)


def _spmm():
    return W.csr_spmm(64, 50, 32, 0.1, empty_rows=True, dense_row=True)


def _spmm_schedule(dag):
    s = tc.Schedule(dag)
    C = dag.outputs[0]
    i, j = s[C].axes
    s[C].parallel(i)
    s[C].vectorize(j)
    return s


def _record(dag, sched, cost=1e-3):
    return Record(dag.workload_key, str(tc.Target.parse("llvm")), sched.records(), {},
                  MeasureResult(costs=[cost, cost]), flop_count=dag.flop_count())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A hand-made log (a worse record first, to see that the best one is taken), its export and
    inputs for both kernels."""
    d = tmp_path_factory.mktemp("deploy")
    log = str(d / "log.jsonl")
    mm, sp = _matmul(), _spmm()
    append_records(log, [
        _record(mm.dag, H.matmul_schedule(mm.dag, parallel=False), cost=5e-3),
        _record(mm.dag, H.matmul_schedule(mm.dag)),
        _record(sp.dag, _spmm_schedule(sp.dag)),
    ])
    out = str(d / "out")
    manifest = deploy.export(log, out, [mm, sp])
    rng = np.random.default_rng(0)
    inputs = {"mm": mm.make_inputs(rng), "sp": sp.make_inputs(rng)}
    np.savez(str(d / "inputs.npz"), **{f"{k}{n}": a for k, xs in inputs.items()
                                      for n, a in enumerate(xs)})
    return {"dir": d, "log": log, "out": out, "manifest": manifest, "mm": mm, "sp": sp,
            "inputs": inputs}


def test_manifest(exported):
    m = deploy.read_manifest(exported["out"])
    assert m == exported["manifest"]
    assert m["format"] == deploy.FORMAT and m["format_version"] == deploy.FORMAT_VERSION
    assert m["tecomp_version"] == tc.__version__
    assert m["host"]["features"] and m["target"].startswith("llvm -mcpu=")
    assert m["runtime"]["object"] == deploy.RUNTIME_OBJECT
    by_key = {k["workload_key"]: k for k in m["kernels"]}
    mm, sp = by_key[exported["mm"].dag.workload_key], by_key[exported["sp"].dag.workload_key]
    assert mm["parallel"] and sp["parallel"]
    assert mm["args"][0] == {"name": "A", "shape": [64, 40], "dtype": "float32", "role": "input"}
    assert [a["role"] for a in sp["args"]] == ["input"] * 4 + ["output"]
    assert sp["args"][1]["dtype"] == "int32"
    assert sp["index_checks"]["csr"][0]["indptr"] == "indptr"
    assert any(b["tensor"] == "dense" and "indices" in b["index"]
               for b in sp["index_checks"]["bounds"])
    # the best record was exported, with its steps (the kernel can be rebuilt from them)
    best = H.matmul_schedule(exported["mm"].dag).records()
    assert mm["record"]["steps"] == json.loads(json.dumps(best))
    assert mm["record"]["cost"] == pytest.approx(1e-3)
    for k in m["kernels"]:
        for f in ("object", "dag", "llvm_ir", "assembly", "loop_ir"):
            assert os.path.isfile(os.path.join(exported["out"], k[f]))
        with open(os.path.join(exported["out"], k["object"]), "rb") as f:
            assert f.read(4) == b"\x7fELF" or sys.platform == "darwin"


_CHILD = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    import llvmlite.binding as llvm

    # Everything in llvmlite that parses, optimizes or generates code fails loudly; the only
    # allowed parse is of an empty module (the engine the objects are linked into).
    calls = []
    originals = {}

    def guard(owner, name, allow=None):
        orig = getattr(owner, name)
        originals[(owner, name)] = orig
        def wrapper(*a, **k):
            if allow is None or not allow(*a, **k):
                raise AssertionError(f"compiling call in a load: {name}")
            calls.append(name)
            return orig(*a, **k)
        setattr(owner, name, wrapper)

    def empty_text(text, *a, **k):
        return not text.strip()

    guard(llvm, "parse_assembly", empty_text)
    guard(llvm, "parse_bitcode")
    guard(llvm, "create_mcjit_compiler", lambda mod, *a, **k: not list(mod.functions))
    guard(llvm.ExecutionEngine, "add_module")
    guard(llvm.TargetMachine, "emit_object")
    guard(llvm.TargetMachine, "emit_assembly")
    guard(llvm, "create_pass_builder")
    guard(llvm.ModulePassManager, "run")
    guard(llvm.FunctionPassManager, "run")

    import tecomp as tc
    from tecomp.codegen import llvm_cpu, llvm_jit, threadpool
    for mod, name in ((llvm_jit, "jit"), (llvm_jit, "compile_object"), (threadpool, "jit"),
                      (threadpool, "compile_object"), (llvm_cpu, "compile_cpu")):
        guard(mod, name)

    out_dir, inputs_path, result_path, mm_key, sp_key = sys.argv[1:6]
    ks = tc.load(out_dir)
    first_load = list(calls)
    assert isinstance(ks[mm_key], tc.Kernel) and isinstance(ks[sp_key], tc.Kernel)
    x = np.load(inputs_path)
    mm = [x["mm0"], x["mm1"]]
    sp = [x["sp0"], x["sp1"], x["sp2"], x["sp3"]]
    res = {"mm": ks[mm_key](*mm), "sp": ks[sp_key](*sp)}
    out = np.empty_like(res["mm"])
    ks[mm_key](*mm, out=out)
    res["mm_out"] = out
    report = {"calls": first_load, "runtime_from_object": threadpool.loaded().from_object,
              "workers": threadpool.loaded().stats(0),
              "source_is_ir": "define" in ks[mm_key].source(),
              "names": sorted(tc.load(out_dir, by="name")),  # a second load: pool reused
              "all_calls": calls}
    # bad index data still raises ValueError before any native code runs
    errors = []
    bad = [a.copy() for a in sp]
    bad[1][0] = 10_000  # a column index out of range
    bad2 = [a.copy() for a in sp]
    bad2[2][-1] += 1  # indptr does not end at nnz
    for args in (bad, bad2):
        try:
            ks[sp_key](*args)
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
    try:
        ks[mm_key](mm[0][:, :3].copy(), mm[1])
    except ValueError as e:
        errors.append(str(e))
    report["errors"] = errors

    # compiling afterwards in the same process reuses the loaded thread pool (no second runtime)
    for (owner, name), orig in originals.items():
        setattr(owner, name, orig)
    from tecomp.testing import hand_schedules as H, workloads as W
    threadpool.jit = None  # the runtime must not be JIT-compiled now
    rt = threadpool.loaded()
    wl = W.matmul(24, 40, 16)
    k = tc.build(wl.dag, schedule=H.matmul_schedule(wl.dag))
    a = wl.make_inputs(np.random.default_rng(1))
    report["compiled_after_ok"] = bool(np.allclose(k(*a), a[0] @ a[1], rtol=1e-4, atol=1e-4))
    report["same_runtime"] = threadpool.loaded() is rt
    np.savez(result_path, **res)
    print(json.dumps(report))
""")


def test_load_in_fresh_process_compiles_nothing(exported):
    d = exported["dir"]
    script = d / "child.py"
    script.write_text(_CHILD)
    result = str(d / "result.npz")
    mm_key, sp_key = exported["mm"].dag.workload_key, exported["sp"].dag.workload_key
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(script), exported["out"], str(d / "inputs.npz"),
                        result, mm_key, sp_key], capture_output=True, text=True, timeout=120,
                       env=env, cwd=str(d))
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    # three engines over empty modules (the pool and two kernels), nothing else
    assert report["calls"].count("create_mcjit_compiler") == 3
    assert set(report["calls"]) == {"parse_assembly", "create_mcjit_compiler"}
    assert report["all_calls"].count("create_mcjit_compiler") == 5
    assert report["runtime_from_object"] and report["workers"] >= 0
    assert report["source_is_ir"]
    assert report["names"] == sorted(k["name"] for k in exported["manifest"]["kernels"])
    assert report["errors"][0] and "column index 10000" in report["errors"][0]
    assert report["errors"][1] and "indptr" in report["errors"][1]
    assert "shape" in report["errors"][2]
    assert report["compiled_after_ok"] and report["same_runtime"]

    # the loaded kernels compute exactly what freshly built ones do
    got = np.load(result)
    mm, sp = exported["mm"], exported["sp"]
    xm, xs = exported["inputs"]["mm"], exported["inputs"]["sp"]
    fresh_mm = tc.build(mm.dag, log=exported["log"])
    fresh_sp = tc.build(sp.dag, log=exported["log"])
    assert np.array_equal(got["mm"], fresh_mm(*xm))
    assert np.array_equal(got["mm_out"], fresh_mm(*xm))
    assert np.array_equal(got["sp"], fresh_sp(*xs))
    np.testing.assert_allclose(got["sp"], sp.reference(xs)[0], rtol=1e-4, atol=1e-4)


def test_load_reuses_running_pool(exported):
    """In a process that compiled (and so JIT-compiled the pool), a load takes that pool."""
    rt = threadpool.runtime()
    ks = tc.load(exported["out"])
    assert threadpool.loaded() is rt
    mm, sp = exported["mm"], exported["sp"]
    xm, xs = exported["inputs"]["mm"], exported["inputs"]["sp"]
    assert np.array_equal(ks[mm.dag.workload_key](*xm), tc.build(mm.dag, log=exported["log"])(*xm))
    k = ks[sp.dag.workload_key]
    np.testing.assert_allclose(k.emulate(*xs), k(*xs), rtol=1e-5, atol=1e-5)
    assert "csr_spmm" in repr(k.loop_ir) and "parallel" in repr(k.loop_ir)
    assert ".globl" in k._compiled.assembly() or "global" in k._compiled.assembly()


def _copy(exported, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(exported["out"], dst)
    return dst


def _edit_manifest(path, fn):
    mpath = path / deploy.MANIFEST
    m = json.loads(mpath.read_text())
    fn(m)
    mpath.write_text(json.dumps(m))


def test_cpu_lacking_a_feature_is_refused(exported, tmp_path):
    feats = exported["manifest"]["host"]["features"].split(",")
    lacking = next(f[1:] for f in feats if f.startswith("-"))  # a feature this CPU does not have
    dst = _copy(exported, tmp_path)
    _edit_manifest(dst, lambda m: m["host"].update(
        features=",".join("+" + lacking if f == "-" + lacking else f for f in feats)))
    with pytest.raises(deploy.TargetMismatchError, match=f"lacks: {lacking}"):
        tc.load(dst)
    assert tc.load(dst, check_target=False)  # the expert's override (the code never uses it)


def test_feature_unknown_to_this_llvm_warns(exported, tmp_path):
    dst = _copy(exported, tmp_path)
    _edit_manifest(dst, lambda m: m["host"].update(
        features=m["host"]["features"] + ",+tecomp-imaginary-isa"))
    with pytest.warns(RuntimeWarning, match="tecomp-imaginary-isa"):
        ks = tc.load(dst)
    assert len(ks) == 2


def test_other_architecture_is_refused(exported, tmp_path):
    dst = _copy(exported, tmp_path)
    _edit_manifest(dst, lambda m: m["host"].update(triple="riscv64-unknown-linux-gnu",
                                                   machine="riscv64"))
    with pytest.raises(deploy.TargetMismatchError, match="riscv64"):
        tc.load(dst)


def test_corrupt_and_newer_exports_are_refused(exported, tmp_path):
    dst = _copy(exported, tmp_path)
    k0 = exported["manifest"]["kernels"][0]
    with open(dst / k0["object"], "r+b") as f:
        f.seek(100)
        f.write(b"\0\0\0\0")
    with pytest.raises(ValueError, match="SHA-256"):
        tc.load(dst)
    _edit_manifest(dst, lambda m: m.update(format_version=deploy.FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match="newer"):
        tc.load(dst)
    with pytest.raises(FileNotFoundError, match="not a tecomp export"):
        tc.load(tmp_path / "nothing-here")


def test_export_missing_record(exported, tmp_path):
    other = W.matmul(8, 8, 8)
    with pytest.raises(LookupError, match=other.dag.workload_key):
        deploy.export(exported["log"], tmp_path / "x", [exported["mm"], other])
    assert not (tmp_path / "x").exists()  # nothing is written when a record is missing
    with pytest.warns(UserWarning, match="skipped"):
        m = deploy.export(exported["log"], tmp_path / "y", [exported["mm"], other],
                          on_missing="skip", assembly=False)
    assert [k["workload_key"] for k in m["kernels"]] == [exported["mm"].dag.workload_key]
    assert m["kernels"][0]["assembly"] is None


def test_main_export(exported, tmp_path, capsys):
    out = tmp_path / "cli"
    rc = deploy.main_export([exported["log"], "--out", str(out), "--workload", "matmul",
                             "--shape", "64", "48", "40"])
    assert rc == 0
    ks = tc.load(out)
    assert list(ks) == [exported["mm"].dag.workload_key]
    assert "wrote 1 kernel" in capsys.readouterr().out

    # --all: the log's keys that a standard workload rebuilds; the sparse one is skipped with a note
    log = tmp_path / "all.jsonl"
    std = W.matmul(64, 64, 64)
    shutil.copy(exported["log"], log)
    append_records(str(log), [_record(std.dag, H.matmul_schedule(std.dag))])
    rc = deploy.main_export([str(log), "--out", str(tmp_path / "all"), "--all"])
    cap = capsys.readouterr()
    assert rc == 0
    assert f"skipped workload key {exported['sp'].dag.workload_key}" in cap.err
    assert f"skipped workload key {exported['mm'].dag.workload_key}" in cap.err  # 64x48x40 neither
    keys = {k["workload_key"] for k in deploy.read_manifest(tmp_path / "all")["kernels"]}
    assert keys == {std.dag.workload_key}

    # errors: one line, non-zero status
    rc = deploy.main_export([exported["log"], "--out", str(tmp_path / "e"), "--workload",
                             "matmul", "--shape", "8", "8", "8"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("tecomp export: error:") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        deploy.main_export([exported["log"], "--out", str(tmp_path / "e")])
    with pytest.raises(SystemExit):
        deploy.main_export([exported["log"], "--out", str(tmp_path / "e"), "--shape", "4"])


_SCRATCH_CHILD = textwrap.dedent(r"""
    import sys
    import numpy as np
    import tecomp as tc
    from tecomp.codegen import threadpool
    (k,) = tc.load(sys.argv[1]).values()
    a = np.load(sys.argv[2])
    assert threadpool.loaded() is not None and threadpool.loaded().from_object
    for _ in range(3):  # the second and third calls take the first call's buffer back
        out = k(a)
    assert threadpool.loaded().scratch_stats(1) >= 2
    np.save(sys.argv[3], out)
""")


def test_a_serial_kernel_with_an_intermediate_buffer_loads_the_runtime(tmp_path):
    """No parallel loop, but a 1 MB intermediate from the runtime's scratch cache: the export
    carries the runtime, and a fresh process loads it from there."""
    A = tc.placeholder((512, 512), name="A")
    T = tc.compute((512, 512), lambda i, j: A[i, j] * 2.0, name="T")
    B = tc.compute((512, 512), lambda i, j: T[j, i] + 1.0, name="B")
    dag = tc.ComputeDAG([A, B])
    sched = tc.Schedule(dag)
    log = str(tmp_path / "log.jsonl")
    append_records(log, [_record(dag, sched)])
    m = deploy.export(log, str(tmp_path / "out"), [dag])
    (k,) = m["kernels"]
    assert not k["parallel"] and "tecomp_scratch_alloc" in k["imports"]
    assert m["runtime"] is not None
    a = np.random.default_rng(0).uniform(-1, 1, (512, 512)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = tmp_path / "child.py"
    script.write_text(_SCRATCH_CHILD)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), str(tmp_path / "a.npy"),
                        str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=120,
                       env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), a.T * np.float32(2) + 1)
