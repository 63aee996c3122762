"""``python -m coordinator {serve|worker|migrate|certs} ...`` (see coordinator.cli)."""

import sys

from coordinator.cli import main

sys.exit(main())
