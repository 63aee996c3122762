"""The load benchmark's own HTTP client (bench.load.http) and figures (bench.load.run).

A tiny asyncio server answers with a Content-Length body, a chunked body and a
``Connection: close``; the client must read each answer exactly, reuse its keep-alive
connection, reopen it after the server closed it, and report a broken answer as a
ConnectionError (the load member then sends the request again).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.load.http import Connection
from bench.load.run import summarize
from bench.load.sim import Sample


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            break
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ")
        fields = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        body = await reader.readexactly(int(fields.get("content-length", "0")))
        if path == "/echo":
            doc = json.dumps({"method": method, "body": body.decode(), "auth": fields.get("x-a")})
            payload = doc.encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        elif path == "/chunked":
            writer.write(
                b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            )
        elif path == "/close":
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n")
            writer.write(b"Connection: close\r\n\r\nno")
            await writer.drain()
            break
        else:  # a broken answer: the connection ends in the middle of the body
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
            await writer.drain()
            break
        await writer.drain()
    writer.close()


def test_the_client_reads_answers_and_reopens_closed_connections() -> None:
    async def scenario() -> list[object]:
        accepted: list[int] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(1)
            await _serve(reader, writer)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = Connection("127.0.0.1", port)
        out: list[object] = []
        r = await conn.request("POST", "/echo", headers={"X-A": "t"}, content=b'{"x":1}')
        out.append((r.status_code, r.json()))
        r = await conn.request("GET", "/chunked")
        out.append((r.status_code, r.content))
        out.append(len(accepted))  # both on one keep-alive connection
        r = await conn.request("GET", "/close")
        out.append((r.status_code, r.content))
        r = await conn.request("GET", "/echo")  # reopened after the server closed it
        out.append((r.status_code, r.json()["method"], len(accepted)))  # the 2nd
        with pytest.raises(ConnectionError):
            await conn.request("GET", "/broken")
        r = await conn.request("GET", "/chunked")  # and again after a broken answer
        out.append((r.status_code, r.content, len(accepted)))
        await conn.close()
        server.close()
        await server.wait_closed()
        return out

    assert asyncio.run(scenario()) == [
        (200, {"method": "POST", "body": '{"x":1}', "auth": "t"}),
        (201, b"hello world"),
        1,
        (503, b"no"),
        (200, "GET", 2),
        (201, b"hello world", 3),
    ]


def test_summary_percentiles_and_error_counts() -> None:
    samples = [Sample("task", 200, s / 100) for s in range(1, 101)]
    samples += [Sample("shares", 503, 2.0), Sample("shares", 0, 0.5)]
    got = summarize(samples)
    assert got["server_errors"] == 1
    assert got["transport_errors"] == 1
    assert got["statuses"] == {"0": 1, "200": 100, "503": 1}
    task = got["endpoints"]["task"]
    assert task["count"] == 100
    assert task["p50"] == pytest.approx(0.505)
    assert task["p95"] == pytest.approx(0.9505)
    assert task["max"] == 1.0
    assert got["overall"]["max"] == 2.0
    # the slowest answered requests, slowest first, with when they were sent
    samples.append(Sample("inbox", 200, 1.5, at=1_700_000_000.25))
    slow = summarize(samples, slowest=3)["slowest"]
    assert slow == [
        {"endpoint": "shares", "seconds": 2.0, "at": 0.0},
        {"endpoint": "inbox", "seconds": 1.5, "at": 1_700_000_000.25},
        {"endpoint": "task", "seconds": 1.0, "at": 0.0},
    ]


@pytest.mark.parametrize(
    ("threads", "workers", "expected"),
    [(40, 1, (40, 0)), (40, 2, (30, 10)), (16, 1, (16, 0)), (16, 4, (15, 1)), (8, 3, (8, 0))],
)
def test_the_default_pool_keeps_connections_within_the_budget(
    threads: int, workers: int, expected: tuple[int, int]
) -> None:
    from bench.load.run import POOL_BUDGET, default_pool

    pool, overflow = default_pool(threads, workers)
    assert (pool, overflow) == expected
    assert pool + overflow == threads  # every thread can hold a connection
    assert workers * pool <= POOL_BUDGET  # kept connections of all processes


def test_training_times_are_log_normal_around_their_median() -> None:
    import math
    import random

    from bench.load.run import training_times

    times = training_times(4001, 25.0, 0.5, random.Random(0))
    logs = sorted(math.log(t) for t in times)
    assert math.exp(logs[2000]) == pytest.approx(25.0, rel=0.05)  # the median
    sd = (sum((x - math.log(25.0)) ** 2 for x in logs) / len(logs)) ** 0.5
    assert sd == pytest.approx(0.5, rel=0.05)
    assert training_times(3, 25.0, 0.0, random.Random(0)) == [25.0] * 3
    assert training_times(3, 0.0, 0.5, random.Random(0)) == [0.0] * 3  # no training: a burst
    again = training_times(5, 25.0, 0.5, random.Random(7))
    assert again == training_times(5, 25.0, 0.5, random.Random(7))  # seeded


@pytest.mark.parametrize(
    ("participants", "poll", "rate", "expected"),
    [(1000, 5.0, 100.0, 10.0), (64, 1.0, 100.0, 1.0), (100_000, 1.0, 100.0, 60.0)],
)
def test_a_waiting_daemon_polls_at_the_coordinators_hint_or_its_own_pace(
    participants: int, poll: float, rate: float, expected: float
) -> None:
    import argparse

    from bench.load.run import poll_interval_s

    args = argparse.Namespace(participants=participants, poll=poll, poll_rate=rate)
    assert poll_interval_s(args) == expected


def test_the_profile_is_classified_by_the_innermost_coordinator_frame(tmp_path) -> None:
    from bench.load.results import profile_shares

    raw = tmp_path / "spy.txt"
    raw.write_text(
        "run (uvicorn/protocols/http/h11_impl.py:1);upload_shares (x);"
        "accept_shares (secfpp/coordinator/rounds/uploads.py:9);"
        "insert_envelopes (secfpp/coordinator/rounds/store_envelopes.py:5) 3\n"
        "run (uvicorn/protocols/http/h11_impl.py:1) 1\n"
        "main (elsewhere.py:1) 4\n"
    )
    total, shares = profile_shares(raw)
    assert total == 8
    assert dict(shares) == {
        "share upload: COPY of the envelopes": 3 / 8,
        "HTTP server (uvicorn, h11/httptools)": 1 / 8,
        "other (event loop, threads, logging)": 4 / 8,
    }


def test_the_slowest_requests_are_placed_in_their_round() -> None:
    from bench.load.results import slowest_in_rounds

    run = {
        "rounds": [
            {
                "round": 1,
                "stage_times": [
                    ["sharing", "2026-11-29T00:00:00Z"],
                    ["published", "2026-11-29T00:02:00+00:00"],
                ],
            }
        ],
        "slowest": [
            {"endpoint": "task", "seconds": 8.4, "at": 1_795_910_530.0},  # 00:02:10
            {"endpoint": "shares", "seconds": 2.0, "at": 1_795_910_405.5},  # 00:00:05.5
            {"endpoint": "inbox", "seconds": 1.0, "at": 1.0},  # before any stage: left out
        ],
    }
    assert slowest_in_rounds(run) == [
        ("task", 8.4, "10.0 s after round 1 published"),
        ("shares", 2.0, "5.5 s after round 1 sharing"),
    ]
    assert slowest_in_rounds({"rounds": []}) == []
