"""A tc.Model built directly with the graph API compiles and runs with onnx unimportable: only
from_onnx needs the onnx package."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    sys.modules["onnx"] = None  # any import of onnx now fails
    import numpy as np
    import tecomp as tc
    from tecomp.frontend import Model, Node, Op
    m = Model("dense_relu")
    m.add_value("x", (2, 3), np.float32)
    m.add_constant("w", np.arange(12, dtype=np.float32).reshape(3, 4) / 10)
    m.add_constant("b", np.array([1, -1, 0.5, -0.5], np.float32))
    m.add_value("h", (2, 4), np.float32)
    m.add_value("hb", (2, 4), np.float32)
    m.add_value("y", (2, 4), np.float32)
    m.nodes += [Node(Op.MATMUL, ["x", "w"], ["h"]), Node(Op.ADD, ["h", "b"], ["hb"]),
                Node(Op.RELU, ["hb"], ["y"])]
    m.inputs, m.outputs = ["x"], ["y"]
    cm = tc.compile_model(m)
    assert len(cm.steps) == 1, cm.steps   # one fused kernel
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = np.maximum(x @ m.constants["w"] + m.constants["b"], 0)
    np.testing.assert_allclose(cm(x), want, rtol=1e-5, atol=1e-6)
    assert sys.modules["onnx"] is None
    print("ok")
""")


def test_compiled_model_needs_no_onnx():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
