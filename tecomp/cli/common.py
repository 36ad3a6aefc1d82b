"""What the subcommands share: one-line errors, workloads from the command line, the peer library
of each workload, and timing tecomp beside it."""
from __future__ import annotations

import inspect
import re

from ..ops.conv2d import METHODS as CONV_METHODS


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
    from ..workloads import builders as W
    if name not in W.WORKLOADS:
        raise CliError(f"unknown workload {name!r}; known: {', '.join(W.WORKLOADS)}", code=2)
    if name in ("conv2d_nchw", "conv2d_nhwc"):  # keyword wrappers of conv2d
        return W.conv2d
    return W.WORKLOADS[name]


def _params(name: str) -> list:
    sig = inspect.signature(_builder(name))
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def builder_params(name: str) -> list:
    """``(name, has_default)`` of the builder's parameters, in order."""
    return [(p.name, p.default is not inspect.Parameter.empty) for p in _params(name)]


def shape_names(name: str) -> list:
    """The parameters ``--shape`` fills, in order: the sizes, then the integer parameters that
    follow them (a conv's stride, padding, dilation, groups) up to the first that is not an
    integer (a density, a flag: those only ``--param`` sets)."""
    out = []
    for p in _params(name):
        if p.name in _NOT_SHAPE:
            continue
        d = p.default
        if d is not inspect.Parameter.empty and (isinstance(d, bool) or not isinstance(d, int)):
            break
        out.append(p.name)
    return out


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
    """The :class:`~tecomp.workloads.Workload` named by ``args`` (``workload``, ``shape``,
    ``param``, ``dtype``, ``method``); every problem is a :class:`CliError`."""
    from ..workloads import get_workload, parse_value
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
        if method not in CONV_METHODS:
            raise CliError(f"--method {method} applies to a --network's layer set only; a "
                           f"conv2d workload takes {', '.join(CONV_METHODS)}", code=2)
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
    from ..workloads import WORKLOADS
    lines = []
    for name in WORKLOADS:
        lines.append(f"  {name:<17} --shape {' '.join(shape_names(name)[:_n_required(name)])}")
    return "workloads (--shape values in order; other parameters with --param KEY=VALUE):\n" + \
        "\n".join(lines) + "\na conv2d workload's weight is a constant, as in inference: tune " \
        "measures and bench runs kernels built with it bound (packed once, as the peers pack " \
        "theirs)"


def _n_required(name: str) -> int:
    req = {p for p, d in builder_params(name) if not d}
    return sum(1 for p in shape_names(name) if p in req)


# ----------------------------------------------------------------------------- peers
def flop_count(wl, inputs) -> float:
    return float(wl.dag.flop_count(inputs={t.name: a for t, a in zip(wl.dag.inputs, inputs)}))


def compare(name: str, wl, kernel, inputs, repeat: int, label: str, out=print) -> int:
    """Check ``kernel`` on ``inputs`` and time it beside the strongest fair peers of the workload
    (each at 1 and all threads, interleaved rounds: :mod:`tecomp.bench`); prints the table and a
    ``ratio`` line naming the best peer. Returns 0; a wrong tecomp result is a :class:`CliError`."""
    from ..bench.peak import measure_peak
    from ..bench.peers import skipped
    from ..bench.report import check_output, compare_workload, print_header
    ok, err = check_output(kernel(*kernel.call_inputs(inputs)), wl.reference(inputs))
    out(f"check        {'ok' if ok else 'MISMATCH'} against the numpy/scipy reference "
        f"(max relative error {err:.2e})")
    if not ok:
        raise CliError(f"tecomp's result does not match the reference (max relative error "
                       f"{err:.2e})")
    peak = measure_peak()
    print_header(out, peak)
    res = compare_workload(wl, {label: kernel}, inputs, name=name, out=out, peak=peak,
                           rounds=max(1, repeat))
    for line in skipped():
        out(f"skipped      {line}")
    p = res.comparison.peer
    if p is None:
        out("ratio        none: no peer library is installed for this workload "
            "(install torch, onnxruntime, scipy)")
    else:
        out(f"ratio        {res.ratio:.3f}x {p.config.system} (best peer time / best tecomp "
            f"time: above 1, tecomp is faster)")
    return 0
