"""A network's tuned conv layers beside torch, per layer and as a geometric mean, from one run.

    benchmarks/run.sh network_vs_torch.py --network resnet50 --layout NHWC \\
        --log direct=tuning_logs/resnet50_nhwc.jsonl [--log implicit_gemm=LOG2]

For every distinct conv layer of the layer set (batch 1 unless ``--batch``), each ``--log
METHOD=PATH`` gives the best record of that layer built with that conv method; the faster of them
is timed beside ``torch.nn.functional.conv2d`` (2 threads, fp32, the same inputs, results checked
against torch). A layer a log has no record of is reported as untuned. Prints one table: layer,
count in the network, tecomp and torch milliseconds, torch/tecomp ratio (above 1: tecomp is
faster), the method that won; then the geometric mean of the ratios, the count-weighted network
latency of both and the slowest layer's ratio.
"""
import argparse
import math
import os

import numpy as np

import tecomp as tc
from tecomp.testing.networks import layer_set
from tecomp.timing import time_callable


def torch_conv(wl, x):
    """torch's conv2d of the layer (its matmul for a dense layer), output in torch's layout."""
    import torch
    p = wl.params
    data, weight = (torch.from_numpy(v) for v in x)
    if "KH" not in p:  # a dense layer: (batch x K) @ (K x O)
        return lambda: data @ weight
    if p["layout"] == "NHWC":
        data = data.permute(0, 3, 1, 2)
        weight = weight.permute(3, 2, 0, 1).contiguous()  # HWIO -> OIHW

    def run():
        with torch.no_grad():
            return torch.nn.functional.conv2d(data, weight, stride=p["stride"],
                                              padding=p["padding"], dilation=p["dilation"],
                                              groups=p["groups"])
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--layout", default="NHWC", choices=("NHWC", "NCHW"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--log", action="append", required=True, metavar="METHOD=PATH",
                    help="a tuning log of the layer set built with conv method METHOD")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count())
    logs = [tuple(s.split("=", 1)) for s in args.log]
    rows = []
    sets = {m: layer_set(args.network, batch=args.batch, layout=args.layout, method=m)
            for m, _ in logs}
    base = layer_set(args.network, batch=args.batch, layout=args.layout)
    for i, (wl0, count) in enumerate(base):
        x = wl0.make_inputs(np.random.default_rng(0))
        t_torch = time_callable(torch_conv(wl0, x), repeat=7)
        ref = torch_conv(wl0, x)().numpy()
        if args.layout == "NHWC" and "KH" in wl0.params:
            ref = ref.transpose(0, 2, 3, 1)
        best = None
        for method, path in logs:
            wl = sets[method][i][0]
            try:
                k = tc.build(wl.dag, log=path)
            except LookupError:
                continue
            out = k(*x)
            np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)
            t = time_callable(lambda: k(*x), repeat=7)
            if best is None or t < best[0]:
                best = (t, method)
        rows.append((wl0, count, best, t_torch))
    print(f"\n{args.network} batch {args.batch} {args.layout}: tecomp (best of "
          f"{', '.join(m for m, _ in logs)}) beside torch {torch.__version__}, "
          f"{os.cpu_count()} threads, fp32")
    print(f"{'layer':<62} {'n':>2} {'tecomp ms':>10} {'torch ms':>9} {'ratio':>6}  method")
    ratios, lat_t, lat_p = [], 0.0, 0.0
    for wl, count, best, tp in rows:
        p = wl.params
        name = (f"conv C{p['C']} H{p['H']} O{p['O']} k{p['KH']} s{p['stride']} "
                f"p{p['padding']} g{p['groups']}" if "KH" in p else
                f"dense {p['M']}x{p['K']} -> {p['N']}")
        if best is None:
            print(f"{name:<62} {count:>2} {'untuned':>10} {tp * 1e3:9.3f}")
            continue
        t, method = best
        ratios.append(tp / t)
        lat_t += count * t
        lat_p += count * tp
        print(f"{name:<62} {count:>2} {t * 1e3:10.3f} {tp * 1e3:9.3f} {tp / t:6.2f}  {method}")
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\ngeometric mean ratio {g:.3f} over {len(ratios)} layers; slowest layer "
              f"{min(ratios):.2f}x; network latency (count-weighted) tecomp "
              f"{lat_t * 1e3:.2f} ms, torch {lat_p * 1e3:.2f} ms ({lat_p / lat_t:.3f}x)")


if __name__ == "__main__":
    main()
