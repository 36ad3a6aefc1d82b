"""The strongest fair peers of each workload, each at every thread count and layout a user would
pick, as :class:`~tecomp.bench.protocol.Config` lists.

A peer is set up as its users run it for speed: weights stored in the layout the library wants and
converted once (channels-last weights beside a channels-last input, the ``(out, in)`` weight of
``F.linear``), modules frozen with ``torch.jit.freeze`` (weights pre-packed by oneDNN), ONNX Runtime
with every graph optimization and its output bound once. Inputs are converted to each peer's layout
before timing; the converted copy is what the peer is timed on. A peer library that is not
installed is skipped (:func:`skipped` says which).

Every function takes the workload's parameters (``Workload.params``) and its numpy inputs, and
returns the configurations; each one's ``output()`` gives its result in tecomp's layout.
"""
from __future__ import annotations

import numpy as np

from .protocol import TECOMP, Config
from .threads import numpy_threads, thread_counts, torch_threads

__all__ = ["tecomp_configs", "matmul_peers", "batch_matmul_peers", "conv2d_peers", "dense_peers",
           "conv_transpose2d_peers", "skipped", "note_skipped", "peers_for", "nchw_oihw"]

_SKIPPED: list = []


def skipped() -> list:
    """The peers left out so far (library missing or failing), as ``'name: reason'`` lines."""
    return list(_SKIPPED)


def note_skipped(name: str, why) -> list:
    """Record that the peer ``name`` was left out, and why; returns no configurations."""
    line = f"{name}: {' '.join(str(why).split())[:160]}"
    if line not in _SKIPPED:
        _SKIPPED.append(line)
    return []


def _torch():
    try:
        import torch
        return torch
    except Exception as e:  # noqa: BLE001 - a missing or broken torch only drops that peer
        note_skipped("torch", e)
        return None


def tecomp_configs(kernel, inputs, out=None, variant: str = "") -> list:
    """tecomp's ``kernel`` at each thread count, writing into one output allocated here."""
    from .threads import tecomp_threads
    outs = kernel(*inputs) if out is None else out

    def fn():
        return kernel(*inputs, out=outs)
    return [Config(TECOMP, variant, n, fn, tecomp_threads(n), lambda: kernel(*inputs))
            for n in thread_counts()]


def _numpy(fn, output, variant="") -> list:
    counts = thread_counts()
    if numpy_threads(1) is None:  # no threadpoolctl: numpy's own count only, said as 0
        return [Config("numpy", (variant + " default-threads").strip(), counts[-1], fn, None,
                       output)]
    return [Config("numpy", variant, n, fn, numpy_threads(n), output) for n in counts]


def _torch_cfgs(torch, variant, fn, output) -> list:
    def run():
        with torch.inference_mode():
            return fn()
    return [Config("torch", variant, n, run, torch_threads(n), lambda: output(run()))
            for n in thread_counts()]


def _product_peers(a, b, torch_op: str) -> list:
    """numpy ``np.matmul`` and torch ``torch_op`` (``mm`` / ``bmm``) of ``a @ b``, each into an
    output allocated once."""
    c = np.empty(np.matmul(a[..., :1, :], b[..., :, :1]).shape[:-2] + (a.shape[-2], b.shape[-1]),
                 np.result_type(a, b))
    cfgs = _numpy(lambda: np.matmul(a, b, out=c), lambda: np.matmul(a, b))
    torch = _torch()
    if torch is not None:
        ta, tb, tcout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c.copy())
        op = getattr(torch, torch_op)
        cfgs += _torch_cfgs(torch, "", lambda: op(ta, tb, out=tcout), lambda r: r.numpy().copy())
    return cfgs


def matmul_peers(params: dict, inputs) -> list:
    """numpy (OpenBLAS) and torch (MKL/oneDNN) ``A @ B``, both into a reused output."""
    a, b = inputs
    return _product_peers(a.T if params.get("transpose_a") else a,
                          b.T if params.get("transpose_b") else b, "mm")


def batch_matmul_peers(params: dict, inputs) -> list:
    a, b = inputs
    return _product_peers(np.swapaxes(a, 1, 2) if params.get("transpose_a") else a,
                          np.swapaxes(b, 1, 2) if params.get("transpose_b") else b, "bmm")


def _conv_args(params: dict) -> dict:
    pad = params.get("padding", 0)
    pad = tuple(pad) if isinstance(pad, (tuple, list)) else (pad,)
    if len(pad) == 4:  # (top, left, bottom, right): torch pads symmetrically only
        if pad[0] != pad[2] or pad[1] != pad[3]:
            raise ValueError("asymmetric padding")
        pad = pad[:2]
    pad = pad if len(pad) == 2 else pad * 2
    return dict(stride=params.get("stride", 1), padding=pad,
                dilation=params.get("dilation", 1), groups=params.get("groups", 1))


def nchw_oihw(params: dict, data, weight):
    """The layer's data and weight as NCHW / OIHW numpy arrays (contiguous)."""
    if params.get("layout", "NCHW") == "NCHW":
        return np.ascontiguousarray(data), np.ascontiguousarray(weight)
    return (np.ascontiguousarray(data.transpose(0, 3, 1, 2)),
            np.ascontiguousarray(weight.transpose(3, 2, 0, 1)))


