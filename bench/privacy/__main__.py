"""``python -m bench.privacy``: see :mod:`bench.privacy.run`."""

import sys

from bench.privacy.run import main

sys.exit(main())
