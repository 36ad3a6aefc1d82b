"""A measurer's temporary directory (reference outputs, worker logs), removed even after its
process was killed.

:class:`~tecomp.search.measure.LocalMeasurer` removes its directory on ``close()``, garbage
collection and interpreter exit, but a ``kill -9`` (or an out-of-memory kill) runs none of those,
and the directory keeps the reference outputs of every task (tens of MB for a large matmul). So
each directory holds an exclusive ``flock`` on a file inside it for as long as its owner lives;
the kernel drops the lock when the process dies, however it dies. Every new measurer first removes
the directories whose lock it can take: their owners are gone.
"""
from __future__ import annotations

import os
import shutil
import tempfile

try:
    import fcntl
except ImportError:  # not POSIX: no sweeping, directories are removed at exit only
    fcntl = None

__all__ = ["MeasureDir", "sweep_orphans", "PREFIX"]

PREFIX = "tecomp-measure-"
_LOCK = ".owner.lock"


class MeasureDir:
    """A fresh directory under ``root`` (default: the system's temporary directory), locked by
    this process until :meth:`remove`."""

    def __init__(self, root: str | None = None):
        root = root or tempfile.gettempdir()
        sweep_orphans(root)
        self.path = tempfile.mkdtemp(prefix=PREFIX, dir=root)
        self._fd = None
        if fcntl is not None:
            # locked under a temporary name, then renamed into place: a sweeper never sees the
            # lock file unlocked
            tmp = os.path.join(self.path, _LOCK + ".new")
            fd = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(tmp, os.path.join(self.path, _LOCK))
            self._fd = fd

    def remove(self) -> None:
        """Delete the directory and give up the lock (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def sweep_orphans(root: str | None = None) -> list:
    """Remove the measurer directories under ``root`` whose owning process is gone (their lock is
    free); returns their paths. Directories of live measurers, of other users and without a lock
    file (being created, or from an older tecomp) are left alone."""
    if fcntl is None:
        return []
    root = root or tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(PREFIX):
            continue
        d = os.path.join(root, name)
        try:
            fd = os.open(os.path.join(d, _LOCK), os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its owner lives
        try:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        finally:
            os.close(fd)
    return removed
