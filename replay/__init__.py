"""Replayable multi-turn traces: the trace format, the capture proxy, the replayer, the timed
streaming client of replay and benchmarks, AIPerf/Mooncake import and export, built-in workloads.

- ``replay.trace``: ``Trace``, ``Session``, ``TraceTurn``, ``Timing``, ``load``/``save``,
  ``loads``/``dumps``, ``validate``, ``expand_session``, ``TraceError`` (docs/trace-format.md).
- ``replay.client``: ``StreamClient`` (aiohttp, uvloop via ``run_async``), ``StreamResult``.
- ``replay.replayer``: ``replay(trace, ReplayOptions(...)) -> ReplayResult``.
- ``replay.capture``: ``CaptureProxy``, ``ProxyThread``, ``capture_to_trace``.
- ``replay.formats``: ``import_aiperf``/``export_aiperf``, ``import_mooncake``/``export_mooncake``.
- ``replay.workloads``: ``agent_coding(...)``, ``build(name, **kw)``.

Submodules are imported on use (the CLI stays fast).
"""
