"""Check, time and print one comparison of tecomp with its peers (the protocol of
:mod:`.protocol`), as ``tecomp bench``, ``tecomp tune`` and the benchmarks print it."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .protocol import TECOMP, Comparison, compare, settle

__all__ = ["check_output", "Result", "run_comparison", "compare_workload", "print_header",
           "print_host_check", "geomean"]


def check_output(out, ref, rtol: float = 1e-3) -> tuple:
    """``(ok, max relative error)`` of ``out`` against ``ref`` (arrays or tuples of them); the
    error is scaled by the reference's magnitude so that near-zero entries do not dominate."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    if len(outs) != len(refs):
        return False, math.inf
    err = 0.0
    for o, r in zip(outs, refs):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        if o.shape != r.shape:
            return False, math.inf
        if o.size:
            scale = max(float(np.max(np.abs(r))), 1e-6)
            err = max(err, float(np.max(np.abs(o - r))) / scale)
    return err <= rtol, err


@dataclass
class Result:
    """One comparison: its timings, the FLOPs of one call, and the configurations whose output
    was wrong (left out of the timing)."""
    comparison: Comparison
    flops: float
    wrong: list

    @property
    def ratio(self) -> float:
        return self.comparison.ratio


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def print_header(out=print, peak: float | None = None) -> None:
    """The machine facts a reader needs beside the figures: CPU, BLAS, thread counts, peak."""
    import os

    from ..codegen.llvm_jit import host_cpu
    from .threads import blas_env_problem, blas_info, thread_counts
    out(f"host         {host_cpu()[0]}, {os.cpu_count()} cores; every system timed at "
        f"{' and '.join(map(str, thread_counts()))} thread(s)")
    out(f"BLAS         {blas_info()}")
    if peak:
        out(f"FMA peak     {peak:.1f} GFLOP/s fp32 (measured, all cores)")
    warn = blas_env_problem()
    if warn:
        out(f"WARNING      {warn}")
    if peak:
        print_host_check(out, peak)


def print_host_check(out=print, peak: float | None = None) -> float:
    """Print how much of the cores this process had (:func:`~tecomp.bench.peak.host_check`; the
    all-core FMA peak measured unless ``peak`` is given), with a WARNING line when another
    tenant held some: a long comparison calls it at its start and at its end. It first waits until
    this process's own threads are idle (:func:`~tecomp.bench.protocol.settle`). Returns the share."""
    from .peak import host_check
    # the libraries timed last keep spinning for a while (OpenBLAS, OpenMP, ONNX Runtime's
    # pools): measured at once, the closing check counted this process's own threads as a tenant
    settle()
    share, warn = host_check(peak)
    out(f"cores free   {share:.0%} (all-core FMA rate against the cores x one thread's)")
    if warn:
        out(f"WARNING      {warn}")
    return share


def run_comparison(configs, reference, flops: float, out=print, peak: float | None = None,
                   verbose: bool = True, **protocol) -> Result:
    """Check every configuration's output against ``reference``, time the correct ones with
    :func:`~tecomp.bench.protocol.compare` and print a table (one row per configuration, the
    fastest of each system marked) and the verdict: tecomp's best against the best peer, named.

    tecomp's configurations must be correct: a wrong tecomp output raises ``AssertionError``.
    """
    ok_cfgs, wrong = [], []
    for c in configs:
        if c.output is None:
            ok_cfgs.append(c)
            continue
        good, err = check_output(c.output(), reference)
        if good:
            ok_cfgs.append(c)
        else:
            if c.system == TECOMP:
                raise AssertionError(f"tecomp's output differs from the reference (max relative "
                                     f"error {err:.2e})")
            wrong.append((c.label, err))
    cmp = compare(ok_cfgs, **protocol)
    res = Result(cmp, flops, wrong)
    if verbose:
        _table(res, out, peak)
    t, p = cmp.tecomp, cmp.peer
    if t and p:
        out(f"verdict      {t.config.label} {t.median * 1e3:.4f} ms vs best peer "
            f"{p.config.label} {p.median * 1e3:.4f} ms: {cmp.ratio:.3f}x "
            f"({'tecomp faster' if cmp.ratio > 1 else 'tecomp behind'})")
    return res


def _table(res: Result, out, peak) -> None:
    cmp = res.comparison
    best = {}
    for t in cmp.timings:
        if t.config.system not in best or t.median < best[t.config.system].median:
            best[t.config.system] = t
    out(f"{'configuration':<44} {'ms (median)':>12} {'spread over rounds':>22} {'GFLOP/s':>8}"
        + ("  peak" if peak else ""))
    for t in sorted(cmp.timings, key=lambda t: t.median):
        g = res.flops / t.median / 1e9 if res.flops else math.nan
        mark = "*" if best[t.config.system] is t else " "
        spread = f"{t.low * 1e3:.4f}..{t.high * 1e3:.4f}"
        out(f"{mark}{t.config.label:<43} {t.median * 1e3:12.4f} {spread:>22} {g:8.2f}"
            + (f" {g / peak:5.0%}" if peak else ""))
    for label, err in res.wrong:
        out(f" {label:<43} left out: wrong output (max relative error {err:.1e})")


def compare_workload(wl, kernels: dict, inputs, name: str | None = None, out=print,
                     peak: float | None = None, extra=(), **protocol) -> Result:
    """Check and time tecomp's ``kernels`` (``{variant label: Kernel}``) of the workload ``wl``
    (a ``tecomp.workloads.Workload``: ``dag``, ``params``, ``reference``) beside the
    workload's peers, on cache-line-aligned copies of ``inputs`` (the same for every system; a
    kernel built with ``constants=`` gets the others);
    ``name`` picks the peers (default ``wl.name``; ``"dense"`` for a matmul that is a network's
    dense layer). ``extra``: further configurations timed in the same comparison (e.g. a tecomp
    kernel of the other memory format, on that format's copy of the data, as a peer's
    configuration of that format runs), each checked against the same reference."""
    from ..codegen.memory import aligned_copy
    from .peers import peers_for, tecomp_configs
    # every system reads the same cache-line-aligned arrays, as a layer's input is in a compiled
    # model (numpy's own 16-byte alignment cost tecomp's 1x1 NCHW convs up to 1.44x: every
    # vector load split across two lines), and as the search measured it
    inputs = [aligned_copy(a) for a in inputs]
    cfgs = []
    for label, k in kernels.items():
        # a kernel built with constants (weights packed once) takes the other inputs only
        cfgs += tecomp_configs(k, k.call_inputs(inputs), variant=label)
    cfgs += list(extra)
    cfgs += peers_for(name or wl.name, wl.params, inputs)
    ref = wl.reference(inputs)
    flops = float(wl.dag.flop_count(inputs={t.name: a for t, a in zip(wl.dag.inputs, inputs)}))
    return run_comparison(cfgs, ref[0] if len(ref) == 1 else ref, flops, out=out, peak=peak,
                          **protocol)
