"""Issue 16, items 4-5: an export directory is data, not code, and an inconsistent one raises.

Each test edits a copy of a real export the way a crafted or damaged one would be and checks that
``tc.load`` raises a clear error before anything runs (no pickle is loaded, no file outside the
directory is opened, no object whose symbols disagree with the manifest is linked).
"""
from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest

import tecomp as tc
from tecomp import deploy
from tecomp.codegen.elf import read_symbols
from tecomp.deploy.manifest import sha256
from tecomp.schedule.records import MeasureResult, Record, append_records
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hard_deploy")
    log = str(d / "log.jsonl")
    mm, small = W.matmul(32, 24, 16), W.matmul(8, 8, 8)
    append_records(log, [Record(w.dag.workload_key, str(tc.Target.parse("llvm")), s.records(), {},
                                MeasureResult(costs=[1e-3])) for w, s in
                         ((mm, H.matmul_schedule(mm.dag)), (small, tc.Schedule(small.dag)))])
    out = d / "out"
    deploy.export(log, out, [mm, small])
    return {"out": out, "mm": mm, "small": small}


def _copy(export_dir, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(export_dir["out"], dst)
    return dst


def _edit(dst, fn):
    p = dst / deploy.MANIFEST
    m = json.loads(p.read_text())
    fn(m)
    p.write_text(json.dumps(m))


def _kernel(m, export_dir, which="mm"):
    key = export_dir[which].dag.workload_key
    return next(k for k in m["kernels"] if k["workload_key"] == key)


def test_the_export_is_plain_data_and_loads(export_dir):
    names = sorted(os.listdir(export_dir["out"]))
    assert not [n for n in names if n.endswith(".pkl")]
    ks = tc.load(export_dir["out"])
    mm = export_dir["mm"]
    x = mm.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(ks[mm.dag.workload_key](*x), mm.reference(x)[0], rtol=1e-4,
                               atol=1e-4)


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_crafted_pickle_is_never_loaded(export_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dst = _copy(export_dir, tmp_path)
    blob = pickle.dumps(_Payload())
    (dst / "evil.pkl").write_bytes(blob)

    def point_at_pickle(m):
        k = _kernel(m, export_dir)
        k["dag"], k["dag_sha256"] = "evil.pkl", sha256(blob)
    _edit(dst, point_at_pickle)
    with pytest.raises(ValueError, match="not JSON data"):
        tc.load(dst)
    _edit(dst, lambda m: m.update(format_version=1))  # the old, pickled format
    with pytest.raises(ValueError, match="pickles.*export it again"):
        tc.load(dst)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", ["../../outside.o", "/etc/hostname", "sub/dir.o", ".."])
def test_file_names_are_confined_to_the_export(export_dir, tmp_path, name):
    dst = _copy(export_dir, tmp_path)
    _edit(dst, lambda m: _kernel(m, export_dir).update(object=name))
    with pytest.raises(ValueError, match="object"):
        tc.load(dst)


def test_a_symlink_out_of_the_export_is_refused(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)
    k = _kernel(json.loads((dst / deploy.MANIFEST).read_text()), export_dir)
    outside = tmp_path / "outside.o"
    shutil.copy(dst / k["object"], outside)
    os.remove(dst / k["object"])
    os.symlink(outside, dst / k["object"])
    with pytest.raises(ValueError, match="leads outside the export directory"):
        tc.load(dst)


@pytest.mark.parametrize("edit, match", [
    (lambda k: k.pop("object_sha256"), r"missing \['object_sha256'\]"),
    (lambda k: k.update(object_sha256=None), "object_sha256: None is not a valid sha"),
    (lambda k: k.update(args=[{"name": "A"}]), r"args\[0\]: missing"),
    (lambda k: k.update(parallel="yes"), "parallel: 'yes' is not a valid bool"),
    (lambda k: k.update(extra=1), r"unknown \['extra'\]"),
])
def test_the_manifest_is_checked_against_its_schema(export_dir, tmp_path, edit, match):
    dst = _copy(export_dir, tmp_path)
    _edit(dst, lambda m: edit(_kernel(m, export_dir)))
    with pytest.raises(ValueError, match=match):
        tc.load(dst)


def test_a_manifest_without_host_is_a_clear_error(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)
    _edit(dst, lambda m: m.pop("host"))
    with pytest.raises(ValueError, match=r"manifest: missing \['host'\]"):
        tc.load(dst)


def test_imports_or_parallel_flag_that_disagree_with_the_object(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)
    _edit(dst, lambda m: _kernel(m, export_dir).update(parallel=False))
    with pytest.raises(ValueError, match="'parallel' is False but its imports"):
        tc.load(dst)
    dst2 = tmp_path / "two"
    shutil.copytree(export_dir["out"], dst2)
    _edit(dst2, lambda m: _kernel(m, export_dir, "small").update(imports=["free"]))
    with pytest.raises(ValueError, match=r"the object needs .* the manifest lists imports \['free'\]"):
        tc.load(dst2)


def test_a_symbol_naming_an_internal_function_is_refused(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)
    m = json.loads((dst / deploy.MANIFEST).read_text())
    k = _kernel(m, export_dir)
    syms = read_symbols((dst / k["object"]).read_bytes())
    assert k["symbol"] in syms.defined
    with open(dst / (k["name"] + ".ll")) as f:  # the outlined parallel body: internal
        inner = next(ln.split("@")[1].split("(")[0] for ln in f if ln.startswith("define internal"))
    _edit(dst, lambda m: _kernel(m, export_dir).update(symbol=inner))
    with pytest.raises(ValueError, match="is not the kernel's function"):
        tc.load(dst)


def test_a_dag_that_disagrees_with_the_manifest_or_the_object(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)

    def swap_dags(m):  # the small matmul's DAG under the big one's object
        big, small = _kernel(m, export_dir), _kernel(m, export_dir, "small")
        big["dag"], big["dag_sha256"] = small["dag"], small["dag_sha256"]
    _edit(dst, swap_dags)
    with pytest.raises(ValueError, match="its DAG has workload key"):
        tc.load(dst)
    dst2 = tmp_path / "two"
    shutil.copytree(export_dir["out"], dst2)
    _edit(dst2, lambda m: _kernel(m, export_dir)["args"][0].update(shape=[64, 16]))
    with pytest.raises(ValueError, match="arguments .* do not match the manifest"):
        tc.load(dst2)


def test_a_crafted_dag_file_is_an_error(export_dir, tmp_path):
    dst = _copy(export_dir, tmp_path)
    m = json.loads((dst / deploy.MANIFEST).read_text())
    k = _kernel(m, export_dir)
    good = json.loads((dst / k["dag"]).read_text())
    bad_items = [
        dict(good, items=good["items"] + [["rd", 10**9, []]]),
        dict(good, items=[["ph", "A", [-1], "float32"]]),
        dict(good, items=[["b", "ADD", 0, 0, "float32"]]),
        dict(good, items=[["c", "evil", 1, False]]),
        dict(good, items="[" * 1000),
        {"items": [], "args": [0]},
    ]
    for n, bad in enumerate(bad_items):
        blob = json.dumps(bad).encode()
        (dst / k["dag"]).write_bytes(blob)
        _edit(dst, lambda m: _kernel(m, export_dir).update(dag_sha256=sha256(blob)))
        with pytest.raises(ValueError, match="DAG"):
            tc.load(dst)


def test_manifest_imports_come_from_the_object_not_the_ir():
    """LLVM lowers a ``llvm.memset`` of unknown length to a call to ``memset`` only when it emits
    machine code: the IR declares no such function, the object needs it. An export lists what the
    object needs (an Intel AVX-512 host's matmul zeroed its rows through memset, and every export
    of it failed its own load check)."""
    from tecomp.codegen import llvm_jit
    from tecomp.codegen.elf import object_imports
    from tecomp.codegen.objects import imports_of
    triple, layout = llvm_jit.triple_and_layout()
    ir = (f'target triple = "{triple}"\ntarget datalayout = "{layout}"\n'
          "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n"
          "define void @zero(ptr %p, i64 %n) {\n"
          "  call void @llvm.memset.p0.i64(ptr %p, i8 0, i64 %n, i1 false)\n"
          "  ret void\n}\n")
    _, obj = llvm_jit.compile_object(ir, 2)
    assert imports_of(ir) == []
    assert object_imports(obj, imports_of(ir)) == ["memset"]
    assert object_imports(b"not an ELF object", ["expf"]) == ["expf"]
