"""The kit's own errors: one root, so a caller can tell a kit fault from anything else.

    HarnesscheckError
     ├── UsageError (harnesscheck.errors)            a bad option or input file, an unusable endpoint:
     │                                               the command prints its one line, exits 2
     ├── WireError (protocol.wire.sse)            the stream could not be read as SSE
     │    └── FrameTooLarge                          a line or frame over the size limit
     ├── IncompleteApi (protocol.apis; also TypeError)  apis.register got a module lacking base.Api members
     ├── UnboundFamily (conformance.catalog; also KeyError)  a check family the catalog cannot build for a
     │                                               registered API (its rules need the API's own evidence)
     ├── TraceError (replay.trace; also ValueError)  a trace file that does not validate
     ├── ResultsError (reports.schema; also ValueError)  a results file that does not validate
     └── EngineConfigError (reference_server.engines.transformers_engine; also ValueError)

    Interrupted (a KeyboardInterrupt)                SIGTERM or Ctrl-C: stop, clean up, exit 130

A bad endpoint never raises: what it does becomes a Finding and a check outcome. Errors of the
reference server's request handling (ApiError, InvalidConversation) are answered over HTTP, not
raised to the kit, and stay outside this tree.
"""

from __future__ import annotations

import threading

__all__ = ["STOP_REQUESTED", "HarnesscheckError", "Interrupted", "UsageError"]

# Set by the CLI when a stop signal arrives. Interrupted is raised in the main thread only; worker
# threads that wait on child processes (the fault matrix's suite runs) watch this to stop theirs.
STOP_REQUESTED = threading.Event()


class HarnesscheckError(Exception):
    """Root of the kit's own errors."""


class UsageError(HarnesscheckError):
    """What the user can fix: its message is the one line the command prints before exiting 2."""


class Interrupted(KeyboardInterrupt):
    """A stop request (SIGTERM, or Ctrl-C once the CLI handles it): a KeyboardInterrupt, so pytest and
    every `finally` unwind as for Ctrl-C, with the signal's name as the message. `measured` is what
    the stopped work had finished, where it hands that up (a replay's finished turns, a benchmark's
    finished levels), for the command to write, marked interrupted; None when nothing was."""

    def __init__(self, *args: object, measured: object = None) -> None:
        super().__init__(*args)
        self.measured = measured
