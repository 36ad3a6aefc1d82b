"""The timing protocol itself (not any speed): it finds the faster configuration, names the best
peer, checks outputs, and the conv peers are set up as their users run them (no per-call weight
reorder). The torch checks run where torch is installed (benchmarks/run.sh -m pytest tests/bench)."""
import time

import numpy as np
import pytest

from tecomp.bench import TECOMP, Config, compare, settle
from tecomp.bench.peers import conv2d_peers, conv_transpose2d_peers, dense_peers, matmul_peers
from tecomp.bench.report import check_output, run_comparison


def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_picks_the_faster_of_two_configurations_of_a_slowed_callable():
    # wall-clock spins: a loaded machine only makes a batch slower, and each round keeps its
    # fastest batch, so a 10x gap survives load
    fast = Config("lib", "fast", 1, lambda: _spin(1e-4))
    slow = Config("lib", "slowed", 1, lambda: _spin(1e-3))
    cmp = compare([slow, fast], rounds=3, batches=3, min_batch_s=0.005, warmup=1, pause_s=0)
    assert cmp.best("lib").config is fast
    t = {x.config.variant: x for x in cmp.timings}
    assert t["slowed"].median > 2 * t["fast"].median
    for x in cmp.timings:  # the spread brackets the median
        assert x.low <= x.median <= x.high and len(x.per_round) == 3


def test_ratio_is_best_peer_over_best_tecomp_and_names_the_peer():
    cfgs = [Config(TECOMP, "", 1, lambda: _spin(1e-3)), Config(TECOMP, "", 2, lambda: _spin(1e-4)),
            Config("peer_a", "", 1, lambda: _spin(4e-3)), Config("peer_b", "", 2,
                                                                  lambda: _spin(1e-3))]
    cmp = compare(cfgs, rounds=3, batches=3, min_batch_s=0.005, warmup=1, pause_s=0)
    assert cmp.tecomp.config.threads == 2
    assert cmp.peer.config.system == "peer_b"
    assert cmp.ratio > 2


def test_thread_setting_runs_before_every_batch():
    seen = []
    cfgs = [Config("a", "", n, lambda: None, (lambda n=n: seen.append(n))) for n in (1, 2)]
    compare(cfgs, rounds=4, batches=1, min_batch_s=0.0, warmup=1, pause_s=0)
    assert seen.count(1) == seen.count(2) >= 4 + 1


def test_a_wrong_peer_is_left_out_and_a_wrong_tecomp_raises():
    ref = np.arange(6.0).reshape(2, 3)
    good = Config(TECOMP, "", 1, lambda: None, None, lambda: ref + 1e-6)
    bad = Config("peer", "", 1, lambda: None, None, lambda: ref + 1)
    res = run_comparison([good, bad], ref, 6.0, out=lambda s: None, rounds=1, warmup=1,
                         min_batch_s=0.0, pause_s=0)
    assert [t.config for t in res.comparison.timings] == [good] and len(res.wrong) == 1
    with pytest.raises(AssertionError, match="tecomp's output differs"):
        run_comparison([bad.__class__(TECOMP, "", 1, bad.fn, None, bad.output)], ref, 1.0,
                       out=lambda s: None, rounds=1)
    assert check_output(ref, ref) == (True, 0.0)
    assert not check_output(ref[:1], ref)[0]


def _peer_outputs_match(cfgs, ref, rtol=1e-3):
    assert cfgs
    for c in cfgs:
        ok, err = check_output(c.output(), ref, rtol)
        assert ok, (c.label, err)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv_peers_compute_the_layer_in_our_layout(layout):
    from tecomp.testing import workloads as W
    wl = W.conv2d(1, 8, 9, 9, 16, 3, 3, stride=2, padding=1, layout=layout)
    x = wl.make_inputs(np.random.default_rng(0))
    _peer_outputs_match(conv2d_peers(wl.params, x), wl.reference(x)[0])


def test_transposed_conv_peers_compute_the_layer_eager_and_frozen_in_both_formats():
    pytest.importorskip("torch")
    from tecomp.testing.operator_suite import conv2d_transpose
    case = conv2d_transpose(1, 6, 5, 4, 4, 2, 1)  # C6 -> 4, 5x5 -> 10x10, k4 s2 p1
    x = case.make_inputs(np.random.default_rng(0))
    cfgs = conv_transpose2d_peers(x[0], x[1], 2, 1)
    assert {c.variant for c in cfgs} == {"eager NCHW", "eager channels_last",
                                         "jit.freeze NCHW", "jit.freeze channels_last"}
    _peer_outputs_match(cfgs, case.reference(x)[0])


