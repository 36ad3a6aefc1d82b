"""What the subcommands share: one-line errors, workloads from the command line, the peer library
of each workload, and timing tecomp beside it."""
from __future__ import annotations

import inspect
import re

import numpy as np


class CliError(Exception):
    """An error the CLI reports as one line on stderr, exiting with ``code``."""

    def __init__(self, msg: str, code: int = 1):
        super().__init__(msg)
        self.code = code


def one_line(text) -> str:
    """``text`` with its lines joined (an error message printed by the CLI is one line)."""
    return " ".join(str(text).split())


# ----------------------------------------------------------------------------- workloads
#: Builder parameters that are not sizes (never filled by --shape).
_NOT_SHAPE = ("dtype", "layout", "method")


def _builder(name: str):
    from ..testing import workloads as W
    if name not in W.WORKLOADS:
        raise CliError(f"unknown workload {name!r}; known: {', '.join(W.WORKLOADS)}", code=2)
    if name in ("conv2d_nchw", "conv2d_nhwc"):  # keyword wrappers of conv2d
        return W.conv2d
    return W.WORKLOADS[name]


def builder_params(name: str) -> list:
    """``(name, has_default)`` of the builder's parameters, in order."""
    sig = inspect.signature(_builder(name))
    return [(p.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def shape_names(name: str) -> list:
    """The parameters ``--shape`` fills, in order (the sizes first, then the other numbers)."""
    return [p for p, _ in builder_params(name) if p not in _NOT_SHAPE]


def parse_shape(tokens) -> list:
    """``--shape`` values: ``64 64 64``, ``64x64x64`` or ``64,64,64`` (mixed too), as ints."""
    out = []
    for tok in tokens or ():
        for part in re.split(r"[xX,]", str(tok).strip()):
            try:
                v = int(part)
            except ValueError:
                raise CliError(f"bad --shape value {part!r}: shape values are integers "
                               f"(e.g. --shape 64 64 64 or --shape 64x64x64)", code=2) from None
            if v <= 0:
                raise CliError(f"bad --shape value {v}: shape values must be positive", code=2)
            out.append(v)
    return out


def make_workload(args):
    """The :class:`~tecomp.testing.workloads.Workload` named by ``args`` (``workload``, ``shape``,
    ``param``, ``dtype``, ``method``); every problem is a :class:`CliError`."""
    from ..testing.workloads import get_workload, parse_value
    name = args.workload
    params = builder_params(name)
    known = [p for p, _ in params]
    names = shape_names(name)
    shape = parse_shape(args.shape)
    if len(shape) > len(names):
        raise CliError(f"{name} takes at most {len(names)} --shape values ({' '.join(names)}), "
                       f"got {len(shape)}", code=2)
    kw = dict(zip(names, shape))
    for p in getattr(args, "param", None) or ():
        if "=" not in p:
            raise CliError(f"bad --param {p!r}: expected KEY=VALUE", code=2)
        k, v = p.split("=", 1)
        k = k.strip()
        if k not in known:
            raise CliError(f"{name} has no parameter {k!r} (parameters: {' '.join(known)})",
                           code=2)
        kw[k] = parse_value(v)
    if getattr(args, "dtype", None):
        kw["dtype"] = args.dtype
    method = getattr(args, "method", None)
    if method:
        if "method" not in known:
            raise CliError(f"--method applies to the conv2d workloads, not {name}", code=2)
        kw["method"] = method
    required = [p for p, has_default in params if not has_default]
    missing = [p for p in required if p not in kw]
    if missing:
        need = [p for p in names if p in required]
        raise CliError(f"{name} needs --shape {' '.join(need)} (missing {' '.join(missing)})",
                       code=2)
    try:
        return get_workload(name, **kw)
    except (TypeError, ValueError) as e:
        raise CliError(f"{name}: {one_line(e)}", code=2) from None


def parse_target(text: str):
    from ..target import Target
    try:
        return Target.parse(text)
    except ValueError as e:
        raise CliError(f"bad --target: {one_line(e)}", code=2) from None


def workload_help() -> str:
    from ..testing.workloads import WORKLOADS
    lines = []
    for name in WORKLOADS:
        lines.append(f"  {name:<17} --shape {' '.join(shape_names(name)[:_n_required(name)])}")
    return "workloads (--shape values in order; other parameters with --param KEY=VALUE):\n" + \
        "\n".join(lines)


def _n_required(name: str) -> int:
    req = {p for p, d in builder_params(name) if not d}
    return sum(1 for p in shape_names(name) if p in req)


# ----------------------------------------------------------------------------- peers
def peer(name: str, wl, inputs):
    """``(label, fn)``: the library implementation tecomp is compared with, called as ``fn()`` on
    ``inputs`` (conversions done beforehand, outside the timed call); it returns the output as
    tecomp lays it out, so it can be checked too."""
    p = wl.params
    if name in ("matmul", "batch_matmul"):
        a, b = inputs
        if name == "matmul":
            a = a.T if p.get("transpose_a") else a
            b = b.T if p.get("transpose_b") else b
            return "numpy", lambda: a @ b
        a = np.swapaxes(a, 1, 2) if p.get("transpose_a") else a
        b = np.swapaxes(b, 1, 2) if p.get("transpose_b") else b
        return "numpy", lambda: np.matmul(a, b)
    if name.startswith("conv2d"):
        fn = _torch_conv2d(wl, inputs)
        if fn is not None:
            return "torch", fn
        return "numpy", lambda: wl.reference(inputs)[0]
    if name in ("csr_spmm", "bsr_spmm"):
        try:
            import scipy.sparse as sp
        except ImportError:
            return "numpy", lambda: wl.reference(inputs)[0]
        data, indices, indptr, dense = inputs
        if name == "csr_spmm":
            m = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, dense.shape[0]))
        else:
            bs_r, bs_c = data.shape[1:]
            m = sp.bsr_matrix((data, indices, indptr),
                              shape=((len(indptr) - 1) * bs_r, dense.shape[0]))
        return "scipy", lambda: m @ dense
    if name == "sddmm":
        a, b, indices, indptr = inputs
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        cols = np.asarray(indices)
        return "numpy", lambda: np.einsum("pk,pk->p", a[rows], b[cols])
    return "numpy", lambda: wl.reference(inputs)[0]


