"""A network's tuned layers beside the strongest fair peer of each, from one run.

    benchmarks/run.sh network_vs_peers.py --network resnet50 --layout NHWC \\
        --log direct=tuning_logs/resnet50_nhwc.jsonl [--log implicit_gemm=LOG2] \\
        [--log winograd=LOG3] [--rounds 5]

For every distinct layer of the layer set (batch 1 unless ``--batch``), each ``--log METHOD=PATH``
gives the best record of that layer built with that conv method (a method that does not compute a
layer, Winograd a strided one, is left out there; ``flat``: a 1x1 unpadded layer computed on its
image viewed as one row of pixels (a strided one after a copy of the pixels it reads), called
on views of the same arrays; ``METHOD/LABEL=PATH``
names a second log of one method, e.g. one tuned on another CPU), its weight bound at build time
(``tc.build(..., constants=)``: a packed weight is packed once, as in a compiled model, not in
the timed call); every method's kernel is a
tecomp configuration (at 1 and 2 threads). Peers, each at 1 and 2 threads: torch eager in NCHW and
channels_last with the weight in the same memory format, ``torch.jit.freeze``d ``nn.Conv2d`` in
both formats (oneDNN packs the weight once), ONNX Runtime with every graph optimization; for the
dense layer ``F.linear`` with its stored ``(out, in)`` weight, a frozen ``nn.Linear``, numpy and
ORT's Gemm. All timed with the protocol of ``tecomp.bench`` (interleaved shuffled rounds, median
of each round's fastest batch, spread printed). Prints per layer tecomp ms, the best peer and its
ms, the ratio (best peer / tecomp: above 1, tecomp is faster), GFLOP/s, the share of the FMA
peak, and the share of the layer's roofline bound with which bound it is: ``fma`` (the FMA peak)
or ``mem`` (its inputs, weights and output read once at the read bandwidth measured, here, for a
buffer of that size, as ``tecomp.bench.peak.measure_bandwidth``); then the geometric mean of the
ratios, the slowest layer and the count-weighted latency.

``--other-log METHOD=PATH`` (repeatable) adds tecomp's kernels of the *other* layout: a log tuned
for NHWC beside an NCHW table (or the reverse), its kernel run on that layout's copy of the same
data (weights HWIO / OIHW), made once outside the timing, exactly as the peers' configurations
of the other memory format get theirs (torch ``channels_last`` in an NCHW table, torch NCHW and
ORT in an NHWC one); its output is transposed back only to check it. This is the per-layer
view of a model run channels-last end to end (``tc.from_onnx(layout=)``, torch's
``model.to(memory_format=torch.channels_last)``), where only the model's input and output change
layout. The summary then gives the figures with tecomp's own-layout kernels alone too.
"""
import argparse
import dataclasses
import math

import numpy as np

import tecomp as tc
from tecomp.bench.peak import measure_bandwidth, measure_peak, roofline_seconds
from tecomp.bench.peers import skipped, tecomp_configs
from tecomp.bench.protocol import TECOMP
from tecomp.bench.report import compare_workload, geomean, print_header, print_host_check
from tecomp.codegen.memory import aligned_copy
from tecomp.workloads.networks import FLAT, layer_set, layer_specs, layer_weights, method_applies


def layer_name(wl) -> str:
    p = wl.params
    if "KH" not in p:
        return f"dense {p['M']}x{p['K']} -> {p['N']}"
    return (f"conv C{p['C']} H{p['H']} O{p['O']} k{p['KH']} s{p['stride']} p{p['padding']}"
            + (f" g{p['groups']}" if p["groups"] != 1 else ""))


def footprint(wl, x) -> int:
    """Bytes a layer must move at least: its inputs (weights included) and its output."""
    out = wl.dag.outputs[0]
    return sum(a.nbytes for a in x) + int(np.prod(out.shape)) * np.dtype(out.dtype.name).itemsize


def bound(flops: float, nbytes: int, peak: float, bw: float, t: float) -> str:
    """``"NN% fma"`` or ``"NN% mem"``: the share of the roofline bound ``t`` reaches."""
    least = roofline_seconds(flops, nbytes, peak, bw)
    kind = "fma" if least == flops / (peak * 1e9) else "mem"
    return f"{least / t:4.0%} {kind}"


