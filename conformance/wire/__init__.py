"""Wire layer: SSE decoding, recording HTTP clients, timed transcripts, redaction."""

from .client import aget, apost_json, astream_request, get, post_json, stream_request
from .redact import REDACTED, redact_headers, redact_text, redact_url, secrets_from_headers
from .sse import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge, SSEDecoder, SSEFrame, WireError, decode_all
from .transcript import Chunk, Timings, Transcript

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
    "redact_headers",
    "redact_text",
    "redact_url",
    "secrets_from_headers",
    "stream_request",
]
