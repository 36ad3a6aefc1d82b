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
from tecomp.bench.protocol import TECOMP, Config
from tecomp.bench.report import geomean, print_header, run_comparison
from tecomp.bench.threads import tecomp_threads, thread_counts, torch_threads

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


def _frozen(torch, w, s, p, op, fmt, tx):
    """``nn.ConvTranspose2d`` with the weight, ``jit.freeze``d (the weight packed once)."""
    c, o, k, _ = w.shape
    m = torch.nn.ConvTranspose2d(c, o, k, stride=s, padding=p, output_padding=op, bias=False)
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
    frozen = torch.jit.freeze(torch.jit.script(m.eval().to(memory_format=fmt)))
    with torch.inference_mode():
        for _ in range(2):  # the profiling executor specializes on the first calls
            frozen(tx)
    return frozen


def torch_configs(x, w, s, p, op) -> list:
    """torch eager ``conv_transpose2d`` and a ``jit.freeze``d module, in NCHW and channels_last
    (input and weight in that format, converted once), at each thread count."""
    import torch
    import torch.nn.functional as F
    cfgs = []
    for fmt, variant in ((torch.contiguous_format, "NCHW"), (torch.channels_last, "channels_last")):
        tx = torch.from_numpy(x).contiguous(memory_format=fmt)
        tw = torch.from_numpy(w).contiguous(memory_format=fmt)
        fns = {f"eager {variant}": lambda tx=tx, tw=tw: F.conv_transpose2d(
            tx, tw, stride=s, padding=p, output_padding=op)}
        fns[f"jit.freeze {variant}"] = lambda tx=tx, m=_frozen(torch, w, s, p, op, fmt, tx): m(tx)
        for label, fn in fns.items():
            def run(fn=fn):
                with torch.inference_mode():
                    return fn()
            cfgs += [Config("torch", label, n, run, torch_threads(n),
                            lambda run=run: run().contiguous().numpy().copy())
                     for n in thread_counts()]
    return cfgs


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
        cfgs += torch_configs(x, w, s, p, op)
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
