"""The ``tecomp`` command line, each subcommand run as a real subprocess (``python -m tecomp.cli``):
run, tune (with resume and Ctrl-C), best, bench, plot, --help, and one-line errors."""
import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
import zlib

import pytest
from cli_interrupt import interrupt, start_tuning, wait_for_records, whole_log_records

from tecomp.schedule.records import MeasureResult, Record, append_records, load_records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: tuning options that keep a tune of a tiny matmul to a few seconds
FAST = ["--population", "16", "--generations", "1", "--measures-per-round", "4", "--repeat", "2",
        "--min-repeat-ms", "2", "--cost-model", "random"]
MM = ["matmul", "--shape", "32", "32", "32"]


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    env.update(extra)
    return env


def tecomp(*args, cwd, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "tecomp.cli", *map(str, args)], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout)


def _ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "Traceback" not in p.stderr
    return p.stdout


# the tests of the `tuned` fixture (12 s) share an xdist group: with `pytest -n 2 --dist
# loadgroup` both workers would each run the tuning
TUNED = pytest.mark.xdist_group("cli_tuned")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A real 8-trial tuning of a 32^3 matmul: ``(folder, log path, the tune's output)``."""
    d = tmp_path_factory.mktemp("cli")
    log = d / "mm.jsonl"
    p = tecomp("tune", *MM, "--trials", 8, "--log", log, *FAST, cwd=d)
    return d, log, _ok(p)


# ----------------------------------------------------------------------------- help
@pytest.mark.parametrize("cmd", [[], ["run"], ["tune"], ["best"], ["bench"], ["plot"]])
def test_help_on_every_subcommand(tmp_path, cmd):
    out = _ok(tecomp(*cmd, "--help", cwd=tmp_path))
    assert out.startswith("usage: tecomp")
    if cmd and cmd[0] in ("run", "tune", "bench"):
        assert "matmul            --shape M N K" in out  # the workloads and their shapes


# ----------------------------------------------------------------------------- run
def test_run_checks_and_compares_with_numpy(tmp_path):
    out = _ok(tecomp("run", "matmul", "--shape", "16x16x16", "--repeat", 1, cwd=tmp_path))
    assert "check        ok" in out and "numpy" in out and "ratio" in out


# ----------------------------------------------------------------------------- tune
@TUNED
def test_tune_logs_every_trial_shows_progress_and_compares(tuned):
    d, log, out = tuned
    recs = load_records(log)
    assert len(recs) == 8 and len({r.key for r in recs}) == 8
    assert all(r.flop_count == 2 * 32 ** 3 for r in recs)
    # not a terminal: a plain progress line per round, with trials, best GFLOP/s, errors and ETA
    lines = [ln for ln in out.splitlines() if ln.startswith("tecomp: trials")]
    assert len(lines) == 2 and "trials 8/8" in lines[-1]
    assert all("GFLOP/s" in ln and "errors" in ln and "ETA" in ln for ln in lines)
    assert "\r" not in out
    assert "best " in out and "check        ok" in out and "ratio" in out


@TUNED
def test_tune_resumes_from_its_log(tuned, tmp_path):
    _, log, _ = tuned
    mine = tmp_path / "resumed.jsonl"
    mine.write_bytes(log.read_bytes())
    out = _ok(tecomp("tune", *MM, "--trials", 4, "--log", mine, "--no-bench", *FAST,
                     "--seed", 1, cwd=tmp_path))
    assert "resuming: the log holds 8 records of this task" in out
    recs = load_records(mine)
    assert len(recs) == 12 and len({r.key for r in recs}) == 12  # nothing measured twice
    assert "check" not in out  # --no-bench


def test_tune_a_network_layer_set_with_the_scheduler(tmp_path):
    log = tmp_path / "r18.jsonl"
    # one round of 2 trials: the builds of a full-size layer's candidates are this test's cost
    out = _ok(tecomp("tune", "--network", "resnet18", "--trials", 2, "--log", log, *FAST,
                     "--measures-per-round", 2, cwd=tmp_path))
    assert "12 distinct layers" in out
    progress = [ln for ln in out.splitlines() if ln.startswith("tecomp: trials")]
    assert progress and "trials 2/2" in progress[-1] and "GFLOP/s" in progress[-1]
    rows = [ln.split() for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert len(rows) == 12 and rows[0][:2] == ["1", "conv"] and rows[-1][1] == "dense"
    assert sum(int(r[-4]) for r in rows) == 2  # the trials column
    recs = load_records(log)
    assert len(recs) == 2 and len({r.workload_key for r in recs}) == 1
    assert "network latency" in out.splitlines()[-1]


def test_tune_only_some_layers_of_a_network(tmp_path):
    """--layers tunes the layers of those numbers (as the table numbers them) and no other."""
    log = tmp_path / "r18.jsonl"
    # one trial a layer (rounds of 1): the three full-size layers' builds are this test's cost
    out = _ok(tecomp("tune", "--network", "resnet18", "--layers", "12,2-3,2", "--trials", 3,
                     "--log", log, "--strategy", "round-robin", *FAST, "--measures-per-round", 1,
                     cwd=tmp_path))
    assert "3 distinct layers (--layers 12,2-3,2 of 12)" in out
    rows = [ln.split() for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert [r[1] for r in rows] == ["dense", "conv", "conv"], rows
    assert len({r.workload_key for r in load_records(log)}) == 3


@pytest.mark.slow  # ~20 s: Winograd candidates take a second or two to build
def test_tune_a_network_layer_set_by_winograd(tmp_path):
    """--method winograd tunes the layers Winograd computes (3x3, stride 1), no other."""
    log = tmp_path / "r18w.jsonl"
    out = _ok(tecomp("tune", "--network", "resnet18", "--method", "winograd", "--trials", 2,
                     "--log", log, *FAST, cwd=tmp_path))
    assert "4 distinct layers" in out
    rows = [ln.split() for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert len(rows) == 4 and rows[0][1:4] == ["conv", "64x56x56->64", "k3"], rows
    assert all(r[4] == "s1" for r in rows)
    assert len(load_records(log)) == 2


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_ctrl_c_stops_cleanly_with_the_log_intact(tmp_path, sig):
    log = tmp_path / "int.jsonl"
    p = start_tuning(["tune", *MM, "--trials", "400", "--log", str(log), *FAST], log,
                     cwd=tmp_path, env=_env())
    wait_for_records(p, log, 8, timeout=120)
    workers = _children(p.pid)
    out, err = interrupt(p, sig)
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted after" in lines[0] and "resume" in lines[0], err
    # every line of the log is a whole record
    recs = whole_log_records(log)
    assert len(recs) >= 8 and f"holds {len(recs)} records" in lines[0]
    # the measurement workers are gone (the measurer was closed)
    if workers:
        deadline = time.time() + 10
        while time.time() < deadline and any(os.path.exists(f"/proc/{w}") for w in workers):
            time.sleep(0.1)
        alive = [w for w in workers if os.path.exists(f"/proc/{w}")
                 and "zombie" not in open(f"/proc/{w}/status").read()]
        assert not alive


# ----------------------------------------------------------------------------- best
@TUNED
def test_best_tabulates_the_best_record(tuned):
    d, log, _ = tuned
    out = _ok(tecomp("best", log, cwd=d))
    head, *rows = out.strip().splitlines()
    assert head.split() == ["key", "target", "best", "ms", "GFLOP/s", "records", "errors"]
    assert len(rows) == 1
    recs = load_records(log)
    key = recs[0].workload_key
    assert rows[0].startswith(key[:16]) and rows[0].split()[-2:] == ["8", "0"]
    (row,) = json.loads(_ok(tecomp("best", log, "--json", cwd=d)))
    best = min(r.cost for r in recs if r.result.is_valid)
    assert row["key"] == key and row["records"] == 8 and row["errors"] == 0
    assert row["best_ms"] == pytest.approx(best * 1e3)
    assert row["gflops"] == pytest.approx(2 * 32 ** 3 / best / 1e9)


def _synthetic_log(path):
    """Two tasks, errors, two runs an hour apart, and a truncated last line."""
    recs = []
    t0 = 1.7e9
    for n in range(12):
        for key, flops, base in (("a" * 32, 2e6, 1e-3), ("b" * 32, 4e6, 2e-3)):
            failed = n % 5 == 3
            res = MeasureResult(costs=() if failed else (base / (1 + n * 0.1),) * 2,
                                error="build_error" if failed else "none",
                                timestamp=t0 + n * 2 + (3600 if n >= 6 else 0))
            recs.append(Record(key, "llvm -mcpu=test", [["SP", 0, 0, [n + 1], True]], {}, res,
                               flop_count=flops))
    append_records(path, recs)
    with open(path, "a") as f:
        f.write('{"v":1,"key":"trunc')


def test_best_of_a_multi_task_log_with_a_bad_line(tmp_path):
    log = tmp_path / "two.jsonl"
    _synthetic_log(log)
    p = tecomp("best", log, "--json", cwd=tmp_path)
    rows = {r["key"][0]: r for r in json.loads(_ok(p))}
    assert rows["a"]["records"] == 12 and rows["a"]["errors"] == 2
    assert rows["b"]["gflops"] == pytest.approx(4e6 / (2e-3 / 2.1) / 1e9)
    # the skipped line is one warning line, not a Python warning with its source line
    assert [ln for ln in p.stderr.splitlines() if ln] == [p.stderr.strip()]
    assert p.stderr.startswith("tecomp: warning:") and "two.jsonl:25" in p.stderr


# ----------------------------------------------------------------------------- bench
@TUNED
def test_bench_from_the_log(tuned):
    d, log, _ = tuned
    out = _ok(tecomp("bench", *MM, "--log", log, "--repeat", 1, cwd=d))
    assert f"best record of {log}" in out and "check        ok" in out
    ratio = [ln for ln in out.splitlines() if ln.startswith("ratio")][0]
    assert float(ratio.split()[1].rstrip("x")) > 0 and "numpy" in ratio


@pytest.mark.parametrize("args, peer", [
    (["csr_spmm", "--shape", "16", "32", "8", "--param", "density=0.2"],
     ("scipy.sparse", "torch.sparse")),
    (["bsr_spmm", "--shape", "4", "4", "8", "2", "2"], ("scipy.sparse", "torch.sparse")),
    (["sddmm", "--shape", "16", "16", "8"], ("numpy", "torch.sparse")),
    (["conv2d_nhwc", "--shape", "1", "4", "6", "6", "4", "3", "3", "--param", "padding=1"],
     ("torch", "onnxruntime")),
])
def test_bench_default_schedule_beside_its_peer(tmp_path, args, peer):
    out = _ok(tecomp("bench", *args, "--repeat", 1, cwd=tmp_path))
    assert "check        ok" in out and "default schedule" in out
    ratio = [ln for ln in out.splitlines() if ln.startswith("ratio")][0]
    assert ratio.split()[2] in peer
    assert "wrong output" not in out  # every peer computes the same thing


def test_tune_a_conv_with_its_weight_a_constant(tmp_path):
    """A convolution's weight is a constant where it runs: tuning measures and the closing bench
    builds with it bound (a packed weight packed once, as the peers pack theirs), and the kernel
    still matches the reference on the whole input."""
    from tecomp.cli.commands import weight_constants
    from tecomp.workloads import get_workload
    wl = get_workload("conv2d_nchw", N=1, C=4, H=8, W=8, O=8, KH=3, KW=3, padding=1)
    assert weight_constants("conv2d_nchw", wl) == (wl.dag.inputs[1].name,)
    assert weight_constants("matmul", get_workload("matmul", M=8, N=8, K=8)) == ()
    log = tmp_path / "conv.jsonl"
    out = _ok(tecomp("tune", "conv2d_nchw", "--shape", 1, 4, 8, 8, 8, 3, 3, "--param",
                     "padding=1", "--trials", 6, "--log", log, *FAST, cwd=tmp_path))
    assert "check        ok" in out and "ratio" in out
    assert all(r.result.is_valid for r in load_records(str(log)))
    # (``tecomp bench --log`` builds the best record through the same ``_build(..., log, inputs)``
    # as the closing bench above, and test_bench_from_the_log runs it)


# ----------------------------------------------------------------------------- plot
def _check_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    body = data[16:16 + 13]
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", body)
    (crc,) = struct.unpack(">I", data[29:33])
    assert crc == zlib.crc32(kind + body)
    assert width > 100 and height > 100 and depth == 8
    assert data.endswith(b"IEND\xaeB`\x82")
    return width, height


@TUNED
def test_plot_writes_a_png(tuned):
    pytest.importorskip("matplotlib")
    d, log, _ = tuned
    png = d / "curve.png"
    out = _ok(tecomp("plot", log, "-o", png, cwd=d))
    assert "wrote" in out and "1 task" in out
    _check_png(png)


def test_plot_of_several_tasks_and_runs(tmp_path):
    pytest.importorskip("matplotlib")
    log = tmp_path / "two.jsonl"
    _synthetic_log(log)
    png = tmp_path / "two.png"
    p = tecomp("plot", log, "-o", png, "--label", "aaaa=matmul", "--time-origin", "task",
               cwd=tmp_path)
    assert "2 task(s)" in _ok(p)
    _check_png(png)


def test_plot_without_matplotlib_names_the_extra(tmp_path):
    fake = tmp_path / "shadow" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    log = tmp_path / "two.jsonl"
    _synthetic_log(log)
    env = _env()
    env["PYTHONPATH"] = str(tmp_path / "shadow") + os.pathsep + env["PYTHONPATH"]
    p = tecomp("plot", log, "-o", tmp_path / "x.png", cwd=tmp_path, env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    err = [ln for ln in p.stderr.splitlines() if not ln.startswith("tecomp: warning")]
    assert len(err) == 1 and "matplotlib" in err[0] and "tecomp[plot]" in err[0]
    assert not (tmp_path / "x.png").exists()


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("args, code, words", [
    (["run", "nosuch", "--shape", "8"], 2, "unknown workload 'nosuch'"),
    (["run", "matmul", "--shape", "8", "x8"], 2, "bad --shape value"),
    (["run", "matmul", "--shape", "8", "8"], 2, "needs --shape M N K"),
    (["run", "matmul", "--shape", "8", "8", "8", "--param", "nope=1"], 2, "no parameter 'nope'"),
    (["run", "matmul", "--shape", "8", "8", "8", "--target", "tpu"], 2, "unknown target"),
    (["run", "conv2d_nchw", "--shape", "1", "4", "8", "8", "4", "3", "3", "--param",
      "groups=3"], 2, "not divisible"),
    (["best", "missing.jsonl"], 1, "does not exist"),
    (["plot", "missing.jsonl", "-o", "x.png"], 1, "does not exist"),
    (["bench", "matmul", "--shape", "8", "8", "8", "--log", "missing.jsonl"], 1, "does not exist"),
    (["tune", "matmul", "--shape", "8", "8", "8", "--trials", "-3"], 2, "--trials"),
    (["tune", "matmul", "--shape", "8", "8", "8", "--trials", "many"], 2, "invalid int value"),
    (["run", "matmul", "--shape", "8", "8", "8", "6"], 2, "at most 3 --shape values (M N K)"),
    (["run", "csr_spmm", "--shape", "8", "8", "8", "3"], 2, "at most 3 --shape values"),
    (["run", "csr_spmm", "--shape", "8", "8", "8", "--param", "density=abc"], 2,
     "density must be a number in [0, 1]"),
    (["run", "csr_spmm", "--shape", "8", "8", "8", "--param", "density=-0.5"], 2,
     "density must be a number in [0, 1]"),
    (["frobnicate"], 2, "invalid choice"),
    ([], 2, "required"),
    (["tune", "--trials", "4"], 2, "needs a WORKLOAD"),
    (["tune", "matmul", "--network", "resnet18"], 2, "not both"),
    (["tune", "--network", "resnet18", "--layers", "13"], 2, "outside this network's layers 1-12"),
    (["tune", "--network", "resnet18", "--layers", "3-x"], 2, "not a layer number"),
    (["tune", "--network", "resnet18", "--layers", "5-2"], 2, "outside"),
    (["tune", "matmul", "--shape", "8", "8", "8", "--layers", "1"], 2, "not of a WORKLOAD"),
    (["tune", "conv2d_nchw", "--shape", "1", "4", "8", "8", "4", "1", "1", "--method", "flat"], 2,
     "a --network's layer set only"),
])
def test_errors_are_one_line_and_a_nonzero_exit(tmp_path, args, code, words):
    p = tecomp(*args, cwd=tmp_path)
    assert p.returncode == code, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tecomp") and words in lines[0], p.stderr


def test_bench_with_a_log_of_other_workloads_is_one_line(tmp_path):
    log = tmp_path / "two.jsonl"
    _synthetic_log(log)
    p = tecomp("bench", "matmul", "--shape", "8", "8", "8", "--log", log, cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if not ln.startswith("tecomp: warning")]
    assert len(lines) == 1 and "no usable record" in lines[0] and "tecomp tune" in lines[0]


# ----------------------------------------------------------------------------- progress (unit)
class _Term(io.StringIO):
    def isatty(self):
        return True


class _Res:
    def __init__(self, trials, gflops, errors):
        self.trials, self.best_gflops, self.errors = trials, gflops, errors


def test_progress_is_one_updating_line_on_a_terminal(monkeypatch):
    from tecomp.cli.progress import Progress
    monkeypatch.setenv("COLUMNS", "200")  # the line is cut to the terminal's width
    now = [0.0]
    term = _Term()
    p = Progress(100, term, clock=lambda: now[0])
    assert p.mode == "bar"
    p.start()
    for n, t in ((10, 5.0), (20, 7.0), (30, 9.0)):  # 2 s per 10 trials after the first round
        now[0] = t
        p(_Res(n, 1.5 * n, {"BUILD_ERROR": 1}))
    p.end()
    text = term.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") == 4
    last = text.split("\r")[-1]
    assert "trials  30/100" in last and "best 45.00 GFLOP/s" in last and "errors 1" in last
    assert "ETA 14s" in last and "[######..............]" in last  # 70 trials at 0.2 s
    plain = io.StringIO()
    q = Progress(8, plain, clock=lambda: 1.0)
    assert q.mode == "lines"
    q(_Res(4, 2.0, {}))
    q(_Res(8, 3.0, {}))
    q.end()
    lines = plain.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("tecomp: trials 8/8") and "ETA 0s" in lines[1]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_dropped_in_a_finalizer_still_ends_the_tuning(tmp_path, monkeypatch, capsys):
    """A KeyboardInterrupt raised while a finalizer runs is printed and dropped by Python; the
    stop is remembered and the next round's progress update ends the tuning (exit status 130)."""
    from tecomp.cli import main
    from tecomp.search.evolution import EvolutionarySearch

    class _SignalsOnDelete:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # the handler runs, and raises, in here

    tell, calls = EvolutionarySearch.tell, []

    def tell_then_interrupt(self, candidates, results):
        tell(self, candidates, results)
        calls.append(1)
        if len(calls) == 2:
            _SignalsOnDelete()  # freed at once: __del__ runs now

    monkeypatch.setattr(EvolutionarySearch, "tell", tell_then_interrupt)
    log = tmp_path / "drop.jsonl"
    # Python's own handler, as in a foreground process (a background test run ignores SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = main(["tune", *MM, "--trials", "400", "--log", str(log), "--progress", "none",
                     *FAST])
    finally:
        after = signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert code == 130 and "interrupted after" in err, err
    assert len(calls) == 2 and len(load_records(log)) == 8  # no round after the stop
    assert after is signal.default_int_handler  # restored by the CLI


def test_export_subcommand_writes_a_loadable_directory(tmp_path):
    import numpy as np

    import tecomp as tc
    from tecomp.schedule.records import MeasureResult, Record, append_records
    from tecomp.testing import workloads as W
    from tecomp.testing.hand_schedules import matmul_schedule
    wl = W.matmul(48, 40, 24)
    log = tmp_path / "mm.jsonl"
    append_records(str(log), [Record(wl.dag.workload_key, str(tc.Target.parse("llvm")),
                                     matmul_schedule(wl.dag).records(), {},
                                     MeasureResult(costs=(1e-4,)))])
    out = tmp_path / "exp"
    p = subprocess.run([sys.executable, "-m", "tecomp.cli", "export", str(log), "--out", str(out),
                        "--workload", "matmul", "--shape", "48", "40", "24"],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    kernels = tc.load(str(out))
    (k,) = kernels.values()
    x = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(k(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)
    h = subprocess.run([sys.executable, "-m", "tecomp.cli", "export", "--help"],
                       capture_output=True, text=True, env=_env(), timeout=60)
    assert h.returncode == 0 and "--out" in h.stdout
