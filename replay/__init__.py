"""Replayable multi-turn traces: the trace format, the capture proxy, the replayer, the timed
streaming client of replay and benchmarks, AIPerf/Mooncake import and export, built-in workloads.

- ``harnesscheck.replay.trace``: ``Trace``, ``Session``, ``TraceTurn``, ``Timing``, ``load``/``save``,
  ``loads``/``dumps``, ``validate``, ``expand_session``, ``TraceError`` (docs/trace-format.md).
- ``harnesscheck.replay.client``: ``StreamClient`` (``replay.http1`` transport, uvloop via ``run_async``), ``StreamResult``.
- ``harnesscheck.replay.replayer``: ``replay(trace, ReplayOptions(...)) -> ReplayResult``.
- ``harnesscheck.replay.capture``: ``CaptureProxy``, ``ProxyThread``, ``capture_to_trace``.
- ``harnesscheck.replay.formats``: ``import_aiperf``/``export_aiperf``, ``import_mooncake``/``export_mooncake``.
- ``harnesscheck.replay.workloads``: ``agent_coding(...)``, ``build(name, **kw)``.

Submodules are imported on use (the CLI stays fast).
"""
