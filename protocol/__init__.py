"""What the kit knows of each wire API, below everything that uses it.

`apis/` holds one module per API (routes, request builders, the one fold of its stream, the tool-complete
rule) and the registry; `wire/` the kit's reading of bytes (HTTP client, SSE decoder, timed transcripts,
redaction). The checks (`conformance`), `replay`, `reports` and `agents` read it; it imports none of them.
"""
