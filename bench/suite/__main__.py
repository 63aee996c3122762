"""``python -m bench.suite``: see :mod:`bench.suite.run`."""

import sys

from bench.suite.run import main

sys.exit(main())
