"""`harnesscheck bench`: the articles' headline measurements, repeatable against any endpoint.

- ``preamble``: TTFT with a stable prefix, a per-session billing header, and the header stripped;
- ``dispatch``: time to each tool call complete / dispatched versus end of stream, per server mode;
- ``history``: next-turn TTFT with the history kept versus rewritten.

Each returns a ``harnesscheck.results`` document with one or more ``benchmarks`` entries
(docs/benchmarks.md); ``common.write_outputs`` writes it with its plots.
"""
