"""Whole models end to end: tecomp (``tc.from_onnx`` + ``tc.compile_model`` from a tuning log)
beside ONNX Runtime (every graph optimization) and torch (eager and ``torch.jit.freeze``), each at
1 and 2 threads, batch 1, fp32, with the protocol of ``tecomp.bench``, from one run. Every
system's output is checked against ONNX Runtime's.

    benchmarks/run.sh models_vs_peers.py [--only resnet50 mobilenet_v2 bert_base]
        [--log mobilenet_v2=tuning_logs/znver3/mobilenet_v2.jsonl ...] [--layout auto]
        [--rounds 5] [--cache DIR] [--export-only]

Models: ResNet-50 and MobileNet-V2 (plain-torch definitions in torch_models.py, random weights
with random BatchNorm statistics) and a BERT-base encoder (transformers' ``BertModel(BertConfig())``,
sequence length 128, where transformers is installed), exported to ONNX once (TorchScript
exporter, opset 17) into ``--cache`` (``--export-only`` stops there: the files to tune with
``tecomp tune-model``). A model without ``--log`` runs tecomp's default schedules. ``--layout``
is the convolutions' layout (``tc.from_onnx(layout=)``): a log only serves the layout it was
tuned in (``tecomp tune-model --layout``, default auto on both sides).

The last table has one row per model: each system's best configuration (over thread counts and
variants), tecomp's ratio to the best peer (above 1: tecomp faster), and the log's trials.
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
from tecomp.bench.report import print_header, print_host_check, run_comparison
from tecomp.bench.threads import tecomp_threads, thread_counts, torch_threads

MODEL_NAMES = ["resnet50", "mobilenet_v2", "bert_base"]


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
    ap.add_argument("--only", nargs="+", default=None, choices=MODEL_NAMES)
    ap.add_argument("--log", action="append", default=[], metavar="MODEL=PATH")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".onnx_cache"))
    ap.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto",
                    help="the layout tecomp runs the convolutions in (as tuned)")
    ap.add_argument("--export-only", action="store_true",
                    help="write the ONNX files into --cache and stop")
    args = ap.parse_args()
    logs = dict(s.split("=", 1) for s in args.log)
    unknown = set(logs) - set(MODEL_NAMES)
    if unknown:
        ap.error(f"--log for unknown model(s) {sorted(unknown)}; models: {MODEL_NAMES}")
    for name, log in logs.items():
        if not os.path.isfile(log):
            ap.error(f"--log {name}={log}: no such file")
    layout = tc.Layout.AUTO if args.layout == "auto" else tc.Layout(args.layout.upper())
    chosen = models(args.only)
    if args.export_only:
        for name, (module, inputs, input_names) in chosen.items():
            print(export_onnx(name, module, inputs, input_names, args.cache))
        return
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for name, (module, inputs, input_names) in chosen.items():
        path = export_onnx(name, module, inputs, input_names, args.cache)
        feeds = {k: v.numpy() for k, v in zip(input_names, inputs)}
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            model = tc.from_onnx(path, layout=layout)
            cm = tc.compile_model(model, target="llvm", log=logs.get(name))
        compile_s = time.perf_counter() - t0
        xs = [feeds[k] for k in input_names]
        variant = ("tuned" if name in logs else "default") + f" {model.layout.value}"
        cfgs = [Config(TECOMP, variant, n, lambda: cm(*xs), tecomp_threads(n),
                       lambda: np.asarray(cm(*xs) if len(cm.output_names) == 1 else cm(*xs)[0]))
                for n in thread_counts()]
        ort = ort_configs(path, feeds)
        ref = ort[0].output()
        tasks = model.tasks()
        n_tasks = len(tasks)
        # the FLOPs of the layers with a reduction (convolutions, matmuls), each as often as it
        # runs: the GFLOP/s column (elementwise and pooling work is left out)
        flops = sum(t.flop_count() * n for t, n in tasks)
        print(f"\n== {name}: tecomp compiled in {compile_s:.0f} s, convolutions in "
              f"{model.layout.value}, {len(cm.steps)} kernels ({n_tasks} distinct tuning "
              f"tasks), {len(cm.untuned)} layers untuned ({len(w)} warnings)", flush=True)
        for msg in w:
            print(f"  warning: {str(msg.message)[:300]}")
        res = run_comparison(cfgs + ort + torch_configs(module, inputs), ref, flops, peak=None,
                             rounds=args.rounds)
        rows.append((name, res, model.layout.value, log_summary(logs.get(name))))
    print_host_check(print)  # the host may have changed during the run
    for line in skipped():
        print(f"skipped: {line}")
    print_models_table(rows)


def log_summary(log) -> str:
    """``"N trials, S s"``: the records in a tuning log and the measuring time they span."""
    if log is None:
        return "untuned"
    recs = tc.load_records(log)
    if not recs:
        return "0 trials"
    stamps = [r.result.timestamp for r in recs]
    return f"{len(recs)} trials, {max(stamps) - min(stamps):.0f} s span"


def print_models_table(rows) -> None:
    """One row per model: the best of each system, tecomp's ratio to the best peer."""
    def best(res, system, variant=None):
        t = [x for x in res.comparison.timings if x.config.system == system
             and (variant is None or x.config.variant == variant)]
        return min(t, key=lambda x: x.median) if t else None

    def ms(t):
        return f"{t.median * 1e3:9.2f}" if t else f"{'-':>9}"

    print(f"\n{'model':<14} {'layout':<6} {'tecomp':>9} {'ORT':>9} {'torch':>9} {'jit.frz':>9} "
          f"{'best peer':<26} {'ratio':>6}  log")
    for name, res, layout, logs in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        print(f"{name:<14} {layout:<6} {ms(t)} {ms(best(res, 'onnxruntime'))} "
              f"{ms(best(res, 'torch', 'eager'))} {ms(best(res, 'torch', 'jit.freeze'))} "
              f"{p.config.label if p else '-':<26} {res.ratio:6.3f}  {logs}")
    print("(ms: median of the timing protocol's rounds, best thread count of each system; ratio: "
          "best peer / tecomp, above 1 tecomp is faster)")


if __name__ == "__main__":
    main()
