import sys

from harnesscheck.cli import main

sys.exit(main())
