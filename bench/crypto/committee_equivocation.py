"""Committee sizes under the equivocation bound 2R - T > c (docs/scale.md, issue 26).

Prints ``plan_committee(N, collusion_fraction=f_c, dropout_fraction=f_d).size`` and ``T`` for
N = 1,000 and 10,000, or the parameter a refusal names. Run on main and on this branch to
compare: ``python -m bench.crypto.committee_equivocation``.
"""

from __future__ import annotations

import os
import platform
import sys
import time

from secfpp.crypto.committee import plan_committee
from secfpp.crypto.errors import ParameterError


def main() -> None:
    """Print one line per (N, f_c): the plan for each f_d."""
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        "python -m bench.crypto.committee_equivocation",
        file=sys.stdout,
    )
    for n in (1000, 10000):
        for fc in (0.1, 0.2, 0.25):
            row: list[str] = []
            for fd in (0.1, 0.25, 0.3, 0.33, 0.35, 0.4):
                try:
                    p = plan_committee(n, collusion_fraction=fc, dropout_fraction=fd)
                    row.append(f"fd={fd}:c={p.size},T={p.t}")
                except ParameterError as e:
                    row.append(f"fd={fd}:refused({e.parameter})")
            print(n, fc, " ".join(row), flush=True)


if __name__ == "__main__":
    main()