OTHER = {"NCHW": "NHWC", "NHWC": "NCHW"}
#: a conv layer's (data, weight) in one layout -> the other's, and an output back
TO_OTHER = {"NCHW": ((0, 2, 3, 1), (2, 3, 1, 0)), "NHWC": ((0, 3, 1, 2), (3, 2, 0, 1))}
BACK = {"NCHW": (0, 3, 1, 2), "NHWC": (0, 2, 3, 1)}


def layer_kernel(wl, base_wl, x, path, method):
    """The best kernel of ``path`` for workload ``wl`` (a ``layer_set`` workload of ``method``)
    with its weight bound, on arrays ``x`` of the layer's own shapes (``base_wl``'s); None
    where the log has no record of it."""
    # the weights are the network's constants: packed once at build time, as the peers' are
    # (jit.freeze, ORT) and as tc.compile_model does
    consts = {t.name: a for t, a in zip(wl.dag.inputs, x) if t.name in layer_weights(wl)}
    try:
        k = tc.build(wl.dag, log=path, constants=consts)
    except LookupError:
        return None
    # FLAT: the kernel of the flattened image runs on views of the layer's arrays
    return tc.ReshapedKernel(k, [base_wl.dag.outputs[0].shape]) if method == FLAT else k


def other_layout_configs(kernel, x, layout, label):
    """tecomp configurations of a kernel of the other layout than ``layout`` on ``x`` (that
    layout's arrays), its output transposed back to ``layout`` for the check only."""
    back = BACK[layout]
    return [dataclasses.replace(c, output=lambda c=c: np.ascontiguousarray(
                c.output().transpose(back)))
            for c in tecomp_configs(kernel, kernel.call_inputs(x), variant=label)]


