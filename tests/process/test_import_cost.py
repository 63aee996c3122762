"""What a coordinator or participant process imports at start-up.

dp-accounting pulls in ``scipy.stats`` and ``scipy.signal`` (about 0.6 s of CPU), which every
process paid although only the privacy ledger and noise calibration use them; they are
imported on first use (:mod:`secfpp.crypto.dp.accounting`). The participant CLI imports no
torch either: the backbone is loaded by the command that trains.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("dp_accounting", "scipy", "torch")


def _imported_after(module: str) -> set[str]:
    code = (
        f"import json, sys; import {module}; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout))


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(
    "module", ["secfpp.coordinator.app", "secfpp.participant.cli", "secfpp.participant.daemon"]
)
def test_start_up_imports_no_accounting_scipy_or_torch(module: str) -> None:
    assert _imported_after(module).isdisjoint(HEAVY), module


def test_the_accountant_still_loads_on_first_use() -> None:
    from secfpp.crypto.dp.accounting import compose_epsilon, gaussian_epsilon_closed_form

    assert compose_epsilon([], delta=1e-5) == 0.0
    pld = compose_epsilon([(5.0, 1.0, 100)], delta=1e-5)
    exact = gaussian_epsilon_closed_form(5.0, 100, 1e-5)
    assert exact <= pld <= exact * 1.01
