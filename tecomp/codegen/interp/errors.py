"""The interpreter's error type."""


class InterpError(RuntimeError):
    """The program cannot be executed (divergent barrier, non-constant thread extent, ...)."""
