"""Where a model's time goes, layer by layer, against ONNX Runtime: tecomp's per-step times in the
compiled model (``CompiledModel.profile``) beside ORT's per-node kernel times (its profiler), both
at 2 threads, in one process, alternating over rounds (each layer's least time over the rounds).

    benchmarks/run.sh layers_vs_ort.py --model resnet50=tuning_logs/znver3/resnet50.jsonl
        [--rounds 3] [--cache benchmarks/.onnx_cache]

Convolutions are matched in order (both runtimes keep the model's order, one kernel per conv
with its epilogue fused); the table gives each conv's time in both and the ratio, then the
other steps of each runtime. A model without convolutions (BERT) gets a table per operator kind
instead. ORT's profiler adds a little time to each node: its sums read a few percent above its
plain call.
"""
import argparse
import collections
import json
import os
import warnings

import numpy as np
import onnxruntime as ort

import tecomp as tc

CONV_OPS = ("Conv", "FusedConv", "NchwcConv")


def ort_profile(path: str, feeds: dict, calls: int, prefix: str) -> list:
    """``[(least microseconds, op, output shapes)]`` per ORT node over ``calls`` calls (the first
    three, warm-up, left out), in run order."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 2
    so.enable_profiling = True
    so.profile_file_prefix = prefix
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(s.get_inputs(), feeds)}
    for _ in range(calls + 3):
        s.run(None, feeds)
    f = s.end_profiling()
    with open(f) as fh:
        events = json.load(fh)
    os.remove(f)
    per = collections.OrderedDict()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            shapes = [list(o.values())[0] for o in e["args"].get("output_type_shape", [])]
            per.setdefault(e["name"], []).append((e["dur"], e["args"].get("op_name"), shapes))
    return [(min(d for d, _, _ in v[3:]), v[0][1], v[0][2]) for v in per.values()]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, metavar="NAME=LOG")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10, help="calls per round in each runtime")
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".onnx_cache"))
    args = ap.parse_args()
    for item in args.model:
        name, _, log = item.partition("=")
        path = os.path.join(args.cache, f"{name}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cm = tc.compile_model(tc.from_onnx(path), log=log)
        rng = np.random.default_rng(0)
        xs = [rng.integers(0, 2, s).astype(d) if d.kind in "iu" else
              rng.standard_normal(s).astype(d) for s, d in cm.input_specs]
        ours = theirs = None
        for _ in range(args.rounds):
            prof = cm.profile(*xs, repeat=args.calls)
            names = [n for n, _ in prof]
            ours = [t for _, t in prof] if ours is None else [min(a, b) for a, (_, b) in
                                                              zip(ours, prof)]
            cur = ort_profile(path, xs, args.calls, f"/tmp/layers_vs_ort_{os.getpid()}")
            theirs = cur if theirs is None else [(min(a[0], b[0]), a[1], a[2])
                                                 for a, b in zip(theirs, cur)]
        print(f"== {name} ({log}), 2 threads, {args.rounds} rounds of {args.calls} calls; ms")
        print(f"tecomp steps sum {sum(ours) * 1e3:.3f}, ORT nodes sum "
              f"{sum(d for d, *_ in theirs) / 1e3:.3f}")
        mine = [i for i, n in enumerate(names) if n.startswith("conv2d")]
        other = [i for i, (_, op, _) in enumerate(theirs) if op in CONV_OPS]
        if mine and len(mine) == len(other):
            print(f"{'tecomp':>8} {'ORT':>8} {'ratio':>6}  output, tecomp step")
            for a, b in zip(mine, other):
                d, _, shape = theirs[b]
                print(f"{ours[a] * 1e3:8.3f} {d / 1e3:8.3f} {ours[a] * 1e6 / max(d, 1):5.2f}x  "
                      f"{shape} {names[a][:70]}")
            print(f"convolutions: tecomp {sum(ours[i] for i in mine) * 1e3:.3f}, ORT "
                  f"{sum(theirs[i][0] for i in other) / 1e3:.3f}")
            for i, n in enumerate(names):
                if i not in mine:
                    print(f"  tecomp {ours[i] * 1e3:8.3f}  {n[:80]}")
            for i, (d, op, shape) in enumerate(theirs):
                if i not in other:
                    print(f"  ORT    {d / 1e3:8.3f}  {op} {shape}")
            continue
        agg, cnt = collections.Counter(), collections.Counter()
        for n, t in zip(names, ours):
            kind = n.split(" (")[0]
            agg[kind] += t
            cnt[kind] += 1
        print("tecomp by fused step kind:")
        for k, v in agg.most_common():
            print(f"  {v * 1e3:9.3f}  x{cnt[k]:<4d} {k}")
        agg, cnt = collections.Counter(), collections.Counter()
        for d, op, shape in theirs:
            agg[f"{op} {shape}"] += d / 1e3
            cnt[f"{op} {shape}"] += 1
        print("ORT by operator and output shape:")
        for k, v in agg.most_common():
            print(f"  {v:9.3f}  x{cnt[k]:<4d} {k}")


if __name__ == "__main__":
    main()
