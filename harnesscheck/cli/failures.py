"""How the commands say a failure in one line (`main` for what reaches it, the commands for what
they catch themselves): a file that is missing or not allowed as `No such file or directory:
PATH`, never Python's `[Errno 2] No such file or directory: 'PATH'`."""

from __future__ import annotations


def error_line(error: BaseException) -> str:
    """``error`` as the one line a user reads: an OSError with a reason as `REASON: FILE`, any
    other error as its own text."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    return str(error)
