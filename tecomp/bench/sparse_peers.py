"""Peers of the sparse workloads: scipy.sparse (single-threaded by design) and torch.sparse at
each thread count, the sparse matrix built once outside the timing, as their users keep it."""
from __future__ import annotations

import numpy as np

from .peers import note_skipped
from .protocol import Config
from .threads import thread_counts, torch_threads

__all__ = ["csr_peers", "bsr_peers", "sddmm_peers"]


def _torch():
    try:
        import torch
        return torch
    except Exception as e:  # noqa: BLE001
        note_skipped("torch.sparse", e)
        return None


def _torch_cfgs(torch, variant, fn) -> list:
    def run():
        with torch.inference_mode():
            return fn()
    return [Config("torch.sparse", variant, n, run, torch_threads(n),
                   lambda: np.ascontiguousarray(run().numpy()))
            for n in thread_counts()]


def _scipy():
    try:
        import scipy.sparse as sp
        return sp
    except Exception as e:  # noqa: BLE001
        note_skipped("scipy.sparse", e)
        return None


def csr_peers(inputs) -> list:
    data, indices, indptr, dense = inputs
    shape = (len(indptr) - 1, dense.shape[0])
    cfgs = []
    sp = _scipy()
    if sp is not None:
        m = sp.csr_matrix((data, indices, indptr), shape=shape)
        cfgs.append(Config("scipy.sparse", "csr", 1, lambda: m @ dense, None, lambda: m @ dense))
    torch = _torch()
    if torch is not None:
        t = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                    torch.from_numpy(indices.astype(np.int64)),
                                    torch.from_numpy(data), size=shape)
        td = torch.from_numpy(dense)
        cfgs += _torch_cfgs(torch, "csr", lambda: t @ td)
    return cfgs


def bsr_peers(inputs) -> list:
    data, indices, indptr, dense = inputs
    bs_r, bs_c = data.shape[1:]
    shape = ((len(indptr) - 1) * bs_r, dense.shape[0])
    cfgs = []
    sp = _scipy()
    if sp is not None:
        m = sp.bsr_matrix((data, indices, indptr), shape=shape)
        cfgs.append(Config("scipy.sparse", "bsr", 1, lambda: m @ dense, None, lambda: m @ dense))
        mc = m.tocsr()
        cfgs.append(Config("scipy.sparse", "as csr", 1, lambda: mc @ dense, None,
                           lambda: mc @ dense))
    torch = _torch()
    if torch is not None:
        td = torch.from_numpy(dense)
        try:
            t = torch.sparse_bsr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                        torch.from_numpy(indices.astype(np.int64)),
                                        torch.from_numpy(data), size=shape)
            t @ td
            cfgs += _torch_cfgs(torch, "bsr", lambda: t @ td)
        except Exception as e:  # noqa: BLE001 - torch builds without a CPU BSR matmul
            note_skipped("torch.sparse bsr", e)
        tc_ = torch.from_numpy(np.ascontiguousarray(sp.bsr_matrix(
            (data, indices, indptr), shape=shape).toarray())).to_sparse_csr() \
            if sp is not None else None
        if tc_ is not None:
            cfgs += _torch_cfgs(torch, "as csr", lambda: tc_ @ td)
    return cfgs


def sddmm_peers(inputs) -> list:
    """``(a @ b.T)`` at a CSR pattern: numpy's gathered row products, and torch's
    ``sparse.sampled_addmm`` on the CSR pattern."""
    a, b, indices, indptr = inputs
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    cols = np.asarray(indices)
    out = np.empty(len(cols), np.result_type(a, b))

    def gathered():
        return np.einsum("pk,pk->p", a[rows], b[cols], out=out)
    cfgs = [Config("numpy", "gather+einsum", 1, gathered, None, lambda: gathered().copy())]
    torch = _torch()
    if torch is not None:
        pat = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                      torch.from_numpy(indices.astype(np.int64)),
                                      torch.zeros(len(cols), dtype=torch.float32),
                                      size=(a.shape[0], b.shape[0]))
        ta, tbt = torch.from_numpy(a), torch.from_numpy(np.ascontiguousarray(b.T))
        try:
            torch.sparse.sampled_addmm(pat, ta, tbt, beta=0.0)
            cfgs += [Config(c.system, c.variant, c.threads, c.fn, c.enter,
                            lambda c=c: np.ascontiguousarray(
                                c.fn().values().numpy()))
                     for c in _torch_cfgs(
                         torch, "sampled_addmm",
                         lambda: torch.sparse.sampled_addmm(pat, ta, tbt, beta=0.0))]
        except Exception as e:  # noqa: BLE001
            note_skipped("torch.sparse sampled_addmm", e)
    return cfgs
