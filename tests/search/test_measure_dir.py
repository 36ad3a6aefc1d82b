"""The measurer's temporary directory (search/measure_dir.py): removed by the next measurer once
its owner is gone, even by kill -9; never while its owner lives."""
import os
import subprocess
import sys

from tecomp.search.measure_dir import PREFIX, MeasureDir, sweep_orphans

KILLED = """
import os, signal, sys
from tecomp.search.measure_dir import MeasureDir
d = MeasureDir(sys.argv[1])
open(os.path.join(d.path, "ref0.npz"), "wb").write(b"x" * 1000)
print(d.path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _dirs(root):
    return sorted(n for n in os.listdir(root) if n.startswith(PREFIX))


def test_a_killed_owners_directory_is_removed_by_the_next_measurer(tmp_path):
    root = str(tmp_path)
    p = subprocess.run([sys.executable, "-c", KILLED, root], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == -9
    orphan = p.stdout.strip()
    assert os.path.isdir(orphan) and os.path.basename(orphan) in _dirs(root)
    live = MeasureDir(root)  # sweeps first
    assert not os.path.exists(orphan)
    assert _dirs(root) == [os.path.basename(live.path)]
    live.remove()
    assert _dirs(root) == []


def test_live_and_foreign_directories_stay(tmp_path):
    root = str(tmp_path)
    a = MeasureDir(root)
    b = MeasureDir(root)  # a's owner (this process) lives: its lock is held
    unlocked = tmp_path / (PREFIX + "older")  # no lock file: an older tecomp's, or being made
    unlocked.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()
    assert sweep_orphans(root) == []
    assert os.path.isdir(a.path) and os.path.isdir(b.path) and unlocked.is_dir() and other.is_dir()
    a.remove()
    a.remove()  # idempotent
    assert not os.path.exists(a.path) and os.path.isdir(b.path)
    b.remove()