def test_matmul_and_dense_peers_compute_the_product():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 7), np.float32), rng.standard_normal((7, 3), np.float32)
    _peer_outputs_match(matmul_peers({}, [a, b]), a @ b)
    _peer_outputs_match(dense_peers({}, [a, b]), a @ b)


def test_ort_conv_peer_holds_its_weight_as_an_initializer():
    """ORT gets the weight once, at session creation (packed there), never per call."""
    pytest.importorskip("onnxruntime")
    from tecomp.testing import workloads as W
    wl = W.conv2d(1, 4, 6, 6, 8, 3, 3, padding=1)
    x = wl.make_inputs(np.random.default_rng(0))
    ort = [c for c in conv2d_peers(wl.params, x) if c.system == "onnxruntime"]
    assert {c.threads for c in ort} >= {1}
    for c in ort:  # the bound call takes no weight: only x is an input of the model
        sess = c.fn.__defaults__[0]
        assert [i.name for i in sess.get_inputs()] == ["x"]


def test_torch_conv_peers_never_reorder_the_weight_per_call(monkeypatch):
    torch = pytest.importorskip("torch")
    from tecomp.testing import workloads as W
    wl = W.conv2d(1, 8, 10, 10, 16, 3, 3, padding=1, layout="NHWC")
    x = wl.make_inputs(np.random.default_rng(0))
    cfgs = [c for c in conv2d_peers(wl.params, x) if c.variant.startswith("eager")]
    seen = []
    real = torch.nn.functional.conv2d

    def spy(inp, w, *a, **kw):
        fmt = torch.channels_last if inp.is_contiguous(memory_format=torch.channels_last) \
            and not inp.is_contiguous() else torch.contiguous_format
        seen.append(w.is_contiguous(memory_format=fmt))
        return real(inp, w, *a, **kw)
    monkeypatch.setattr(torch.nn.functional, "conv2d", spy)
    for c in cfgs:
        c.fn()
    assert seen and all(seen)  # the weight is in the input's memory format: no reorder inside
    variants = {c.variant for c in conv2d_peers(wl.params, x)}
    assert {"eager NCHW", "eager channels_last", "jit.freeze channels_last"} <= variants


def test_settle_waits_until_a_spinning_thread_of_the_process_goes_idle():
    # a worker that spins on after its caller returns, as ONNX Runtime's pool does for ~50 ms
    import threading
    t = threading.Thread(target=_spin, args=(0.15,))
    t.start()
    waited = settle(pause_s=0.01)
    # the spinning thread holds the GIL only part of the time, but still uses most of a core
    assert not t.is_alive() or waited >= 0.1
    t.join()
    assert settle(pause_s=0.0) < 0.1  # an idle process settles in one probe
    assert 0.2 <= settle(pause_s=0.0, busy=-1.0, max_s=0.2) < 0.5  # never idle: bounded wait


def test_compare_workload_checks_and_times_extra_configurations_of_another_layout():
    """A tecomp kernel of the other memory format, on that format's copy of the data, joins the
    comparison beside the layer's own kernel and is checked against the same reference."""
    import dataclasses

    import tecomp as tc
    from tecomp.bench.peers import tecomp_configs
    from tecomp.bench.report import compare_workload
    from tecomp.testing import workloads as W
    own = W.conv2d(1, 8, 6, 6, 16, 1, 1, layout="NCHW")
    other = W.conv2d(1, 8, 6, 6, 16, 1, 1, layout="NHWC")
    x = own.make_inputs(np.random.default_rng(0))
    xo = [np.ascontiguousarray(x[0].transpose(0, 2, 3, 1)),
          np.ascontiguousarray(x[1].transpose(2, 3, 1, 0))]
    k = tc.build(other.dag)
    cfgs = tecomp_configs(k, xo, variant="NHWC")
    back = [dataclasses.replace(c, output=lambda c=c: c.output().transpose(0, 3, 1, 2))
            for c in cfgs]
    quiet = dict(out=lambda s: None, rounds=1, warmup=1, min_batch_s=0.0, pause_s=0)
    res = compare_workload(own, {"own": tc.build(own.dag)}, x, extra=back, **quiet)
    variants = {t.config.variant for t in res.comparison.timings if t.config.system == TECOMP}
    assert variants == {"own", "NHWC"}
    with pytest.raises(AssertionError, match="tecomp's output differs"):
        compare_workload(own, {"own": tc.build(own.dag)}, x, extra=cfgs, **quiet)
