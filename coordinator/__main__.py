"""``python -m secfpp.coordinator {serve|worker|migrate|certs} ...`` (see coordinator.cli)."""

import sys

from secfpp.coordinator.cli import main

sys.exit(main())
