"""Target strings name the CPU's codegen features (-mattr), and which records a target may use:
older records (-mcpu alone) still match their CPU; records needing features the target lacks
are never used."""
import glob
import os
import re
import warnings

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.records import (
    ErrorKind,
    MeasureResult,
    Record,
    append_records,
    best_record,
    load_records,
    measured_keys,
    ranked_records,
)
from tecomp.schedule.target_match import TargetMatch, match_target, missing_features, same_target
from tecomp.target import CODEGEN_FEATURES, Target, TargetKind, host_cpu

HOST = Target.parse("llvm")
LEGACY = f"llvm -mcpu={HOST.cpu}"  # what str(target) was before -mattr
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lacking() -> str:
    """A codegen feature this host does not have (on any CPU, one of the other ISA's is)."""
    return "+" + sorted(CODEGEN_FEATURES - {f[1:] for f in HOST.codegen_features})[0]


def _rec(key, steps, target, cost=1e-3):
    return Record(key, target, steps, {}, MeasureResult(costs=[cost], error=ErrorKind.NONE))


# ------------------------------------------------------------------------------ the string
def test_host_target_string_names_its_codegen_features_sorted():
    cpu, feats = host_cpu()
    enabled = {f[1:] for f in feats.split(",") if f.startswith("+")}
    want = sorted(enabled & CODEGEN_FEATURES)
    s = str(HOST)
    assert s.startswith(f"llvm -mcpu={cpu}")
    if want:
        assert s == f"llvm -mcpu={cpu} -mattr=" + ",".join("+" + f for f in want)
    assert all(f"+{f}" not in s for f in enabled - CODEGEN_FEATURES)  # not every flag
    assert str(Target.parse(s)) == s and Target.parse(s).cpu == cpu  # round trip


def test_target_string_short_sorted_and_parsed():
    t = Target(TargetKind.LLVM, "x", "+fma,-avx512f,+aes,+avx2,+64bit,+avx512vnni")
    assert str(t) == "llvm -mcpu=x -mattr=+avx2,+avx512vnni,+fma"
    assert str(Target(TargetKind.LLVM, "x", "+aes,-avx")) == "llvm -mcpu=x"
    p = Target.parse("llvm -mcpu=x -mattr=+fma,+avx2")
    assert p.cpu == "x" and p.codegen_features == ("+avx2", "+fma")
    assert str(Target.parse("cuda -arch=sm_80")) == "cuda -arch=sm_80"
    with pytest.raises(ValueError, match="-mattr lists features"):
        Target.parse("llvm -mattr=avx2")
    # a record's features decide the search's vector width as the host's do
    from tecomp.search.task import HardwareParams
    assert HardwareParams.for_target(Target.parse("llvm -mcpu=x -mattr=+avx512f")).vector_bytes \
        == 64


# ------------------------------------------------------------------------------ this host only
def _other_cpu() -> str:
    return "skylake-avx512" if HOST.cpu != "skylake-avx512" else "znver1"


def test_a_target_of_another_cpu_or_other_features_is_not_built_here():
    """tecomp emits code for the host: a target naming another CPU, or features the host lacks
    or has besides, is refused with the reason, not built as host code under another name."""
    from tecomp.testing import workloads as W
    wl = W.matmul(8, 8, 8)
    other = f"llvm -mcpu={_other_cpu()}"
    with pytest.raises(ValueError, match=f"names the CPU {_other_cpu()}, but this host is"):
        tc.build(wl.dag, target=other)
    fewer = f"llvm -mcpu={HOST.cpu} -mattr={','.join(HOST.codegen_features[:-1])}"
    with pytest.raises(ValueError, match=re.escape(f"would use {HOST.codegen_features[-1]} as well")):
        tc.build(wl.dag, target=fewer)
    with pytest.raises(ValueError, match=re.escape(f"this host lacks {_lacking()})")):
        tc.build(wl.dag, target=str(HOST) + "," + _lacking())
    # tuning refuses before any worker builds a candidate; searching for it stays possible
    task = tc.SearchTask(wl.dag, target=other)
    with pytest.raises(ValueError, match="tecomp compiles for the CPU it runs on"):
        tc.tune(task, trials=2, options=tc.TuningOptions(population=4, generations=1,
                                                          measures_per_round=2, verbose=False))
    # the host's own strings build: "llvm", its full string, and its CPU without -mattr
    x = wl.make_inputs(np.random.default_rng(0))
    for t in ("llvm", str(HOST), LEGACY):
        assert Target.parse(t).host_mismatch() == ""
        np.testing.assert_allclose(tc.build(wl.dag, target=t)(*x), wl.reference(x)[0],
                                   rtol=1e-5, atol=1e-5)
    assert Target.parse("cuda").host_mismatch() == ""  # checked where it is measured


