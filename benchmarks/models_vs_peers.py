"""Whole models end to end: tecomp (``tc.from_onnx`` + ``tc.compile_model`` from a tuning log)
beside ONNX Runtime (every graph optimization) and torch (eager and ``torch.jit.freeze``), each at
1 and 2 threads, batch 1, fp32, with the protocol of ``tecomp.bench``, from one run. Every
system's output is checked against ONNX Runtime's.

    benchmarks/run.sh models_vs_peers.py [--only resnet50 mobilenet_v2 bert_base]
        [--log resnet50=tuning_logs/resnet50_model.jsonl ...] [--rounds 5] [--cache DIR]

Models: ResNet-50 and MobileNet-V2 (plain-torch definitions in torch_models.py, random weights
with random BatchNorm statistics) and a BERT-base encoder (transformers' ``BertModel(BertConfig())``,
sequence length 128, where transformers is installed), exported to ONNX once (TorchScript
exporter, opset 17) into ``--cache``. A model without ``--log`` runs tecomp's default schedules.
"""
import argparse
import os
import time
import warnings

import numpy as np
import torch
from torch_models import export_onnx, models

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import note_skipped, skipped
from tecomp.bench.protocol import TECOMP, Config
from tecomp.bench.report import print_header, run_comparison
from tecomp.bench.threads import tecomp_threads, thread_counts, torch_threads


def ort_configs(path, feeds):
    import onnxruntime as ort
    cfgs = []
    for n in thread_counts():
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads, so.inter_op_num_threads = n, 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name = sess.get_outputs()[0].name
        cfgs.append(Config("onnxruntime", "", n, lambda s=sess: s.run([name], feeds), None,
                           lambda s=sess: s.run([name], feeds)[0]))
    return cfgs


def torch_configs(module, inputs):
    def first(r):
        r = r[0] if isinstance(r, (tuple, list)) else getattr(r, "last_hidden_state", r)
        return r.detach().numpy().copy()
    variants = [("eager", module)]
    try:
        with torch.no_grad():
            frozen = torch.jit.freeze(torch.jit.trace(module, inputs, strict=False).eval())
            frozen(*inputs), frozen(*inputs)
        variants.append(("jit.freeze", frozen))
    except Exception as e:  # noqa: BLE001 - a model jit cannot trace drops that variant only
        note_skipped("torch jit.freeze", e)
    cfgs = []
    for label, m in variants:
        def run(m=m):
            with torch.inference_mode():
                return m(*inputs)
        cfgs += [Config("torch", label, n, run, torch_threads(n), lambda run=run: first(run()))
                 for n in thread_counts()]
    return cfgs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--log", action="append", default=[], metavar="MODEL=PATH")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".onnx_cache"))
    args = ap.parse_args()
    logs = dict(s.split("=", 1) for s in args.log)
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for name, (module, inputs, input_names) in models().items():
        if args.only and name not in args.only:
            continue
        path = export_onnx(name, module, inputs, input_names, args.cache)
        feeds = {k: v.numpy() for k, v in zip(input_names, inputs)}
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cm = tc.compile_model(tc.from_onnx(path), target="llvm", log=logs.get(name))
        compile_s = time.perf_counter() - t0
        xs = [feeds[k] for k in input_names]
        cfgs = [Config(TECOMP, "tuned" if name in logs else "default", n,
                       lambda: cm(*xs), tecomp_threads(n),
                       lambda: np.asarray(cm(*xs) if len(cm.output_names) == 1 else cm(*xs)[0]))
                for n in thread_counts()]
        ort = ort_configs(path, feeds)
        ref = ort[0].output()
        print(f"\n== {name}: tecomp compiled in {compile_s:.0f} s, {len(cm.steps)} kernels, "
              f"{len(cm.untuned)} untuned ({len(w)} warnings)", flush=True)
        res = run_comparison(cfgs + ort + torch_configs(module, inputs), ref, 0.0, peak=None,
                             rounds=args.rounds)
        rows.append((name, res))
    for line in skipped():
        print(f"skipped: {line}")
    print(f"\n{'model':<14} {'tecomp ms':>10} {'best peer':<30} {'peer ms':>9} {'ratio':>6}")
    for name, res in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        print(f"{name:<14} {t.median * 1e3:10.2f} {p.config.label:<30} {p.median * 1e3:9.2f} "
              f"{res.ratio:6.3f}")


if __name__ == "__main__":
    main()
