"""The one readiness poll (:func:`demo.processes.wait_ready`) of the demo, benchmarks and tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from demo.processes import answers_readyz, wait_ready


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def test_polls_until_ready_and_a_transport_error_is_not_ready(
    sleeper: subprocess.Popen[bytes],
) -> None:
    answers = iter([httpx.ConnectError("refused"), ConnectionRefusedError(), False, True])
    calls = []

    def ready() -> bool:
        calls.append(1)
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    wait_ready(ready, sleeper, timeout_s=30, interval_s=0.01)
    assert len(calls) == 4


def test_a_process_that_exits_first_fails_with_its_status_and_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("x" * 5000 + "address already in use\n")
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    child.wait()
    with pytest.raises(RuntimeError) as caught:
        wait_ready(lambda: False, child, timeout_s=30, log=log, what="the replica")
    text = str(caught.value)
    assert text.startswith("the replica exited with status 3 during start-up")
    assert text.endswith("address already in use\n")
    assert "x" * 3000 not in text  # only the end of the log


def test_a_timeout_names_what_and_how_long(sleeper: subprocess.Popen[bytes]) -> None:
    with pytest.raises(RuntimeError, match=r"^the coordinator was not ready after 0.2 s$"):
        wait_ready(lambda: False, sleeper, timeout_s=0.2, interval_s=0.05)


def test_other_errors_of_ready_propagate(sleeper: subprocess.Popen[bytes]) -> None:
    def broken() -> bool:
        raise ValueError("a bug in the probe")

    with pytest.raises(ValueError, match="a bug in the probe"):
        wait_ready(broken, sleeper, timeout_s=30)


def test_answers_readyz_reads_the_status_through_one_client() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200 if len(seen) > 1 else 503)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        ready = answers_readyz(client, "http://127.0.0.1:9")
        assert ready() is False
        assert ready() is True
    assert seen == ["http://127.0.0.1:9/readyz"] * 2
