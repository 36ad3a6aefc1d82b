"""The tuning log's lock: a tuning owns its log from before the first measurement to the end.

Two tunings appending to one log interleave their records and, with the same seed, measure the
same candidates twice; a log that cannot be written fails only after a whole round was measured
and lost. :class:`LogLock` checks the log is writable and takes an exclusive ``flock`` on it
before anything is measured; a second tuning of the same log is refused with a clear message.
``flock`` is advisory: readers (``tc.build(log=...)``, ``tecomp best``) are not blocked.
"""
from __future__ import annotations

import errno
import fcntl
import os
import warnings

__all__ = ["LogLock", "LogBusyError"]


class LogBusyError(RuntimeError):
    """Another tuning (process or thread) is writing the same tuning log."""


class LogLock:
    """``with LogLock(path):`` the log is writable and this tuning is its only writer.

    Raises
    ------
    PermissionError, IsADirectoryError, OSError
        The log cannot be created or appended to (one line: the path and the reason).
    LogBusyError
        Another tuning holds the log.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._f = None

    def __enter__(self) -> "LogLock":
        path = self.path
        parent = os.path.dirname(path)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise type(e)(e.errno, f"tuning log {path!r} cannot be written: its folder "
                                   f"{parent!r} cannot be made ({e.strerror or e})") from None
        try:
            f = open(path, "ab")  # noqa: SIM115 - held open for the lock's lifetime
        except OSError as e:
            raise type(e)(e.errno, f"tuning log {path!r} cannot be written: "
                                   f"{e.strerror or e}") from None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                f.close()
                raise LogBusyError(f"tuning log {path!r} is being written by another tuning; "
                                   f"wait for it to finish or give this one another log") from None
            # a filesystem without flock (some network mounts): tune, unprotected, and say so
            warnings.warn(f"tuning log {path!r} cannot be locked ({e.strerror}); a second "
                          f"tuning of it would not be detected", RuntimeWarning, stacklevel=2)
        self._f = f
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            self._f.close()  # closing the descriptor releases the flock
            self._f = None