def _torch_conv2d(wl, inputs):
    try:
        import torch
        import torch.nn.functional as F
    except Exception:  # noqa: BLE001 - no (working) torch: the numpy reference instead
        return None
    p = wl.params
    data, weight = inputs
    pad = p["padding"]
    pad = tuple(pad) if isinstance(pad, (tuple, list)) else (pad,)
    if len(pad) == 4:  # (top, left, bottom, right)
        if pad[0] != pad[2] or pad[1] != pad[3]:
            return None  # asymmetric padding: torch's conv2d has none
        pad = pad[:2]
    pad = pad if len(pad) == 2 else pad * 2
    if p["layout"] == "NCHW":
        x, w = torch.from_numpy(data), torch.from_numpy(weight)
        back = lambda y: y  # noqa: E731
    else:  # NHWC data, HWIO weight: torch's channels-last memory format, no copy
        x = torch.from_numpy(data).permute(0, 3, 1, 2)
        w = torch.from_numpy(weight).permute(3, 2, 0, 1).contiguous()
        back = lambda y: y.permute(0, 2, 3, 1)  # noqa: E731
    kw = dict(stride=p["stride"], padding=pad, dilation=p["dilation"], groups=p["groups"])

    def run():
        with torch.no_grad():
            return back(F.conv2d(x, w, **kw)).numpy()
    return run


def check(outs, refs):
    """``(ok, max relative error)`` of outputs against references."""
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    ok, err = True, 0.0
    for o, r in zip(outs, refs):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape:
            return False, float("inf")
        if o.size:
            err = max(err, float(np.max(np.abs(o.astype(np.float64) - r) / (np.abs(r) + 1e-3))))
        ok = ok and bool(np.allclose(o, r, rtol=1e-3, atol=1e-3))
    return ok, err


def flop_count(wl, inputs) -> float:
    return float(wl.dag.flop_count(inputs={t.name: a for t, a in zip(wl.dag.inputs, inputs)}))


def compare(name: str, wl, kernel, inputs, repeat: int, label: str, out=print) -> int:
    """Check ``kernel`` on ``inputs``, time it and the peer library in this process and print both
    and their ratio; returns 0 when the result is correct, else 1."""
    from ..timing import time_callable
    # tecomp is timed before anything calls numpy/BLAS here: BLAS worker threads that spin after
    # a call would take the cores from tecomp's parallel loops for a while
    outs = kernel(*inputs)
    flops = flop_count(wl, inputs)
    t = time_callable(lambda: kernel(*inputs), repeat=repeat)
    refs = wl.reference(inputs)
    ok, err = check(outs, refs)
    peer_label, fn = peer(name, wl, inputs)
    peer_ok, _ = check(fn(), refs)
    tp = time_callable(fn, repeat=repeat)
    out(f"check        {'ok' if ok else 'MISMATCH'} against the numpy/scipy reference "
        f"(max relative error {err:.2e})")
    out(f"{'':12} {'ms':>10}  {'GFLOP/s':>8}")
    out(f"{'tecomp':<12} {t * 1e3:10.4f}  {flops / t / 1e9:8.2f}  ({label})")
    out(f"{peer_label:<12} {tp * 1e3:10.4f}  {flops / tp / 1e9:8.2f}"
        + ("" if peer_ok else "  (its result differs from the reference)"))
    out(f"ratio        {tp / t:.3f}x {peer_label} ({peer_label} time / tecomp time: above 1, "
        f"tecomp is faster)")
    if not ok:
        raise CliError(f"tecomp's result does not match the reference (max relative error "
                       f"{err:.2e})")
    return 0
