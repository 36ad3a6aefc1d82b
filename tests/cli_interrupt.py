"""Running a tuning CLI command in a subprocess until its log holds some records, then
interrupting it (the Ctrl-C tests of ``tecomp tune`` and ``tecomp tune-model``)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time


def start_tuning(args: list, log, cwd=None, env=None) -> subprocess.Popen:
    """``python -m tecomp.cli ARGS`` with SIGINT at its default (a test run started in the
    background has SIGINT ignored, and the CLI would inherit that)."""
    return subprocess.Popen([sys.executable, "-m", "tecomp.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_records(p: subprocess.Popen, log, n: int = 8, timeout: float = 120) -> None:
    """Return once ``log`` holds ``n`` lines, asserting that ``p`` is still running then."""
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= n:
            break
        time.sleep(0.1)
    assert p.poll() is None, p.communicate()


def interrupt(p: subprocess.Popen, sig=signal.SIGINT, timeout: float = 60) -> tuple:
    """Send ``sig`` and return ``(stdout, stderr)``; the process is killed if it outlives that."""
    try:
        p.send_signal(sig)
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def whole_log_records(log) -> list:
    """The records of an interrupted tuning's ``log``, asserting that it is whole: it ends with a
    newline, every line parses as a record, and loading it warns about nothing."""
    import warnings

    from tecomp.schedule.records import Record, load_records
    data = log.read_bytes()
    assert data.endswith(b"\n")
    for line in data.decode().splitlines():
        Record.from_json(line)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_records(log)
