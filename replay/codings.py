"""Content codings (``gzip``, ``deflate``, ``zstd``; a chain such as ``gzip, gzip``) undone within a
byte bound, for bodies that come from outside: the client transport's responses (``replay.http1``)
and the capture proxy's records (``replay.capture``).

``Decoder(coding, limit)`` undoes one ``Content-Encoding`` header value piece by piece: ``feed(data)``
returns what the data decodes to, ``finish()`` says whether the coded stream was whole. It raises
``BodyTooLarge`` as soon as the decoded bytes pass ``limit`` (a few KB of gzip can decode to
gigabytes: the output is produced in bounded steps and counted, never allocated whole), and
``CodingError`` for a body that does not decode, a truncated one (a gzip stream without its end),
or data after the end. ``decode(data, coding, limit)`` does it for a whole body.

Hierarchy::

    CodingError(ValueError)
     └── BodyTooLarge
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["BodyTooLarge", "CodingError", "Decoder", "MAX_DECODED_BYTES", "decode"]

#: default bound on a decoded body (the client transport's responses, the capture proxy's records)
MAX_DECODED_BYTES = 64 * 1024 * 1024
_STEP = 1 << 20  # the most one zlib call may produce: output comes in steps of this size
# zstd cannot be asked for at most N bytes; its largest expansion is a 128 KiB block from a few bytes,
# so the input is fed in slices of this size: at most ~2 MiB of output per call.
_ZSTD_SLICE = 64


class CodingError(ValueError):
    """A coded body that does not decode: corrupt, truncated, trailing data, or an unknown coding."""


class BodyTooLarge(CodingError):
    """A body that decodes to more than its limit."""

    def __init__(self, coding: str, limit: int) -> None:
        super().__init__(f"the {coding} body decodes to more than {limit} bytes (the limit); stopped there")
        self.limit = limit


class _Layer:
    """One coding, undone piece by piece; every call's output is at most about _STEP bytes."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._started = False
        self._z: Any = self._new()

    def _new(self) -> Any:
        if self.coding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.coding == "deflate":
            return zlib.decompressobj()  # zlib-wrapped; a raw stream is retried below
        if self.coding == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj()
        raise CodingError(f"unsupported content-encoding {self.coding!r}")

    def steps(self, data: bytes) -> Any:
        """The decoded pieces of ``data``, one bounded step at a time."""
        if self.coding == "zstd":
            yield from self._zstd(data)
            return
        while data:
            if self._z.eof:
                if not data.strip(b"\0"):
                    return  # zero padding after the end, as gzip allows
                if self.coding == "deflate" or not b"\x1f\x8b".startswith(data[:2]):
                    raise CodingError(f"data after the end of the {self.coding} stream")
                self._z = self._new()  # a gzip body may hold several members (RFC 1952)
            try:
                out = self._z.decompress(data, _STEP)
            except zlib.error as exc:
                if self.coding != "deflate" or self._started:
                    raise CodingError(f"the {self.coding} body does not decode ({exc})") from None
                try:
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
                    out = self._z.decompress(data, _STEP)
                except zlib.error as exc2:
                    raise CodingError(f"the deflate body does not decode ({exc2})") from None
            self._started = True
            rest = self._z.unconsumed_tail or (self._z.unused_data if self._z.eof else b"")
            if out:
                yield out
            elif rest == data:  # pragma: no cover - zlib made no progress: do not spin
                raise CodingError(f"the {self.coding} body does not decode")
            data = rest

    def _zstd(self, data: bytes) -> Any:
        import zstandard

        for i in range(0, len(data), _ZSTD_SLICE):
            if self._z.eof:
                raise CodingError("data after the end of the zstd stream")
            try:
                out = self._z.decompress(data[i:i + _ZSTD_SLICE])
            except zstandard.ZstdError as exc:
                raise CodingError(f"the zstd body does not decode ({exc})") from None
            self._started = True
            if out:
                yield out

    def finish(self) -> None:
        if self._started and not self._z.eof:
            raise CodingError(f"the {self.coding} body is truncated (its stream has no end)")


class Decoder:
    """One ``Content-Encoding`` value (codings listed in the order they were applied), undone within
    ``limit`` decoded bytes (see the module docstring)."""

    def __init__(self, coding: str, limit: int = MAX_DECODED_BYTES) -> None:
        codings = [c.strip().lower() for c in coding.split(",") if c.strip()]
        self.layers = [_Layer(c) for c in reversed(codings) if c != "identity"]
        self.coding = ", ".join(codings)
        self.limit = limit
        self.decoded = 0

    def feed(self, data: bytes) -> bytes:
        pieces = [data]
        for n, layer in enumerate(self.layers):
            last = n == len(self.layers) - 1
            out = []
            for piece in pieces:
                for step in layer.steps(piece):
                    out.append(step)
                    if last:
                        self.decoded += len(step)
                        if self.decoded > self.limit:
                            raise BodyTooLarge(self.coding, self.limit)
                    elif sum(map(len, out)) > self.limit:  # an inner layer's input is bounded too
                        raise BodyTooLarge(self.coding, self.limit)
            pieces = out
        return b"".join(pieces)

    def finish(self) -> None:
        for layer in self.layers:
            layer.finish()


def decode(data: bytes, coding: str, limit: int = MAX_DECODED_BYTES) -> bytes:
    """A whole body decoded (``Decoder``); BodyTooLarge past ``limit``, CodingError if it does not decode."""
    decoder = Decoder(coding, limit)
    out = decoder.feed(data)
    decoder.finish()
    return out