def conv2d_peers(params: dict, inputs) -> list:
    """torch eager in both memory formats (weight in the same format as the input), torch
    ``jit.freeze``d modules in both formats, and ONNX Runtime (see :mod:`.onnx_peers`)."""
    from .onnx_peers import conv2d_ort
    data, weight = inputs
    try:
        kw = _conv_args(params)
    except ValueError as e:
        return note_skipped("torch conv2d", e)
    x, w = nchw_oihw(params, data, weight)
    to_ours = ((lambda y: y) if params.get("layout", "NCHW") == "NCHW"
               else (lambda y: y.transpose(0, 2, 3, 1)))
    cfgs = []
    torch = _torch()
    if torch is not None:
        o, ig, kh, kwid = w.shape

        def module():
            return torch.nn.Conv2d(ig * kw["groups"], o, (kh, kwid), bias=False, **kw)
        cfgs += _torch_layer_cfgs(torch, x, w, lambda tx, tw: torch.nn.functional.conv2d(
            tx, tw, **kw), module, to_ours)
    cfgs += conv2d_ort(params, x, w, to_ours)
    return cfgs


def conv_transpose2d_peers(x, w, stride: int, padding: int, output_padding: int = 0) -> list:
    """torch's transposed convolution of NCHW ``x`` by the ``(C_in, C_out, k, k)`` weight ``w``:
    eager ``conv_transpose2d`` and a ``jit.freeze``d ``nn.ConvTranspose2d``, each in NCHW and
    channels_last (input and weight converted once). Outputs in NCHW."""
    torch = _torch()
    if torch is None:
        return []
    c, o, k, _ = w.shape
    kw = dict(stride=stride, padding=padding, output_padding=output_padding)

    def module():
        return torch.nn.ConvTranspose2d(c, o, k, bias=False, **kw)
    return _torch_layer_cfgs(torch, x, w, lambda tx, tw: torch.nn.functional.conv_transpose2d(
        tx, tw, **kw), module, lambda y: y)


def _torch_layer_cfgs(torch, x, w, eager, module, to_ours) -> list:
    """A torch layer in NCHW and channels_last (input and weight converted once): ``eager(tx, tw)``
    and ``module()`` (weight ``w``) ``jit.freeze``d, at each thread count."""
    back = lambda r: np.ascontiguousarray(to_ours(r.contiguous().numpy()))  # noqa: E731
    cfgs = []
    for fmt_name, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
        tx = torch.from_numpy(x).contiguous(memory_format=fmt)
        tw = torch.from_numpy(w).contiguous(memory_format=fmt)
        cfgs += _torch_cfgs(torch, f"eager {fmt_name}", lambda tx=tx, tw=tw: eager(tx, tw), back)
        try:
            mod = _frozen(torch, module(), w, fmt, tx)
        except Exception as e:  # noqa: BLE001 - a layer jit cannot freeze drops that peer only
            note_skipped(f"torch jit.freeze {fmt_name}", e)
            continue
        cfgs += _torch_cfgs(torch, f"jit.freeze {fmt_name}", lambda mod=mod, tx=tx: mod(tx), back)
    return cfgs


def _frozen(torch, m, w, fmt, tx):
    """The module ``m`` with weight ``w``, in memory format ``fmt``, ``jit.freeze``d (its weight
    packed once) and called twice on ``tx``."""
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
    m = m.eval().to(memory_format=fmt)
    frozen = torch.jit.freeze(torch.jit.script(m))
    with torch.inference_mode():
        for _ in range(2):  # the profiling executor specializes on the first calls
            frozen(tx)
    return frozen


def dense_peers(params: dict, inputs) -> list:
    """A dense layer ``x (M, K) @ W (K, N)``: torch ``F.linear`` with the ``(N, K)`` weight it
    stores, a frozen ``nn.Linear``, numpy, and ONNX Runtime's Gemm."""
    from .onnx_peers import dense_ort
    x, w = inputs
    out = np.empty((x.shape[0], w.shape[1]), np.float32)
    cfgs = _numpy(lambda: np.matmul(x, w, out=out), lambda: x @ w)
    torch = _torch()
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(w.T))
        F = torch.nn.functional
        back = lambda r: r.numpy().copy()  # noqa: E731
        cfgs += _torch_cfgs(torch, "F.linear", lambda: F.linear(tx, tw), back)
        lin = torch.nn.Linear(w.shape[0], w.shape[1], bias=False)
        with torch.no_grad():
            lin.weight.copy_(tw)
        frozen = torch.jit.freeze(torch.jit.script(lin.eval()))
        cfgs += _torch_cfgs(torch, "jit.freeze Linear", lambda: frozen(tx), back)
    cfgs += dense_ort(x, w)
    return cfgs


def peers_for(name: str, params: dict, inputs) -> list:
    """The peers of the workload ``name`` (a ``tecomp`` workload name or ``"dense"``)."""
    from . import sparse_peers
    if name == "matmul":
        return matmul_peers(params, inputs)
    if name == "batch_matmul":
        return batch_matmul_peers(params, inputs)
    if name.startswith("conv2d"):
        return conv2d_peers(params, inputs)
    if name == "dense":
        return dense_peers(params, inputs)
    if name == "csr_spmm":
        return sparse_peers.csr_peers(inputs)
    if name == "bsr_spmm":
        return sparse_peers.bsr_peers(inputs)
    if name == "sddmm":
        return sparse_peers.sddmm_peers(inputs)
    return []
