"""End-to-end committee round against all-to-all (issue 17): prints a table (not a test).

One clustering round of a federation of ``N`` participants runs through the real
coordinator app (in process, :class:`fastapi.testclient.TestClient`, SQLite in a
temporary directory) and ``N`` production participant engines
(:class:`participant.engine.Engine` with the stand-in trainer
:class:`tests.support.trainers.FixedTrainer`, ``x_i`` of length ``r = 128`` and ``g_i`` of length
``d``), stepped one after the other, once with a committee of ``c`` members
(``tolerance.committee_size``) and once all-to-all (``c = N``). Per stage it reports,
from the database after the round:

* **envelopes**: sealed shares stored (``N c`` with a committee, ``N^2`` all-to-all:
  each participant seals one envelope per recipient, itself included, per kind);
* **MB up / participant**: the sharing upload of one participant (both kinds);
* **MB inbox / member**: what one member downloads per coded stage (its inbox holds
  both kinds; the engine fetches it in the distance and again in the aggregation stage);
* **results, MB results**: coded results uploaded and their total size;
* **s (summed)**: wall seconds of the stage with every participant's work and the
  coordinator's request handling done one after the other in this process (so the sum
  over all machines, not the time of a deployment where they run in parallel);
  **decode s**: the coordinator's decode (``secfpp_decode_seconds``).

Both runs decode exactly (the round publishes; distances are checked against the
plaintext reference of the quantized prompts in the committee tests, tests/committee).
Keep ``N`` moderate: all-to-all stores ``2 N^2`` envelopes.

Usage:  python -m bench.committee_round [--n 200] [--c 64] [--d 10000] [--collusion 0.1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.migrate import upgrade
from secfpp.coordinator.db.models import CodedResult, ShareEnvelope
from secfpp.coordinator.settings import Settings
from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.participant.engine import Engine
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir
from tests.support.trainers import FixedTrainer

ADMIN = {"Authorization": "Bearer bench-admin-token"}
REDUCED_DIM = 128
N_CTX = 10


@dataclass(frozen=True)
class StageRow:
    stage: str
    envelopes: int
    up_mb: float
    inbox_mb: float
    results: int
    results_mb: float
    seconds: float
    decode_s: float


def _federation(n: int, c: int, d: int, collusion: float, dropout: float) -> dict[str, Any]:
    if d % N_CTX:
        raise SystemExit(f"--d must be a multiple of {N_CTX} (prompt {N_CTX} x d/{N_CTX})")
    return {
        "name": f"bench-committee-{c}",
        "strategy": "secfpp",
        "n_participants": n,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": N_CTX, "dim": d // N_CTX, "init_std": 0.02, "init_seed": 1},
        "tolerance": {
            "reduced_dim": REDUCED_DIM,
            "dropout_fraction": dropout,
            "collusion_fraction": collusion,
            "committee_size": c,
        },
        "rounds": {"warmup_rounds": 0, "lr_global": 1.0},
        "deadlines": {"sharing_s": 3600, "distances_s": 3600, "aggregation_s": 3600},
    }


def _decode_seconds(client: TestClient) -> dict[str, float]:
    text = client.get("/metrics", headers=ADMIN).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("secfpp_decode_seconds_sum{"):
            stage = line.split('stage="', 1)[1].split('"', 1)[0]
            out[stage] = float(line.rsplit(" ", 1)[1])
    return out


def run(n: int, c: int, d: int, collusion: float, dropout: float) -> list[StageRow]:
    """One clustering round with committee size ``c`` (``c = n``: all-to-all)."""
    with tempfile.TemporaryDirectory(prefix="secfpp-bench-committee-") as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'coordinator.db'}"
        engine = make_engine(url)
        upgrade(engine)
        values: dict[str, Any] = {
            "database_url": url,
            "admin_token": ADMIN["Authorization"].split()[1],
            "enrollment_rate_limit": 0,
            "max_body_bytes": 64 * 1024 * 1024,
            "tick_interval_s": 3600,
        }
        app = create_app(Settings(**values))
        with TestClient(app) as client:
            r = client.post(
                "/v1/federations", json=_federation(n, c, d, collusion, dropout), headers=ADMIN
            )
            if r.status_code != 201:
                raise SystemExit(f"federation refused: {r.text}")
            fid = r.json()["id"]
            tokens = client.post(
                f"/v1/federations/{fid}/enrollment-tokens", json={"count": n}, headers=ADMIN
            ).json()["tokens"]
            http = cast(httpx.Client, client)
            engines = []
            for k, token in enumerate(tokens):
                coordinator = CoordinatorClient(http, retry=RetryPolicy(max_attempts=2))
                state = StateDir(root / f"p{k}")
                identity = enroll(
                    coordinator,
                    state,
                    coordinator_url="http://testserver",
                    enrollment_token=token,
                    display_name=f"org-{k}",
                    ca_bundle=None,
                    rng=DeterministicRandom(f"key-{k}"),
                )
                index = int(identity["index"])
                trainer = FixedTrainer(index, reduced_dim=REDUCED_DIM, prompt_size=d)
                engines.append(
                    Engine(
                        coordinator,
                        state,
                        trainer,
                        rng=DeterministicRandom(f"shares-{index}"),
                        on_progress=lambda _t: None,
                    )
                )
            number = int(
                client.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).json()["number"]
            )
            seconds: dict[str, float] = {}
            stage = "sharing"
            while stage not in ("published", "failed", "aborted"):
                start = time.perf_counter()
                for e in engines:
                    e.step()
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - start
                status = client.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
                stage = status["stage"]
            if stage != "published":
                raise SystemExit(f"round {stage}: {status['failure_reason']}")
            decode = _decode_seconds(client)
            members = status["committee"] or list(range(n))
        with engine.connect() as conn:
            env_count, env_bytes = conn.execute(
                select(func.count(), func.sum(func.length(ShareEnvelope.ciphertext)))
            ).one()
            results = {
                str(s): (int(k), int(b))
                for s, k, b in conn.execute(
                    select(
                        CodedResult.stage,
                        func.count(),
                        func.sum(func.length(CodedResult.payload)),
                    ).group_by(CodedResult.stage)
                )
            }
        engine.dispose()
    mb = 1e6
    up = env_bytes / n / mb
    inbox = env_bytes / len(members) / mb
    rows = [StageRow("sharing", int(env_count), up, 0.0, 0, 0.0, seconds["sharing"], 0.0)]
    for name in ("distances", "aggregation"):
        k, b = results.get(name, (0, 0))
        rows.append(
            StageRow(name, 0, 0.0, inbox, k, b / mb, seconds.get(name, 0.0), decode.get(name, 0.0))
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="participants (default 200)")
    parser.add_argument("--c", type=int, default=64, help="committee size (default 64)")
    parser.add_argument("--d", type=int, default=10_000, help="update length (default 10000)")
    parser.add_argument("--collusion", type=float, default=0.1, help="f_c (default 0.1)")
    parser.add_argument("--dropout", type=float, default=0.25, help="f_d (default 0.25)")
    parser.add_argument("--skip-all-to-all", action="store_true", help="committee run only")
    args = parser.parse_args(argv)
    runs = [args.c] + ([] if args.skip_all_to_all or args.c == args.n else [args.n])
    print(
        f"N = {args.n}, d = {args.d}, r = {REDUCED_DIM}, f_c = {args.collusion}, "
        f"f_d = {args.dropout}; one clustering round, in process, sequential (seconds summed)"
    )
    print(
        "| setting | stage | envelopes | MB up / participant | MB inbox / member | results "
        "| MB results | s (summed) | decode s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for c in runs:
        label = "all-to-all" if c == args.n else f"committee c = {c}"
        for row in run(args.n, c, args.d, args.collusion, args.dropout):
            print(
                f"| {label} | {row.stage} | | | {row.inbox_mb:.3f} | {row.results} | "
                f"{row.results_mb:.3f} | {row.seconds:.1f} | {row.decode_s:.3f} |"
                if row.stage != "sharing"
                else f"| {label} | sharing | {row.envelopes} | {row.up_mb:.3f} | | | | "
                f"{row.seconds:.1f} | |",
                flush=True,
            )


if __name__ == "__main__":
    main()
