"""ONNX ConvTranspose layers (decoder and U-Net upsampling shapes) through tecomp's model path,
tuned, beside ONNX Runtime and torch (``conv_transpose2d`` eager and a ``jit.freeze``d module,
NCHW and channels_last), each at 1 and 2 threads, with the protocol of ``tecomp.bench``
(interleaved rounds, the spread printed).

    benchmarks/run.sh conv_transpose.py [--trials 48] [--logdir DIR] [--only NAME ...]

Each layer is a one-node ONNX model (batch 1, fp32, weight a constant); tecomp imports it in
both layouts (``tc.from_onnx(layout=...)``), tunes each with ``tc.tune_model`` for ``--trials``
measurements and runs the compiled model. The GFLOP/s column counts the layer's useful work,
``2 * C * O * k^2 * H * W``.
"""
import argparse
import os
import tempfile
import time

import numpy as np
from onnx import helper, numpy_helper

import tecomp as tc
from tecomp.bench.onnx_peers import ort_configs
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import conv_transpose2d_peers
from tecomp.bench.protocol import TECOMP, Config
from tecomp.bench.report import geomean, print_header, run_comparison
from tecomp.bench.threads import tecomp_threads, thread_counts

#: name: (C, O, H, k, stride, pad, output_padding)
LAYERS = {
    "unet_up_k2s2": (128, 64, 16, 2, 2, 0, 0),
    "dcgan_k4s2": (64, 32, 32, 4, 2, 1, 0),
    "decoder_k3s2": (64, 32, 32, 3, 2, 1, 1),
    "fcn_k4s2_wide": (256, 128, 8, 4, 2, 1, 0),
}


def layer_model(c, o, h, k, s, p, op, rng):
    w = (rng.standard_normal((c, o, k, k)) * 0.1).astype(np.float32)
    oh = (h - 1) * s - 2 * p + k + op
    node = helper.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[s, s], pads=[p] * 4,
                            output_padding=[op, op])
    g = helper.make_graph([node], "ct", [helper.make_tensor_value_info("x", 1, [1, c, h, h])],
                          [helper.make_tensor_value_info("y", 1, [1, o, oh, oh])],
                          [numpy_helper.from_array(w, "W")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w, oh


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--logdir", default=None)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="conv_transpose_")
    os.makedirs(logdir, exist_ok=True)
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for name, (c, o, h, k, s, p, op) in LAYERS.items():
        if args.only and name not in args.only:
            continue
        rng = np.random.default_rng(0)
        proto, w, oh = layer_model(c, o, h, k, s, p, op, rng)
        x = rng.standard_normal((1, c, h, h)).astype(np.float32)
        import torch
        ref = torch.nn.functional.conv_transpose2d(
            torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=s, padding=p,
            output_padding=op).numpy().astype(np.float32)
        cfgs, tune_s = [], {}
        for layout in (tc.Layout.NCHW, tc.Layout.NHWC):
            model = tc.from_onnx(proto, layout=layout)
            log = os.path.join(logdir, f"{name}_{layout.value}.jsonl")
            t0 = time.perf_counter()
            if args.trials:
                tc.tune_model(model, trials=args.trials, log=log)
            tune_s[layout.value] = time.perf_counter() - t0
            cm = tc.compile_model(model, log=log if os.path.exists(log) else None)
            cfgs += [Config(TECOMP, f"{layout.value} model", n, lambda cm=cm: cm(x),
                            tecomp_threads(n), lambda cm=cm: cm(x)) for n in thread_counts()]
        cfgs += ort_configs(proto.SerializeToString(), {"x": x}, ref.shape, lambda a: a, "")
        cfgs += conv_transpose2d_peers(x, w, s, p, op)
        print(f"\n== {name}: C{c} -> O{o}, {h}x{h} -> {oh}x{oh}, k{k} s{s} p{p} op{op} "
              f"(tuned {args.trials} trials: NCHW {tune_s['NCHW']:.0f} s, NHWC "
              f"{tune_s['NHWC']:.0f} s)", flush=True)
        res = run_comparison(cfgs, ref, 2.0 * c * o * k * k * h * h, peak=peak,
                             rounds=args.rounds)
        rows.append((name, res))
    print(f"\n{'layer':<16} {'tecomp':>24} {'ms':>8} {'best peer':>28} {'ms':>8} {'ratio':>6}")
    for name, res in rows:
        t, q = res.comparison.tecomp, res.comparison.peer
        print(f"{name:<16} {t.config.label:>24} {t.median * 1e3:8.4f} {q.config.label:>28} "
              f"{q.median * 1e3:8.4f} {res.ratio:6.2f}")
    print(f"geomean ratio {geomean([r.ratio for _, r in rows]):.3f} over {len(rows)} layers")


if __name__ == "__main__":
    main()
