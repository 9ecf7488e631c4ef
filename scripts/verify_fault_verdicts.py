"""Confirm the kit's per-client verdicts under the reference server's faults with the real clients.

For each fault: `harnesscheck check --server-arg=--fault=F --apis <the fault's APIs> --verify-clients`
against a fresh embedded server, then read results.json: the verdict the kit inferred for each
client from the failing rules ("would break" / "unaffected" / "not measured") beside what
the client did when it ran against that same server (works / breaks). Writes OUT/verdicts.json
and prints one row per (fault, client) and the disagreements.

    python scripts/verify_fault_verdicts.py --out /tmp/fault-verdicts [FAULT ...]

Needs the real clients installed (`python -m harnesscheck.agents.clients --budget 300`); takes about 30-90 s
a fault (OpenClaw's turns are most of it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from harnesscheck.protocol.apis import NAMES
from harnesscheck.reference_server.faults import FAULTS


def verify(fault: str, out: Path, client_timeout: float) -> dict:
    apis = ",".join(FAULTS[fault].apis or NAMES)  # a fault naming no API bends every one
    folder = out / fault
    cmd = [sys.executable, "-m", "harnesscheck", "check", f"--server-arg=--fault={fault}", "--apis", apis,
           "--verify-clients", "--client-timeout", str(client_timeout), "--out", str(folder)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        doc = json.loads((folder / "results.json").read_text())
    except (OSError, ValueError):
        return {"fault": fault, "error": (proc.stdout + proc.stderr)[-400:], "rows": []}
    failing = [c["id"] for c in doc["checks"] if c["outcome"] == "fail"]
    rows = (doc.get("client_verification") or {}).get("comparison") or []
    return {"fault": fault, "failing": failing, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("faults", nargs="*", help="faults to run (default: every fault that is not transport-only)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--client-timeout", type=float, default=120.0)
    args = parser.parse_args()
    faults = args.faults or [f for f, fault in FAULTS.items() if not fault.transport]
    results, disagreements = [], []
    for fault in faults:
        result = verify(fault, args.out, args.client_timeout)
        results.append(result)
        if "error" in result:
            print(f"{fault}: no results ({result['error'][-200:]})", flush=True)
            continue
        for row in result["rows"]:
            mark = {True: "ok ", None: "TIMED OUT"}.get(row.get("agrees"), "DISAGREES")
            print(f"{mark} {fault:38} {row['client']:22} inferred {row['inferred']:20} measured {row['measured']}",
                  flush=True)
            if row.get("agrees") is False:
                disagreements.append((fault, row))
        (args.out / "verdicts.json").write_text(json.dumps(results, indent=1))
    print(f"{len(disagreements)} disagreement(s) over {len(results)} fault(s); {args.out / 'verdicts.json'}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
