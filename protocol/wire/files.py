"""The one reader of files the user names (results, baselines, traces, captures, task lists): a
regular file only, and never more than a stated number of bytes.

A symlink to ``/dev/zero``, a FIFO or a device would be read until memory runs out (or, a FIFO,
block forever); such a path is refused before a byte is read (it is opened non-blocking and
checked on the open descriptor, so a path swapped after a check is caught too). A file past its
limit is refused naming the limit.

    read_bytes(path, limit=..., gunzip=False) -> bytes
    read_text(path, limit=..., gunzip=False) -> str      # UTF-8; UnicodeDecodeError as ever

``NotReadable`` is an OSError (its ``strerror`` the reason), so every reader's existing
``except OSError`` turns it into its own one line: "cannot read ...: not a regular file (a character
device)". JSON readers add ``JSON_ERRORS``: what ``json.loads`` raises on a file it cannot read as
the kit's data, a number of more than 4300 digits (ValueError) and nesting too deep (RecursionError)
included.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import zlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEFAULT_MAX_BYTES", "JSON_ERRORS", "NotReadable", "json_problem", "read_bytes", "read_text"]

#: The default bound: the most any reader holds of one file, decompressed.
DEFAULT_MAX_BYTES = 1 << 30

#: What json.loads raises on text it cannot turn into the kit's data: JSONDecodeError, a number
#: beyond Python's digit limit for int (ValueError), nesting too deep (RecursionError).
JSON_ERRORS = (ValueError, RecursionError)

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


class NotReadable(OSError):
    """A path the kit will not read: not a regular file, or past its byte limit (``strerror`` says which)."""

    def __init__(self, path: str | Path, reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason, str(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _bounded(read: Callable[[int], bytes], limit: int) -> bytes:
    """At most limit + 1 bytes from a file object's read(n), in chunks (a gzip member is never
    decompressed past that)."""
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def read_bytes(path: str | Path, *, limit: int = DEFAULT_MAX_BYTES, gunzip: bool = False) -> bytes:
    """A regular file's bytes, at most ``limit`` (with ``gunzip``, a file that starts with the gzip
    magic bytes is decompressed, and the limit bounds what it decompresses to). NotReadable for
    anything else, or past the limit, or (gunzip) a broken gzip stream; OSError as open() raises it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if os.path.isdir(path):  # open() of a folder: EISDIR on Linux; say it the same way everywhere
        raise NotReadable(path, "not a regular file (a folder)", errno.EISDIR)
    fd = os.open(path, flags)  # non-blocking: a FIFO without a writer does not hold the open
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotReadable(path, f"not a regular file ({_kind(mode)})")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            head = fh.read(2)
            fh.seek(0)
            zipped = gunzip and head == _GZIP_MAGIC
            if zipped:
                try:
                    with gzip.GzipFile(fileobj=fh) as gz:
                        data = _bounded(gz.read, limit)
                except (OSError, EOFError, zlib.error) as exc:
                    raise NotReadable(path, f"not a valid gzip file: {exc}") from None
            else:
                data = _bounded(fh.read, limit)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise NotReadable(path, f"more than {limit:,} bytes{' once decompressed' if zipped else ''} (the limit)",
                          errno.EFBIG)
    return data


def read_text(path: str | Path, *, limit: int = DEFAULT_MAX_BYTES, gunzip: bool = False) -> str:
    """``read_bytes`` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_bytes(path, limit=limit, gunzip=gunzip).decode("utf-8")


def json_problem(error: BaseException) -> str:
    """The reason, in a few words, that json.loads raised `error` (one of JSON_ERRORS)."""
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON: {error}"
    if isinstance(error, RecursionError):
        return "JSON nested too deeply"
    if "digits" in str(error):  # int("9" * 5000): Python's limit on decimal digits
        return "a number with more digits than the kit reads (4300)"
    return f"not valid JSON: {error}"
