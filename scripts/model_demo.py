"""The whole-model workflow on this machine, end to end, with its output as evidence:

1. a ResNet bottleneck block (conv-BN-relu x3, residual add, global pool, Gemm) written with
   ``onnx.helper`` into ``WORKDIR/block.onnx``;
2. ``tecomp tune-model`` on it (the CLI, a subprocess, the learned cost model);
3. ``tc.compile_model(tc.from_onnx(...), log=...).export(DIR)`` in another process;
4. ``tc.load(DIR)`` in a fresh process in which ``import onnx`` fails, its output compared with
   ONNX Runtime's on random data;
5. the messages of the errors a user meets: an unsupported operator, a malformed file, a missing
   file, and a wrong input shape, dtype, count and name.

    scripts/model_demo.sh [WORKDIR] [--trials N]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def _w(*shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _model(nodes, x_shape, y_shape, inits):
    g = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(a, k) for k, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def bottleneck(C=256, M=64, H=28, classes=10):
    """conv1x1-BN-relu, conv3x3-BN-relu, conv1x1-BN, + x, relu, GAP, Gemm."""
    nodes, inits = [], {}

    def conv_bn(name, x, cin, cout, k, relu):
        inits[f"{name}_w"] = _w(cout, cin, k, k, scale=(2.0 / (cin * k * k)) ** 0.5)
        for p, v in (("s", 1 + _w(cout)), ("b", _w(cout)), ("m", _w(cout)),
                     ("v", 0.5 + np.abs(_w(cout)))):
            inits[f"{name}_{p}"] = v
        nodes.append(helper.make_node("Conv", [x, f"{name}_w"], [f"{name}_c"], name=name,
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("BatchNormalization",
                                      [f"{name}_c"] + [f"{name}_{p}" for p in "sbmv"],
                                      [f"{name}_n"], name=f"{name}_bn"))
        if not relu:
            return f"{name}_n"
        nodes.append(helper.make_node("Relu", [f"{name}_n"], [f"{name}_r"], name=f"{name}_relu"))
        return f"{name}_r"

    a = conv_bn("conv1", "x", C, M, 1, True)
    b = conv_bn("conv2", a, M, M, 3, True)
    c = conv_bn("conv3", b, M, C, 1, False)
    inits["fc_w"], inits["fc_b"] = _w(classes, C), _w(classes)
    nodes += [helper.make_node("Add", [c, "x"], ["sum"], name="residual"),
              helper.make_node("Relu", ["sum"], ["out"], name="relu_out"),
              helper.make_node("GlobalAveragePool", ["out"], ["pool"], name="gap"),
              helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], name="fc", transB=1)]
    return _model(nodes, [1, C, H, H], [1, classes], inits)


def unsupported():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="r0"),
             helper.make_node("Hardmax", ["r"], ["y"], name="hm0")]
    return _model(nodes, [2, 4], [2, 4], {})


def run(cmd, title):
    print(f"\n$ {title}", flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    print(textwrap.indent((out.stdout + out.stderr).rstrip(), "  "), flush=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {title}")


EXPORT = """
import sys, tecomp as tc
m = tc.compile_model(tc.from_onnx(sys.argv[1]), target="llvm", log=sys.argv[2])
m.export(sys.argv[3])
import os; print("exported", sorted(os.listdir(sys.argv[3])))
"""

LOAD = """
import sys
sys.modules["onnx"] = None  # a deployment without onnx: importing it fails
import numpy as np, tecomp as tc
m = tc.load(sys.argv[1])
with np.load(sys.argv[2]) as z:
    x, ref = z["x"], z["ref"]
y = m(x)
assert "onnx" not in sys.modules or sys.modules["onnx"] is None
print(f"tc.load: output {y.shape}, max abs diff vs onnxruntime {np.abs(y - ref).max():.3g}, "
      f"max |ref| {np.abs(ref).max():.3g}")
np.testing.assert_allclose(y, ref, rtol=1e-3, atol=1e-4)
print("outputs match onnxruntime (rtol 1e-3, atol 1e-4)")
"""


def errors(work):
    import tecomp as tc
    print("\n# the error messages")
    bad = os.path.join(work, "bad.onnx")
    with open(bad, "wb") as f:
        f.write(b"\x08\x07 this is not a protobuf \xff\xff")
    hm = os.path.join(work, "hardmax.onnx")
    onnx.save(unsupported(), hm)
    for title, fn in (("unsupported operator", lambda: tc.from_onnx(hm)),
                      ("malformed ONNX file", lambda: tc.from_onnx(bad)),
                      ("missing file", lambda: tc.from_onnx(os.path.join(work, "nope.onnx")))):
        try:
            fn()
            print(f"{title}: no error (a bug)")
        except Exception as e:  # noqa: BLE001 - the demo prints what the user sees
            print(f"{title}:\n  {type(e).__name__}: {e}")
    g = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [1, 4], [1, 4], {})
    m = tc.compile_model(tc.from_onnx(g), target="llvm")
    ok = np.ones((1, 4), np.float32)
    for title, fn in (("wrong input shape", lambda: m(np.ones((2, 4), np.float32))),
                      ("wrong input dtype", lambda: m(np.ones((1, 4)))),
                      ("wrong input count", lambda: m()),
                      ("unknown input name", lambda: m(z=ok))):
        try:
            fn()
            print(f"{title}: no error (a bug)")
        except Exception as e:  # noqa: BLE001
            print(f"{title}:\n  {type(e).__name__}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workdir", nargs="?", default=None)
    ap.add_argument("--trials", type=int, default=64)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="tecomp-model-demo-")
    os.makedirs(work, exist_ok=True)
    path, log, out = (os.path.join(work, n) for n in ("block.onnx", "block.jsonl", "export"))
    onnx.save(bottleneck(), path)
    print(f"# a ResNet bottleneck block (256 -> 64 -> 256 channels, 28x28) in {path}")
    run([sys.executable, "-m", "tecomp.cli", "tune-model", path, "--trials", str(args.trials),
         "--log", log, "--cost-model", "xgb", "--progress", "lines"],
        f"tecomp tune-model {path} --trials {args.trials} --log {log} --cost-model xgb")
    run([sys.executable, "-c", EXPORT, path, log, out],
        "python: tc.compile_model(tc.from_onnx(block.onnx), log=block.jsonl).export(DIR)")
    import onnxruntime as ort
    x = rng.standard_normal((1, 256, 28, 28)).astype(np.float32)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    data = os.path.join(work, "check.npz")
    np.savez(data, x=x, ref=ref)
    run([sys.executable, "-c", LOAD, out, data],
        "python (a fresh process, `import onnx` blocked): tc.load(DIR) beside onnxruntime")
    errors(work)


if __name__ == "__main__":
    main()
