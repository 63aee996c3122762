"""Dashboard benchmark: render times of every page for 100 participants and 50 rounds.

Seeds a migrated database (SQLite by default, or ``--database-url``) with one SecFPP
federation of ``--participants`` members (created through the API; participants,
rounds, events, reported accuracy and a Gaussian-DP privacy ledger written directly as
the coordinator stores them): two domains that part in round 5, one of them parting
again in round 30, a few dropouts and error-corrected results per round, every
participant reporting held-out accuracy every round, and the newest round still
running (stage ``aggregation``, half of its results in). Then logs in and fetches each
dashboard page ``--repeat`` times through the real app (in-process ASGI, HTTP handling
included) and prints the first (cold: templates compiled, privacy accountant run),
median and maximum wall time per page against the 300 ms target, and the median CPU
time of the process per request (the part that does not grow when other jobs share the
cores).

Usage::

    python -m bench.load.dashboard                     # 100 participants, 50 rounds, SQLite
    python -m bench.load.dashboard --database-url postgresql+psycopg://postgres@127.0.0.1/x
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.orm import Session

from secfpp.coordinator.app import create_app
from secfpp.coordinator.auth.tokens import hash_token
from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.db.migrate import upgrade
from secfpp.coordinator.db.models import (
    CodedResult,
    Participant,
    ParticipantMetric,
    Round,
    RoundEvent,
)
from secfpp.coordinator.rounds import store
from secfpp.coordinator.settings import Settings
from secfpp.crypto.clustering import Membership
from secfpp.crypto.dp import LedgerRecord, gdp_sigma, mean_sensitivity

TOKEN = "bench-admin-token"  # a benchmark's throwaway credential
TARGET_MS = 300.0
STAGES = ("sharing", "distances", "clustering", "aggregation", "published")


def _membership(number: int, n: int) -> Membership:
    """Round ``number`` trains under: one cluster, two domains from round 6, three from 31."""
    everyone = tuple(range(n))
    if number <= 5:
        return Membership(clusters=((0, everyone),), probes=(), next_id=1)
    a, b = tuple(range(n // 2)), tuple(range(n // 2, n))
    if number <= 30:
        return Membership(clusters=((1, a), (2, b)), probes=(), next_id=3)
    b1, b2 = b[: len(b) // 2], b[len(b) // 2 :]
    return Membership(clusters=((1, a), (3, b1), (4, b2)), probes=(), next_id=5)


def seed(sessions: Any, federation_id: str, n: int, rounds: int, z: float) -> None:
    rng = random.Random(0)
    t0 = datetime.now(UTC) - timedelta(hours=rounds - 1, minutes=2)  # the last one is live
    with sessions() as session:
        session: Session
        session.add_all(
            Participant(
                id=str(uuid.uuid4()),
                federation_id=federation_id,
                lcc_index=i,
                display_name=f"hospital-{i:03d}",
                public_key=rng.randbytes(32),
                token_hash=hash_token(f"participant-{i}"),
                enrolled_at=t0 + timedelta(seconds=i),
                token_last_used_at=t0 + timedelta(days=20, seconds=i),
            )
            for i in range(n)
        )
        ledger: list[LedgerRecord] = []
        for number in range(1, rounds + 1):
            start = t0 + timedelta(hours=number - 1)
            membership = _membership(number, n)
            nxt = _membership(number + 1, n)
            dropped = {str(i): rng.choice(STAGES[:2]) for i in rng.sample(range(n), 2)}
            present = [i for i in range(n) if dropped.get(str(i)) != "sharing"]
            responders = [i for i in present if str(i) not in dropped]
            sets = [[c, [m for m in ms if m in responders]] for c, ms in membership.clusters]
            live = number == rounds
            ratios = {str(c): round(rng.uniform(0.02, 0.4), 4) for c, _ in membership.clusters}
            p_values = {str(c): round(rng.uniform(0.0, 1.0), 3) for c, _ in membership.clusters}
            splits = [{"parent": 0, "child": 2, "members": list(range(n // 2, n)), "ratio": 0.03}]
            state: dict[str, Any] = {
                "membership": membership.to_dict(),
                "generation": number - 1,
                "clustering": True,
                "participants": list(range(n)),
                "dropped": dropped,
                "present": present,
                "aggregation_sets": sets,
                "responders": {"distances": responders}
                if live
                else {"distances": responders, "aggregation": responders},
                "rejected": {"distances": [rng.randrange(n)]},
                "next_generation": None if live else number,
                "next_membership": None if live else nxt.to_dict(),
            }
            rnd = Round(
                id=str(uuid.uuid4()),
                federation_id=federation_id,
                number=number,
                stage="aggregation" if live else "published",
                version=6,
                stage_started_at=start + timedelta(seconds=90),
                deadline=start + timedelta(seconds=690) if live else None,
                started_at=start,
                finished_at=None if live else start + timedelta(seconds=120),
                state=state,
            )
            session.add(rnd)
            session.flush()  # no ORM relationships: rows that refer to it come after
            details = [
                {"generation": number - 1, "clustering": True},
                {"present": present, "dropped": [], "aggregation_sets": sets},
                {"responders": responders, "dropped": []},
                {
                    "used": responders,
                    "rejected": [],
                    "next_clusters": nxt.to_dict()["clusters"],
                    "splits": splits if number == 5 else [],
                    "merges": [],
                    "split_ratios": ratios,
                    "split_p_values": p_values,
                    "decoded_distances": n * len(membership.clusters) + 1,
                },
                {"aggregated": [c for c, _ in sets], "rejected": [], "generation": number},
            ]
            last = 4 if live else 5
            for k in range(last):
                session.add(
                    RoundEvent(
                        round_id=rnd.id,
                        version=k + 1,
                        kind="started" if k == 0 else "transition",
                        from_stage=None if k == 0 else STAGES[k - 1],
                        to_stage=STAGES[k] if k < 4 else "published",
                        detail=details[k],
                        created_at=start + timedelta(seconds=30 * k),
                    )
                )
            if live:
                session.add_all(
                    CodedResult(
                        round_id=rnd.id,
                        stage="aggregation",
                        participant=i,
                        payload=b"\0" * 64,
                        digest="0" * 64,
                        created_at=start,
                    )
                    for i in responders[: len(responders) // 2]
                )
                continue
            session.add_all(
                ParticipantMetric(
                    round_id=rnd.id,
                    participant=i,
                    name="accuracy",
                    value=round(min(1.0, 0.6 + 0.005 * number + rng.gauss(0, 0.05)), 4),
                    created_at=start,
                )
                for i in responders
            )
            for c, members in sets:
                m = len(members)
                ledger.append(
                    LedgerRecord(
                        federation_id=federation_id,
                        round=number,
                        kind="gdp",
                        participants=tuple(members),
                        sigma=gdp_sigma(noise_multiplier=z, clip_norm=1.0, n_contributors=m),
                        sensitivity=mean_sensitivity(clip_norm=1.0, n_contributors=m),
                        cluster_id=c,
                        mechanism="discrete_gaussian",
                    )
                )
        store.write_ledger(session, tuple(ledger), t0)
        session.commit()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", type=Path, help="also write the figures here (bench.report)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        engine = make_engine(url)
        upgrade(engine)
        settings = Settings(database_url=url, admin_token=SecretStr(TOKEN), tick_interval_s=3600)
        with TestClient(create_app(settings), base_url="https://127.0.0.1") as client:
            admin = {"Authorization": f"Bearer {TOKEN}"}
            body = {
                "name": "bench-100x50",
                "n_participants": args.participants,
                "backbone": None,  # unpinned: a stand-in trainer of this width
                "prompt": {"n_ctx": 4, "dim": 64},
                "tolerance": {"reduced_dim": 16},
                "dp": {
                    "mechanism": "gaussian",
                    "noise_multiplier": 4.0,
                    "delta": 1e-5,
                    "epsilon_budget": 50.0,
                },
            }
            created = client.post("/v1/federations", json=body, headers=admin)
            created.raise_for_status()
            fid = created.json()["id"]
            began = time.perf_counter()
            seed(make_sessionmaker(engine), fid, args.participants, args.rounds, 4.0)
            print(
                f"seeded {args.participants} participants x {args.rounds} rounds "
                f"in {time.perf_counter() - began:.1f} s ({url.split(':')[0]})"
            )
            login = client.post(
                "/dashboard/login",
                content=f"token={TOKEN}&next=/dashboard/",
                headers={"content-type": "application/x-www-form-urlencoded"},
                follow_redirects=False,
            )
            assert login.status_code == 303, login.text
            pages = {
                "federations": "/dashboard/",
                "federation": f"/dashboard/federations/{fid}",
                "timeline (poll)": f"/dashboard/federations/{fid}/timeline",
                "participants": f"/dashboard/federations/{fid}/participants",
            }
            print(
                f"{'page':<18}{'KB':>7}{'first ms':>10}{'median ms':>11}{'max ms':>9}{'CPU ms':>9}"
                f"  target < {TARGET_MS:g} ms"
            )
            worst = 0.0
            for name, path in pages.items():
                times, cpu, size = [], [], 0
                for _ in range(args.repeat):
                    t, c = time.perf_counter(), time.process_time()
                    r = client.get(path)
                    times.append((time.perf_counter() - t) * 1000)
                    cpu.append((time.process_time() - c) * 1000)
                    assert r.status_code == 200, (path, r.status_code)
                    size = len(r.content)
                median = statistics.median(times)
                worst = max(worst, median)
                rows.append(
                    {
                        "page": name,
                        "kb": size / 1024,
                        "first_ms": times[0],
                        "median_ms": median,
                        "max_ms": max(times),
                        "cpu_ms": statistics.median(cpu),
                    }
                )
                print(
                    f"{name:<18}{size / 1024:>7.1f}{times[0]:>10.1f}{median:>11.1f}"
                    f"{max(times):>9.1f}{statistics.median(cpu):>9.1f}"
                )
            verdict = "OK" if worst < TARGET_MS else "SLOWER THAN TARGET"
            print(f"{verdict} (worst median {worst:.1f} ms)")
        engine.dispose()
    if args.json:
        doc = {
            "participants": args.participants,
            "rounds": args.rounds,
            "repeat": args.repeat,
            "database": url.split(":")[0],
            "pages": rows,
        }
        args.json.write_text(json.dumps(doc, indent=1))


def section(data: dict[str, Any]) -> list[str]:
    """``bench.report``'s section from a ``--json`` run: one row per page, the verdict."""
    worst = max(r["median_ms"] for r in data["pages"])
    return [
        f"Every dashboard page for {data['participants']} participants and {data['rounds']} "
        f"rounds ({data['database']}), fetched {data['repeat']} times through the real app "
        "(in-process ASGI); wall ms (first = cold: templates compiled, accountant run) and "
        f"the process CPU ms per request; target: median < {TARGET_MS:g} ms:",
        "",
        "| page | KB | first ms | median ms | max ms | CPU ms |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {r['page']} | {r['kb']:.1f} | {r['first_ms']:.1f} | {r['median_ms']:.1f} "
            f"| {r['max_ms']:.1f} | {r['cpu_ms']:.1f} |"
            for r in data["pages"]
        ),
        "",
        f"Worst median {worst:.1f} ms: target {'met' if worst < TARGET_MS else 'missed'}.",
    ]


if __name__ == "__main__":
    main()
