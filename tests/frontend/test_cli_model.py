"""``tecomp tune-model``: tunes a model file's layers into a log, resumes it, and reports bad
files and arguments in one line."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from test_tasks import three_convs  # noqa: E402

import tecomp as tc  # noqa: E402


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
    n_lines = len(log.read_text().splitlines())
    r = run("tune-model", str(path), *common)
    assert r.returncode == 0, r.stderr
    assert "resuming: the log holds records of 1 of these layers" in r.stdout
    assert len(log.read_text().splitlines()) > n_lines
    model = tc.from_onnx(str(path))
    cm = tc.compile_model(model, log=str(log))
    assert cm.untuned == []
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    assert cm(x).shape == (1, 8, 3, 3)
