"""What every arm of `bench fidelity` hands back per request (the kit's client, plain httpx, a peer read
from its own files), to be paired with the ground-truth server's log by request id. Its own module so
that `fidelity` (which runs the arms) and `fidelity_peers` (which reads the peers' files) both import it
and neither imports the other's importer."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Measured:
    """One request as a client saw it: times in ms from its start; ``start_ns`` on the shared clock."""

    rid: str
    ttft_ms: float | None = None
    token_ms: list[float] = field(default_factory=list)
    error: str | None = None
    start_ns: int = 0
