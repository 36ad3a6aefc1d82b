"""``tecomp export``: the command line of :func:`~tecomp.deploy.export`, and the standard
workloads ``--all`` matches a log's workload keys against."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from .exporter import export
from .loader import TargetMismatchError
from .manifest import MANIFEST

__all__ = ["main_export", "standard_workloads", "workload_from_spec"]


def workload_from_spec(name: str, shape=(), params=None):
    """See :func:`tecomp.workloads.workload_from_spec` (imported lazily: loading exported
    kernels needs no workload builders)."""
    from ..workloads import workload_from_spec as build
    return build(name, shape, params)


#: Standard workloads ``export --all`` tries to match the log's workload keys with:
#: ``(name, params)`` for :func:`tecomp.workloads.get_workload`.
_STANDARD = (
    [("matmul", dict(M=n, N=n, K=n)) for n in (64, 128, 256, 512, 1024, 2048)]
    + [("batch_matmul", dict(B=b, M=n, N=n, K=n)) for b, n in ((8, 128), (16, 256), (12, 512))]
    + [(f"conv2d_{lay.lower()}", dict(N=1, C=c, H=h, W=h, O=o, KH=k, KW=k, stride=s,
                                      padding=k // 2, method=meth))
       for lay in ("NCHW", "NHWC") for meth in ("direct", "implicit_gemm")
       for c, h, o, k, s in ((64, 56, 64, 3, 1), (3, 224, 64, 7, 2), (128, 28, 128, 3, 1),
                             (256, 14, 256, 3, 1), (512, 7, 512, 3, 1), (64, 56, 64, 1, 1))]
    + [("softmax", dict(M=m, N=n)) for m, n in ((1024, 1024), (128, 4096))]
    + [("matmul_bias_relu", dict(M=n, N=n, K=n)) for n in (512, 1024)]
)


def standard_workloads():
    """The ``(name, params)`` specs ``export --all`` matches log keys against: the standard shapes
    of the benchmarks and tuning logs. Sparse workloads depend on their pattern seed and density,
    so give them with ``--workload``."""
    return list(_STANDARD)


class _NewSpec(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        specs = getattr(ns, "specs", None) or []
        specs.append({"name": value, "shape": [], "params": {}})
        ns.specs = specs


class _SpecField(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        specs = getattr(ns, "specs", None)
        if not specs:
            parser.error(f"{option_string} must follow a --workload NAME")
        spec = specs[-1]
        if self.dest == "shape":
            spec["shape"] = list(value)
        elif self.dest == "dtype":
            spec["params"]["dtype"] = value
        else:
            if "=" not in value:
                parser.error(f"--param takes KEY=VALUE, got {value!r}")
            k, v = value.split("=", 1)
            from ..workloads import parse_value
            spec["params"][k] = parse_value(v)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tecomp export",
        description="Write the best tuned kernels of a log as object code with a manifest; "
                    "tc.load(DIR) loads them without compiling. Each --workload NAME is followed "
                    "by its own --shape/--param/--dtype.",
        epilog="example: tecomp export tuning_logs/matmul.jsonl --out deploy/ "
               "--workload matmul --shape 1024 1024 1024 --workload conv2d_nhwc --shape "
               "1 64 56 56 64 3 3 1 1")
    ap.add_argument("log", help="tuning log (JSON lines)")
    ap.add_argument("--out", "-o", required=True, metavar="DIR", help="export directory")
    ap.add_argument("--workload", action=_NewSpec, metavar="NAME", dest="specs_name",
                    help="a standard workload (matmul, conv2d_nchw, csr_spmm, ...) to export")
    ap.add_argument("--shape", action=_SpecField, type=int, nargs="+", dest="shape",
                    help="the preceding workload's shape values, in its builder's order")
    ap.add_argument("--param", action=_SpecField, dest="param", metavar="KEY=VALUE",
                    help="another parameter of the preceding workload (repeatable)")
    ap.add_argument("--dtype", action=_SpecField, dest="dtype",
                    help="the preceding workload's dtype")
    ap.add_argument("--all", action="store_true",
                    help="also export every workload key of the log that a standard workload "
                         "shape (or a given --workload) rebuilds; others are skipped with a note")
    ap.add_argument("--target", default="llvm", help="records for this target (default: llvm)")
    ap.add_argument("--no-assembly", action="store_true", help="do not write assembly text")
    return ap


def main_export(argv=None) -> int:
    """``tecomp export LOG --out DIR (--workload NAME --shape ... | --all)``; returns the exit
    status (errors are one line on stderr and status 1; bad usage exits with status 2)."""
    ap = _parser()
    args = ap.parse_args(argv)
    specs = getattr(args, "specs", None) or []
    if not specs and not args.all:
        ap.error("give --workload NAME --shape ... (repeatable) or --all")
    try:
        return _run_export(args, specs)
    except (LookupError, ValueError, TypeError, FileNotFoundError, OSError,
            TargetMismatchError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"tecomp export: error: {msg}", file=sys.stderr)
        return 1


def _run_export(args, specs) -> int:
    from ..schedule.records import load_records
    dags = []
    for s in specs:
        wl = workload_from_spec(s["name"], s["shape"], s["params"])
        dags.append((wl.name, wl.dag))
    if args.all:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            recs = load_records(args.log)
        counts: dict = {}
        for r in recs:
            if r.result.is_valid:
                counts[r.workload_key] = counts.get(r.workload_key, 0) + 1
        found = {d.workload_key for _, d in dags}
        for name, params in standard_workloads():
            if all(k in found for k in counts):
                break
            try:
                wl = workload_from_spec(name, (), params)
            except ValueError:
                continue
            key = wl.dag.workload_key
            if key in counts and key not in found:
                found.add(key)
                dags.append((wl.name, wl.dag))
        for key, n in counts.items():
            if key not in found:
                print(f"note: skipped workload key {key} ({n} valid record(s)): no standard "
                      f"workload has this key; export it with --workload NAME --shape ...",
                      file=sys.stderr)
        if not dags:
            raise LookupError(f"{args.log}: no valid record of the log belongs to a standard "
                              f"workload; name them with --workload NAME --shape ...")
    m = export(args.log, args.out, dags, target=args.target, on_missing="error",
               assembly=not args.no_assembly)
    print(f"{'kernel':<36} {'workload key':<14} {'parallel':<9} {'object':>10}")
    for k in m["kernels"]:
        size = os.path.getsize(os.path.join(args.out, k["object"]))
        print(f"{k['name']:<36} {k['workload_key'][:12]:<14} {str(k['parallel']).lower():<9} "
              f"{size:>9}B")
    print(f"wrote {len(m['kernels'])} kernel(s) for {m['target']} to "
          f"{os.path.join(args.out, MANIFEST)}")
    return 0
