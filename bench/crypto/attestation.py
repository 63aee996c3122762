"""Benchmark: what agreeing on the request before answering costs (crypto.attestation;
docs/protocol.md section 7, "Equivocation", defence 3).

Prints a Markdown report (not a test), one process, one BLAS thread:

* **bytes** per stage participant and coded stage, exactly as sent: the JSON body of
  ``POST /me/rounds/{n}/attestations`` (``P - 1`` MACs) and of one ``GET
  /me/rounds/{n}/attestations/{stage}`` answer holding ``P - 1`` attestations
  (the real pydantic models, serialized as the coordinator does), at ``N = 100``
  (all-to-all, ``P = 100``) and ``N = 1,000`` with its committee (``P = 379``); and
  what passes through the coordinator per stage (``P`` uploads and ``P`` reads);
* **CPU** of one participant per stage: making its ``P - 1`` MACs and verifying the
  ``P - 1`` it receives (a warm :class:`~crypto.transport.KeyRing`, as in the daemon,
  which exchanged keys with every peer when it shared);
* **latency over HTTP**: an ``N = 8`` federation of engines against the in-process
  coordinator (SQLite), one round: mean wall time of the attestation upload and read
  per call beside a coded-result upload, and the round's wall time, with agreement
  against the same round where the engines skip it (monkeypatched, for the measure
  only).

Usage:  python -m bench.crypto.attestation [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from secfpp.crypto.attestation import Attestation, attest, valid_attesters
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import KeyRing, generate_keypair
from secfpp.wire.messages import AttestationIn, AttestationOut, Attestations
from secfpp.wire.types import b64

DIGEST = "ab" * 32


def _settings() -> list[tuple[str, int, int]]:
    """(label, P, T) for N = 100 all-to-all and N = 1,000 with its committee."""
    out = []
    for label, params in (
        ("N = 100", CryptoParams.for_federation(100, reduced_dim=4)),
        ("N = 1,000, committee", CryptoParams.for_federation(1000, reduced_dim=4, committee=True)),
    ):
        out.append((label, params.code_points, params.colluders))
    return out


def bytes_and_cpu(points: int) -> dict[str, float]:
    """Exact body sizes and one participant's CPU seconds at ``points`` stage participants."""
    keys = [generate_keypair(DeterministicRandom(f"k{i}")) for i in range(points)]
    public = {i: k.public for i, k in enumerate(keys)}
    rings = [KeyRing(k.private) for k in keys[:2]]
    for ring in rings:  # warm: the daemon's ring already holds every peer's secret
        for pk in public.values():
            ring.exchange(pk)
    start = time.process_time()
    macs = attest(
        rings[0],
        public,
        federation_id="f" * 36,
        round_number=7,
        stage="aggregation",
        sender=0,
        digest=DIGEST,
        recipients=range(points),
    )
    made = time.process_time() - start
    sent = {
        "stage": "aggregation",
        "digest": DIGEST,
        "macs": [{"recipient": r, "mac": b64(m)} for r, m in sorted(macs.items())],
    }
    AttestationIn.model_validate(sent)  # what the coordinator accepts
    up = len(json.dumps(sent).encode())  # what participant.client sends (httpx json=)
    # What participant 1 receives: every other participant's MAC to it.
    incoming = {
        i: attest(
            KeyRing(keys[i].private),
            {1: public[1]},
            federation_id="f" * 36,
            round_number=7,
            stage="aggregation",
            sender=i,
            digest=DIGEST,
            recipients=[1],
        )[1]
        for i in range(points)
        if i != 1
    }
    doc = Attestations(
        round=7,
        stage="aggregation",
        recipient=1,
        attestations=[
            AttestationOut(sender=i, digest=DIGEST, mac=b64(m)) for i, m in incoming.items()
        ],
        poll_after_s=1.0,
        seconds_left=30.0,
    )
    down = len(doc.model_dump_json().encode())
    items = [Attestation(i, DIGEST, m) for i, m in incoming.items()]
    start = time.process_time()
    valid = valid_attesters(
        rings[1],
        public,
        items,
        federation_id="f" * 36,
        round_number=7,
        stage="aggregation",
        me=1,
        digest=DIGEST,
        members=range(points),
    )
    checked = time.process_time() - start
    assert len(valid) == points
    return {"up": up, "down": down, "make_s": made, "verify_s": checked}


