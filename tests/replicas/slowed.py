"""A coordinator or worker process whose clustering decode can be made slow (for tests).

``python tests/replicas/slowed.py --flag FILE --marker FILE --delay S -- serve ...`` runs
``secfpp.coordinator.cli`` with ``argv`` after ``--``, with ``run_clustering`` wrapped: while
``FILE`` exists, a decode first creates ``--marker`` and sleeps ``--delay`` seconds. Only
this test wrapper is slow; the production code has no such hook.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    sys.path.insert(0, str(REPO))
    parser = argparse.ArgumentParser()
    parser.add_argument("--flag", type=Path, required=True)
    parser.add_argument("--marker", type=Path, required=True)
    parser.add_argument("--delay", type=float, required=True)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv

    from secfpp.coordinator import cli
    from secfpp.coordinator.rounds import driver

    real = driver.run_clustering

    def slow(*a: Any, **kw: Any) -> Any:
        if args.flag.exists():
            args.marker.touch()
            time.sleep(args.delay)
        return real(*a, **kw)

    driver.run_clustering = slow  # type: ignore[assignment]
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