# ------------------------------------------------------------------------------ matching
@pytest.mark.parametrize("recorded, target, want", [
    ("llvm -mcpu=a -mattr=+avx2,+fma", "llvm -mcpu=a -mattr=+avx2,+fma", TargetMatch.SAME),
    ("llvm -mcpu=a", "llvm -mcpu=a -mattr=+avx2,+fma", TargetMatch.SAME),  # an older log
    ("llvm -mcpu=a -mattr=+avx2", "llvm -mcpu=a", TargetMatch.SAME),  # a target without features
    ("llvm -mcpu=b", "llvm -mcpu=a -mattr=+avx2", TargetMatch.OTHER),
    ("llvm -mcpu=b -mattr=+avx2", "llvm -mcpu=a -mattr=+avx2,+fma", TargetMatch.OTHER),
    ("llvm -mcpu=a -mattr=+avx2", "llvm -mcpu=a -mattr=+avx2,+fma", TargetMatch.OTHER),
    ("llvm -mcpu=a -mattr=+avx2,+avx512f", "llvm -mcpu=a -mattr=+avx2,+fma",
     TargetMatch.MISSING_FEATURES),
    ("llvm -mcpu=b -mattr=+avx512f", "llvm -mcpu=a -mattr=+avx2", TargetMatch.MISSING_FEATURES),
    ("cuda -arch=sm_80", "cuda -arch=sm_90", TargetMatch.OTHER),
    ("cuda -arch=sm_90", "llvm -mcpu=a", TargetMatch.OTHER_KIND),
    ("llvm junk", "llvm -mcpu=a", TargetMatch.OTHER),
])
def test_match_target(recorded, target, want):
    assert match_target(recorded, target) is want
    assert same_target(recorded, target) is (want is TargetMatch.SAME)


def test_missing_features_lists_what_the_target_lacks():
    assert missing_features("llvm -mcpu=a -mattr=+avx512f,+avx2,+avx512bw",
                            "llvm -mcpu=a -mattr=+avx2") == ["+avx512bw", "+avx512f"]
    assert missing_features("llvm -mcpu=a", "llvm -mcpu=a -mattr=+avx2") == []


def test_older_records_of_this_cpu_match_exactly_and_count_as_measured():
    recs = [_rec("wk", [["CI", 1]], LEGACY, cost=2e-3), _rec("wk", [["CI", 2]], str(HOST), 1e-3),
            _rec("wk", [["CI", 3]], "llvm -mcpu=some-other-cpu", cost=1e-9)]
    ranked, exact = ranked_records(recs, "wk", HOST)
    assert exact and [r.steps for r in ranked] == [[["CI", 2]], [["CI", 1]]]
    assert measured_keys(recs, "wk", HOST) == {recs[0].key, recs[1].key}


