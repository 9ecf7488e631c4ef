"""Wire layer: SSE decoding, recording HTTP clients, timed transcripts, redaction.

The HTTP client (httpx) loads on first use of its names, so that the API modules, which read only
frames and transcripts, and with them the CLI's parser and the catalog, do not import httpx."""

from typing import TYPE_CHECKING

from harnesscheck.lazy import lazy_exports

from .redact import (
    REDACTED,
    redact_args,
    redact_data,
    redact_headers,
    redact_text,
    redact_url,
    secrets_from_args,
    secrets_from_headers,
    secrets_from_url,
)
from .sse import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge, SSEDecoder, SSEFrame, WireError, decode_all
from .transcript import Chunk, Timings, Transcript

if TYPE_CHECKING:
    from .client import aget, apost_json, astream_request, get, post_json, stream_request

__getattr__, __dir__ = lazy_exports(__name__, {
    name: "harnesscheck.protocol.wire.client"
    for name in ("aget", "apost_json", "astream_request", "get", "post_json", "stream_request")})

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "REDACTED",
    "Chunk",
    "FrameTooLarge",
    "SSEDecoder",
    "SSEFrame",
    "Timings",
    "Transcript",
    "WireError",
    "aget",
    "apost_json",
    "astream_request",
    "decode_all",
    "get",
    "post_json",
    "redact_args",
    "redact_data",
    "redact_headers",
    "redact_text",
    "redact_url",
    "secrets_from_args",
    "secrets_from_headers",
    "secrets_from_url",
    "stream_request",
]
