"""The kit's own errors: one root, so a caller can tell a kit fault from anything else.

    HarnesscheckError
     ├── WireError (conformance.wire.sse)            the stream could not be read as SSE
     │    └── FrameTooLarge                          a line or frame over the size limit
     ├── TraceError (replay.trace; also ValueError)  a trace file that does not validate
     ├── ResultsError (reports.schema; also ValueError)  a results file that does not validate
     └── EngineConfigError (reference_server.engines.transformers_engine; also ValueError)

A bad endpoint never raises: what it does becomes a Finding and a check outcome. Errors of the
reference server's request handling (ApiError, InvalidConversation) are answered over HTTP, not
raised to the kit, and stay outside this tree.
"""

from __future__ import annotations


class HarnesscheckError(Exception):
    """Root of the kit's own errors."""
