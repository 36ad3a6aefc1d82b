"""CompiledModel.export(DIR) and tc.load(DIR) in a fresh process without onnx: the same outputs;
a damaged export is a ValueError, never a crash."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("onnx")
from test_blocks import attention_block, residual_block  # noqa: E402

import tecomp as tc  # noqa: E402

LOAD = textwrap.dedent("""
    import sys
    sys.modules["onnx"] = None  # loading needs neither onnx nor a compiler
    import numpy as np
    import tecomp as tc
    cm = tc.load(sys.argv[1])
    data = np.load(sys.argv[2])
    feeds = {k: data[k] for k in data.files if not k.startswith("out")}
    got = cm(**feeds)
    got = got if isinstance(got, tuple) else (got,)
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, data[f"out{k}"])
    assert sys.modules["onnx"] is None
    print("ok", len(cm.steps))
""")


@pytest.mark.parametrize("block", [residual_block, attention_block])
def test_export_then_load_in_a_fresh_process(tmp_path, block):
    model = tc.from_onnx(block())
    cm = tc.compile_model(model)
    rng = np.random.default_rng(1)
    feeds = {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in model.input_values()}
    want = cm(**feeds)
    want = want if isinstance(want, tuple) else (want,)
    cm.export(tmp_path / "exp")
    np.savez(tmp_path / "io.npz", **feeds, **{f"out{k}": w for k, w in enumerate(want)})
    r = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "exp"),
                        str(tmp_path / "io.npz")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr
    assert r.stdout.split()[1] == str(len(cm.steps))


def test_damaged_exports_are_value_errors(tmp_path):
    cm = tc.compile_model(tc.from_onnx(residual_block()))
    d = tmp_path / "exp"
    m = cm.export(d)
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_array_equal(tc.load(d)(x), cm(x))
    weight = d / next(s for s in m["steps"] if s["bound"])["bound"][0]["file"]
    good = weight.read_bytes()
    weight.write_bytes(good[:-4] + b"\0\0\0\0")
    with pytest.raises(ValueError, match="SHA-256"):
        tc.load(d)
    weight.write_bytes(good)
    manifest = d / "model.json"
    text = manifest.read_text()
    for bad, match in [(dict(m, steps=[dict(m["steps"][0], out=99)] + m["steps"][1:]), "out"),
                       (dict(m, slots=[{"shape": [1], "dtype": "float32"}] * len(m["slots"])),
                        "differs from its slot|does not fit"),
                       (dict(m, kernels=[dict(m["kernels"][0], dag="../etc/passwd")] + m["kernels"][1:]),
                        "plain file name|outside"),
                       (dict(m, format_version=7), "version")]:
        manifest.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match):
            tc.load(d)
    manifest.write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        tc.load(d)
    manifest.write_text(text)
    np.testing.assert_array_equal(tc.load(d)(x), cm(x))
