"""``python -m harnesscheck.agents.clients [--budget S] [CLIENT ...]``: install the real clients within a
time budget and check that each starts (CI runs this before the tests; see install.main)."""

from harnesscheck.agents.clients.install import main

raise SystemExit(main())
