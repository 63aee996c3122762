"""``python -m bench.accuracy``: see :mod:`bench.accuracy.run`."""

import sys

from bench.accuracy.run import main

sys.exit(main())
