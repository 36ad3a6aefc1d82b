"""``tecomp tune-model``: tunes a model file's layers into a log, resumes it, and reports bad
files and arguments in one line."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from cli_interrupt import interrupt, start_tuning, wait_for_records, whole_log_records  # noqa: E402
from test_tasks import three_convs  # noqa: E402

import tecomp as tc  # noqa: E402
from tecomp.schedule.records import load_records  # noqa: E402

FAST = ["--population", "16", "--generations", "1", "--measures-per-round", "4", "--repeat", "1",
        "--min-repeat-ms", "1", "--cost-model", "random", "--progress", "lines"]


def run(*args, timeout=240):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "tecomp.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_bad_model_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    r = run("tune-model", str(bad), "--trials", "1", "--log", str(tmp_path / "l.jsonl"))
    assert r.returncode == 1 and "bad.onnx" in r.stderr and "Traceback" not in r.stderr
    r = run("tune-model", str(tmp_path / "missing.onnx"))
    assert r.returncode == 2 and "no model file" in r.stderr


@pytest.mark.slow  # ~40 s: two short tunings with worker processes
def test_tune_model_resumes_and_the_log_builds_the_model(tmp_path):
    path, log = tmp_path / "three.onnx", tmp_path / "three.jsonl"
    onnx.save(three_convs(), str(path))
    common = ["--trials", "4", "--log", str(log), "--measures-per-round", "4",
              "--population", "16", "--generations", "1", "--repeat", "1", "--progress", "lines"]
    r = run("tune-model", str(path), *common)
    assert r.returncode == 0, r.stderr
    assert "2 distinct layers (3 in all)" in r.stdout and log.exists()
    # then each layer's best records are timed in place in the compiled model
    assert "timing each layer's 6 best records in place" in r.stdout, r.stdout
    n_recs = len(load_records(log))  # the search's records (the in-place timings apart)
    r = run("tune-model", str(path), *common)
    assert r.returncode == 0, r.stderr
    # the first layer holds its share (4 trials / 2 layers): the second gets all 4 trials
    assert "1 layer(s) already hold >= 2 valid records in the log and get no trial" in r.stdout
    assert len(load_records(log)) == n_recs + 4
    model = tc.from_onnx(str(path))
    cm = tc.compile_model(model, log=str(log))
    assert cm.untuned == []
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    assert cm(x).shape == (1, 8, 3, 3)


def _three_small_convs():
    """three_convs' graph (two convolutions of one shape, a strided third) with 2 channels on a
    4x4 image: two distinct layers whose random candidates build in about a second (unrolled, the
    4-channel 6x6 ones' took up to 9 s)."""
    from onnx import helper
    from onnx_util import make_model
    w = lambda *s: (np.random.default_rng(sum(s)).standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "W3"], ["y"], strides=[2, 2])]
    inits = {"W1": w(2, 2, 3, 3), "B1": w(2), "W2": w(2, 2, 3, 3), "B2": w(2), "W3": w(4, 2, 2, 2)}
    return make_model(nodes, {"x": [1, 2, 4, 4]}, {"y": [1, 4, 2, 2]}, inits)


def test_ctrl_c_stops_tune_model_cleanly_and_the_log_resumes(tmp_path):
    path, log = tmp_path / "three.onnx", tmp_path / "int.jsonl"
    onnx.save(_three_small_convs(), str(path))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = start_tuning(["tune-model", str(path), "--trials", "400", "--log", str(log), *FAST],
                     log, env=env)
    wait_for_records(p, log, 8, timeout=180)
    out, err = interrupt(p)
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted after" in lines[0], err
    assert "rerun the same command to resume" in lines[0]
    # the log is whole: every line a record, and the message counts them
    recs = whole_log_records(log)
    assert len(recs) >= 8 and f"holds {len(recs)} records of these layers" in lines[0]
    # and it resumes: a rerun reads it, measures none of its candidates again, adds to it (no
    # timing in place after it: those records are not the search's, load_records leaves them out)
    r = run("tune-model", str(path), "--trials", "4", "--log", str(log), "--min-records", "0",
            "--in-place", "0", *FAST)
    assert r.returncode == 0, r.stderr
    assert "resuming: the log holds records of" in r.stdout
    again = load_records(log)
    assert len(again) == len(recs) + 4
    assert len({(x.workload_key, x.key) for x in again}) == len(again)  # nothing measured twice


@pytest.mark.parametrize("argv", [["tune", "matmul", "--shape", "8", "8", "8"], ["tune-model", "m.onnx"]])
def test_flush_cache_flag_reaches_the_tuning_options(argv):
    from tecomp.cli import build_parser
    from tecomp.cli.commands import tuning_options
    parser = build_parser()
    assert tuning_options(parser.parse_args(argv)).flush_cache is False
    assert tuning_options(parser.parse_args(argv + ["--flush-cache"])).flush_cache is True


@pytest.mark.parametrize("argv", [["tune", "matmul", "--shape", "8", "8", "8"], ["tune-model", "m.onnx"]])
def test_no_model_prior_flag_reaches_the_tuning_options(argv):
    from tecomp.cli import build_parser
    from tecomp.cli.commands import tuning_options
    parser = build_parser()
    assert tuning_options(parser.parse_args(argv)).model_prior is True
    assert tuning_options(parser.parse_args(argv + ["--no-model-prior"])).model_prior is False