def own_best(res, other_labels):
    """The fastest timing of tecomp's own-layout configurations in ``res``."""
    own = [t for t in res.comparison.timings
           if t.config.system == TECOMP and t.config.variant not in other_labels]
    return min(own, key=lambda t: t.median) if own else None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--layout", default="NHWC", choices=("NHWC", "NCHW"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", action="append", required=True, metavar="METHOD[/LABEL]=PATH",
                    help="a tuning log of the layer set built with conv method METHOD; a "
                         "/LABEL tells two logs of one method apart (e.g. direct/znver3=...)")
    ap.add_argument("--layers", default=None, metavar="I,J,...",
                    help="time only these layers (1-based, in the order of the layer set) again")
    ap.add_argument("--other-log", action="append", default=[], metavar="METHOD[/LABEL]=PATH",
                    help="a tuning log of the other layout (NHWC beside an NCHW table): its "
                         "kernels run on that layout's copy of the data, as the peers' "
                         "configurations of that memory format do")
    args = ap.parse_args()
    logs = [tuple(s.split("=", 1)) for s in args.log]  # (label, path)
    others = [tuple(s.split("=", 1)) for s in args.other_log]
    other = OTHER[args.layout]
    other_labels = {f"{label} {other}" for label, _ in others}
    method_of = {label: label.split("/", 1)[0] for label, _ in logs + others}
    specs = [sp for sp, _ in layer_specs(args.network)]

    def method_sets(layout, labelled):
        """{method: {layer spec: workload}}: a method may compute only some layers (winograd:
        the 3x3 stride-1 ones)."""
        return {m: dict(zip([sp for sp in specs if method_applies(sp, m)],
                            [wl for wl, _ in layer_set(args.network, batch=args.batch,
                                                       layout=layout, method=m)]))
                for m in {method_of[label] for label, _ in labelled}}
    sets, other_sets = method_sets(args.layout, logs), method_sets(other, others)
    base = layer_set(args.network, batch=args.batch, layout=args.layout)
    other_base = [wl for wl, _ in layer_set(args.network, batch=args.batch, layout=other)]
    peak = measure_peak()
    print_header(print, peak)
    only = None if args.layers is None else {int(v) - 1 for v in args.layers.split(",")}
    rows = []
    for i, ((wl0, count), spec) in enumerate(zip(base, specs)):
        if only is not None and i not in only:
            continue
        x = wl0.make_inputs(np.random.default_rng(i))
        kernels = {}
        for label, path in logs:
            wl = sets[method_of[label]].get(spec)
            k = None if wl is None else layer_kernel(wl, wl0, x, path, method_of[label])
            if k is not None:
                kernels[label] = k
        extra = []
        if spec[0] == "conv" and others:
            perm = TO_OTHER[args.layout]
            xo = [aligned_copy(np.ascontiguousarray(a.transpose(p))) for a, p in zip(x, perm)]
            for label, path in others:
                wl = other_sets[method_of[label]].get(spec)
                k = None if wl is None else layer_kernel(wl, other_base[i], xo, path,
                                                         method_of[label])
                if k is not None:
                    extra += other_layout_configs(k, xo, args.layout, f"{label} {other}")
        if not kernels and not extra:
            rows.append((wl0, count, None, 0, 0.0))
            continue
        print(f"\n== {layer_name(wl0)} (x{count})", flush=True)
        res = compare_workload(wl0, kernels, x, name="dense" if "KH" not in wl0.params
                               else "conv2d", peak=peak, rounds=args.rounds, extra=extra)
        nbytes = footprint(wl0, x)
        bw = measure_bandwidth(nbytes)
        print(f"bound        {nbytes / 1e6:.2f} MB read at {bw:.1f} GB/s (measured for that size)")
        rows.append((wl0, count, res, nbytes, bw))
    print_host_check(print)  # the host may have changed during the run
    for line in skipped():
        print(f"skipped: {line}")
    print(f"\n{args.network} batch {args.batch} {args.layout}, fp32: tecomp (best of "
          f"{', '.join([label for label, _ in logs] + sorted(other_labels))}, 1 or 2 threads) "
          f"beside the best fair peer")
    print(f"{'layer':<40} {'n':>2} {'tecomp ms':>10} {'best peer':<38} {'peer ms':>9} "
          f"{'ratio':>6} {'GFLOP/s':>8} {'peak':>5} {'bound':>9}"
          + ("  own-layout ms  ratio" if others else ""))
    ratios, own_ratios, lat_t, lat_own, lat_p = [], [], 0.0, 0.0, 0.0
    for wl, count, res, nbytes, bw in rows:
        if res is None:
            print(f"{layer_name(wl):<40} {count:>2} {'untuned':>10}")
            continue
        t, p = res.comparison.tecomp, res.comparison.peer
        ratios.append((res.ratio, layer_name(wl)))
        lat_t += count * t.median
        lat_p += count * p.median
        g = res.flops / t.median / 1e9
        line = (f"{layer_name(wl):<40} {count:>2} {t.median * 1e3:10.3f} {p.config.label:<38} "
                f"{p.median * 1e3:9.3f} {res.ratio:6.2f} {g:8.1f} {g / peak:5.0%} "
                f"{bound(res.flops, nbytes, peak, bw, t.median):>9}")
        if others:
            o = own_best(res, other_labels)
            if o is not None:
                own_ratios.append((p.median / o.median, layer_name(wl)))
                lat_own += count * o.median
                line += f" {o.median * 1e3:14.3f} {p.median / o.median:6.2f}"
        print(line)
    summary("", ratios, lat_t, lat_p)
    if others and len(own_ratios) == len(ratios):
        summary(f"with tecomp's {args.layout} kernels only: ", own_ratios, lat_own, lat_p)


def summary(what, ratios, lat_t, lat_p):
    if not ratios:
        return
    slow = min(ratios)
    print(f"\n{what}geometric mean ratio {geomean([r for r, _ in ratios]):.3f} over "
          f"{len(ratios)} layers; slowest layer {slow[0]:.2f}x ({slow[1]}); count-weighted "
          f"latency tecomp {lat_t * 1e3:.2f} ms, best peers {lat_p * 1e3:.2f} ms "
          f"({lat_p / lat_t if lat_t else math.nan:.3f}x)")

if __name__ == "__main__":
    main()