def test_records_needing_features_the_host_lacks_are_never_used(tmp_path):
    n = 32
    A, B = tc.placeholder((n, n), name="A"), tc.placeholder((n, n), name="B")
    k = tc.reduce_axis(n, name="k")
    C = tc.compute((n, n), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    dag = tc.ComputeDAG([A, B, C])
    s = tc.Schedule(dag)
    io_, _ = s[C].split(s[C].axes[0], factor=8)
    s[C].parallel(io_)
    richer = f"llvm -mcpu={HOST.cpu} -mattr=" + ",".join(sorted((*HOST.codegen_features,
                                                                 _lacking())))
    assert match_target(richer, HOST) is TargetMatch.MISSING_FEATURES
    log = str(tmp_path / "richer.jsonl")
    append_records(log, [_rec(dag.workload_key, s.records(), richer, cost=1e-9)])
    assert ranked_records(log, dag.workload_key, HOST) == ([], False)
    assert best_record(log, dag.workload_key, HOST) is None
    with pytest.raises(LookupError, match="this target lacks " + re.escape(f"({_lacking()};")):
        tc.build(dag, log=log)
    # with a record this host can use beside it, that one is built, without a warning
    plain = tc.Schedule(dag)
    append_records(log, [_rec(dag.workload_key, plain.records(), LEGACY, cost=1e-3)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = tc.build(dag, log=log)
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_shipped_logs_match_as_before_on_this_host():
    """Every tuning_logs/**/*.jsonl loads, and each workload matches the records it matched when
    this host's target string was ``llvm -mcpu=CPU`` (same records, same order, same exactness),
    less those that need CPU features this host lacks."""
    paths = sorted(glob.glob(os.path.join(ROOT, "tuning_logs", "**", "*.jsonl"), recursive=True))
    if not paths:
        pytest.skip("no tuning logs in this checkout")
    total = 0
    for p in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            recs = load_records(p)
            assert recs, p
            keys = {}  # id -> Record.key, a JSON dump of the steps: made once per record

            def sched_key(r):
                if id(r) not in keys:
                    keys[id(r)] = r.key
                return keys[id(r)]

            by_key = {}  # ranked_records filters by key: hand it each key's records alone
            for r in recs:
                by_key.setdefault(r.workload_key, []).append(r)
            for key in sorted(by_key):
                now, exact = ranked_records(by_key[key], key, HOST)
                old = [r for r in by_key[key] if r.result.is_valid]
                # logs tuned since records name features carry this host's full string
                mine = (LEGACY, str(HOST))
                # else the other CPUs' records, but never ones using features this host lacks
                # (a log tuned on an AVX-512 machine, read on an AVX2 one)
                before = [r for r in old if r.target in mine] or [
                    r for r in old if r.target.split()[0] == "llvm"
                    and match_target(r.target, HOST) is not TargetMatch.MISSING_FEATURES]
                assert exact == any(r.target in mine for r in old), (p, key)
                assert set(map(sched_key, now)) == set(map(sched_key, before)), (p, key)
                total += len(now)
    assert total > 0


def test_cli_best_target_filter_takes_a_cpu_without_features(tmp_path, capsys):
    """``tecomp best --target "llvm -mcpu=CPU"`` finds records whose target also names features."""
    from tecomp.cli import main
    log = str(tmp_path / "t.jsonl")
    append_records(log, [_rec("a" * 32, [["CI", 1]], "llvm -mcpu=x -mattr=+avx2,+fma"),
                         _rec("b" * 32, [["CI", 1]], "llvm -mcpu=y -mattr=+avx2")])
    assert main(["best", log, "--target", "llvm -mcpu=x", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"aaaa' in out and '"bbbb' not in out


def test_cli_tune_and_run_refuse_a_target_of_another_cpu(tmp_path, capsys):
    """``tecomp tune`` measures on this machine: a target of another CPU is a usage error (exit 2)
    before anything is measured; ``tecomp run`` says why in one line."""
    from tecomp.cli import main
    log = tmp_path / "t.jsonl"
    other = f"llvm -mcpu={_other_cpu()}"
    assert main(["tune", "matmul", "--shape", "8", "8", "8", "--trials", "2", "--log", str(log),
                 "--target", other, "--progress", "none"]) == 2
    assert f"bad --target: target '{other}" in capsys.readouterr().err and not log.exists()
    assert main(["run", "matmul", "--shape", "8", "8", "8", "--target", other]) != 0
    assert "tecomp compiles for the CPU it runs on" in capsys.readouterr().err