def http_round(rounds: int, agree: bool) -> dict[str, float]:
    """One N = 8 federation of engines in process; wall times of the calls and rounds."""
    from fastapi.testclient import TestClient

    from secfpp.coordinator.app import create_app
    from secfpp.coordinator.db.engine import make_engine
    from secfpp.coordinator.db.migrate import upgrade
    from secfpp.coordinator.settings import Settings
    from secfpp.participant import engine as engine_module
    from secfpp.participant.client import CoordinatorClient
    from secfpp.participant.engine import Engine, TrainOutput
    from secfpp.participant.enrollment import enroll
    from secfpp.participant.state import StateDir

    n, n_ctx, dim, r = 8, 4, 8, 16

    class Trainer:
        def __init__(self, index: int) -> None:
            self.sign = 1.0 if index < n // 2 else -1.0
            self.index = index

        def train(self, number: int, prompt: Any) -> TrainOutput:
            noise = DeterministicRandom(f"{self.index}|{number}").standard_normal(r) * 0.05
            return TrainOutput(
                0.5 * self.sign + noise,
                np.full(n_ctx * dim, 0.01 * self.sign),
                {"local": np.zeros(2)},
                {},
            )

        def restore(self, state: Any) -> None:
            pass

        def evaluate(self, prompt: Any) -> dict[str, float]:
            return {"accuracy": 0.5}

    timings: dict[str, list[float]] = {"attest": [], "attestations": [], "upload_result": []}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(self, *args, **kwargs)
            finally:
                timings[name].append(time.perf_counter() - start)

        return wrapper

    saved = {name: getattr(CoordinatorClient, name) for name in timings}
    saved_agreed = Engine._agreed
    for name, fn in saved.items():
        setattr(CoordinatorClient, name, timed(name, fn))
    if not agree:
        engine_module.Engine._agreed = lambda self, *a, **k: True  # type: ignore[method-assign]
    tmp = Path(tempfile.mkdtemp(prefix="bench-attest-"))
    try:
        db = tmp / "c.db"
        eng = make_engine(f"sqlite:///{db}")
        upgrade(eng)
        eng.dispose()
        admin = {"Authorization": "Bearer admin-token"}
        settings = Settings(database_url=f"sqlite:///{db}", admin_token="admin-token")
        with TestClient(create_app(settings)) as http:
            body = {
                "name": "bench",
                "strategy": "secfpp",
                "n_participants": n,
                "backbone": None,
                "prompt": {"n_ctx": n_ctx, "dim": dim, "init_std": 0.02, "init_seed": 1},
                "tolerance": {
                    "reduced_dim": r,
                    "dropout_fraction": 0.375,
                    "collusion_fraction": 0.125,
                },
                "rounds": {"warmup_rounds": 0, "lr_global": 1.0},
            }
            fid = http.post("/v1/federations", json=body, headers=admin).json()["id"]
            tokens = http.post(
                f"/v1/federations/{fid}/enrollment-tokens", json={"count": n}, headers=admin
            ).json()["tokens"]
            engines = []
            for i, token in enumerate(tokens):
                state = StateDir(tmp / f"p{i}")
                client = CoordinatorClient(http)
                enroll(
                    client,
                    state,
                    coordinator_url="http://testserver",
                    enrollment_token=token,
                    display_name=f"o{i}",
                    ca_bundle=None,
                    rng=DeterministicRandom(i),
                )
                engines.append(
                    Engine(
                        client,
                        state,
                        Trainer(i),
                        rng=DeterministicRandom(f"e{i}"),
                        sleep=lambda s: None,
                    )
                )
            walls = []
            for number in range(1, rounds + 1):
                start = time.perf_counter()
                http.post(f"/v1/federations/{fid}/rounds", headers=admin)
                for _ in range(16):
                    for e in engines:
                        e.step()
                    if all(e.progress(number).get("outcome_done") for e in engines):
                        break
                stage = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=admin).json()
                assert stage["stage"] == "published", stage
                walls.append(time.perf_counter() - start)
    finally:
        for name, fn in saved.items():
            setattr(CoordinatorClient, name, fn)
        engine_module.Engine._agreed = saved_agreed  # type: ignore[method-assign]
        shutil.rmtree(tmp, ignore_errors=True)
    mean = {k: (float(np.mean(v)) if v else 0.0) for k, v in timings.items()}
    calls = {f"{k}_calls": float(len(v)) for k, v in timings.items()}
    return {**mean, **calls, "round_s": float(np.mean(walls))}


def measure(rounds: int) -> dict[str, Any]:
    """Every figure of the report: bytes and CPU per setting, the HTTP rounds."""
    settings = []
    for label, points, colluders in _settings():
        m = bytes_and_cpu(points)
        q = (points + colluders) // 2 + 1
        settings.append({"label": label, "points": points, "t": colluders, "q": q, **m})
    http = [{"agree": agree, **http_round(rounds, agree)} for agree in (False, True)]
    return {"rounds": rounds, "settings": settings, "http": http}


def section(data: dict[str, Any]) -> list[str]:
    """The two tables, from :func:`measure` (also ``bench.report``'s section)."""
    lines = [
        "Bytes exactly as sent (the JSON bodies of `participant.client` and the coordinator's "
        "answer); through the coordinator = P uploads and one read each; CPU = one "
        "participant's, warm key ring:",
        "",
        "| setting | P | T | Q | up per participant | down per read | through the coordinator "
        "per stage (P up + P reads) | CPU make / verify |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in data["settings"]:
        total = m["points"] * (m["up"] + m["down"])
        lines.append(
            f"| {m['label']} | {m['points']} | {m['t']} | {m['q']} | {m['up'] / 1e3:.1f} kB | "
            f"{m['down'] / 1e3:.1f} kB | {total / 1e6:.2f} MB | "
            f"{m['make_s'] * 1e3:.1f} / {m['verify_s'] * 1e3:.1f} ms |"
        )
    lines += [
        "",
        f"HTTP, N = 8 engines in process (SQLite), {data['rounds']} round(s), mean wall time "
        'per call and per round ("agreement skipped" monkeypatches the engine\'s quorum step, '
        "for this measure only; the daemon always agrees):",
        "",
        "| engines | attest POST | attestations GET | result upload | calls (POST / GET) | round |",
        "|---|---|---|---|---|---|",
    ]
    for h in data["http"]:
        lines.append(
            f"| {'with agreement' if h['agree'] else 'agreement skipped'} | "
            f"{h['attest'] * 1e3:.1f} ms | {h['attestations'] * 1e3:.1f} ms | "
            f"{h['upload_result'] * 1e3:.1f} ms | {h['attest_calls']:.0f} / "
            f"{h['attestations_calls']:.0f} | {h['round_s']:.2f} s |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here (bench.report)")
    args = parser.parse_args(argv)
    data = measure(args.rounds)
    print(
        f"# Agreement on the request: cost ({dt.date.today()}, "
        f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]})\n"
    )
    print("\n".join(section(data)))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
