"""Start Dynamo's mocker engine with a reasoning and a tool-call parser (run by Dynamo's Python).

``python dynamo_mocker.py --reasoning-parser NAME --tool-call-parser NAME -- MOCKER-ARGS...``

Dynamo 1.6.1's ``python -m dynamo.mocker`` takes no parser flags; the frontend reads the parsers
from the runtime config each worker registers, which ``dynamo.mocker.main`` gets from
``build_runtime_config`` (``dynamo/mocker/config.py``: returns ``(block_size,
ModelRuntimeConfig)``). This wrapper replaces that name in ``dynamo.mocker.main`` with one that
sets ``reasoning_parser`` and ``tool_call_parser`` on the returned config, then runs the mocker's
own ``main()`` with the remaining arguments. It imports nothing of the kit: it runs in Dynamo's
environment.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--tool-call-parser", default=None)
    ours, rest = p.parse_known_args()
    if rest[:1] == ["--"]:
        rest = rest[1:]
    import dynamo.mocker.main as mocker

    build = mocker.build_runtime_config

    def with_parsers(engine_args: Any) -> Any:
        block_size, rc = build(engine_args)
        if ours.reasoning_parser:
            rc.reasoning_parser = ours.reasoning_parser
        if ours.tool_call_parser:
            rc.tool_call_parser = ours.tool_call_parser
        return block_size, rc

    mocker.build_runtime_config = with_parsers
    sys.argv = ["dynamo.mocker", *rest]
    mocker.main()


if __name__ == "__main__":
    main()
