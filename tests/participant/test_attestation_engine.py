"""Agreement on the request before answering (crypto.attestation), with participant
engines against the real coordinator app over HTTP, on both databases: the relayed
attestations, an equivocating coordinator whose second request gets no answer, and the
attest-once rule across a crash."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import Attestation as AttestationRow
from secfpp.coordinator.settings import Settings
from secfpp.crypto.attestation import attest
from secfpp.crypto.refusal import aggregation_request_digest
from secfpp.participant.client import CoordinatorClient
from secfpp.participant.engine import Engine
from secfpp.participant.protocol import aggregation_sets, committee_of, peer_keys
from secfpp.wire.messages import (
    AttestationOut,
    AttestationReceipt,
    Attestations,
    Task,
    UploadReceipt,
)
from tests.participant.test_engine import ADMIN, GroupTrainer, N, make_engines
from tests.support.asgi import TestClient
from tests.support.common import ADMIN_TOKEN, FakeClock

GROUP_B = (5, 6, 7)
"""Shown request B (the aggregation set without participant 7) by the equivocator."""
COLLUDER = 0
"""T = 1: the colluder attests both requests."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def http(db_url: str, clock: FakeClock) -> Iterator[TestClient]:
    settings = Settings(database_url=db_url, admin_token=ADMIN_TOKEN)
    with TestClient(create_app(settings, clock=clock)) as client:
        yield client


class Recording(CoordinatorClient):
    """A participant's client that records its coded-result uploads and attestations."""

    def __init__(self, http: TestClient) -> None:
        super().__init__(http)
        self.uploads: list[tuple[int, str]] = []
        self.attested: list[tuple[str, str]] = []
        self.fail_attest = False

    def upload_result(
        self, round_number: int, stage: str, payload: bytes, request_digest: str
    ) -> UploadReceipt:
        self.uploads.append((round_number, stage))
        return super().upload_result(round_number, stage, payload, request_digest)

    def attest(
        self, round_number: int, stage: str, digest: str, macs: dict[int, bytes]
    ) -> AttestationReceipt:
        if self.fail_attest:
            raise KeyboardInterrupt("crash before the attestation reached the coordinator")
        self.attested.append((stage, digest))
        return super().attest(round_number, stage, digest, macs)


class Equivocating(Recording):
    """What an equivocating coordinator shows a participant of group B: the aggregation
    request without participant 7, and the colluder's attestation of it (the colluder
    holds its pair keys with everybody, so its MACs on B are valid)."""

    def __init__(self, http: TestClient, colluder: Engine) -> None:
        super().__init__(http)
        self.colluder = colluder
        self.me: int | None = None

    def task(self) -> Task:
        task = super().task()
        if task.aggregation is not None:
            for s in task.aggregation.sets:
                s.members = [m for m in s.members if m != 7]
        return task

    def attestations(self, round_number: int, stage: str) -> Attestations:
        doc = super().attestations(round_number, stage)
        if stage != "aggregation":
            return doc
        task = self.task()
        sets = aggregation_sets(task)
        digest = aggregation_request_digest(
            self.colluder.federation_id, round_number, sets, committee=committee_of(task)
        )
        assert self.me is not None
        macs = attest(
            self.colluder.key_ring,
            peer_keys(task),
            federation_id=self.colluder.federation_id,
            round_number=round_number,
            stage=stage,
            sender=COLLUDER,
            digest=digest,
            recipients=[self.me],
        )
        forged = AttestationOut(
            sender=COLLUDER, digest=digest, mac=base64.b64encode(macs[self.me]).decode()
        )
        doc.attestations = [a for a in doc.attestations if a.sender != COLLUDER] + [forged]
        return doc


def _engines(http: TestClient, tmp_path: Path) -> tuple[str, list[Engine]]:
    fid, engines = make_engines(http, tmp_path, client_of=Recording)
    assert [e.index for e in engines] == list(range(N))
    return fid, engines


def _rows(db_url: str) -> list[tuple[str, int, int, str]]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(
                    AttestationRow.stage,
                    AttestationRow.sender,
                    AttestationRow.recipient,
                    AttestationRow.digest,
                )
            )
            return [(str(s), int(a), int(b), str(d)) for s, a, b, d in rows]
    finally:
        engine.dispose()


def _status(http: TestClient, fid: str, number: int) -> dict[str, Any]:
    r = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_honest_rounds_answer_after_a_quorum_of_relayed_attestations(
    http: TestClient, db_url: str, tmp_path: Path
) -> None:
    fid, engines = _engines(http, tmp_path)
    assert engines[0].params.attestation_quorum == 5  # N = 8, T = 1
    assert http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).status_code == 201
    for _ in range(12):
        for engine in engines:
            engine.step()
        if _status(http, fid, 1)["stage"] == "published":
            break
    assert _status(http, fid, 1)["stage"] == "published"
    rows = _rows(db_url)
    for stage in ("distances", "aggregation"):
        # Every participant attested once, to the 7 others, one digest for everybody.
        mine = [r for r in rows if r[0] == stage]
        assert len(mine) == N * (N - 1)
        assert len({r[3] for r in mine}) == 1
        for engine in engines:
            progress = engine.progress(1)
            assert len(progress[f"{stage}_quorum"]) >= 5
            assert progress[f"{stage}_attested"] == progress[f"{stage}_digest"]
            assert engine.client.attested.count((stage, progress[f"{stage}_digest"])) == 1  # type: ignore[attr-defined]


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_an_equivocating_coordinators_second_request_gets_no_answer(
    http: TestClient, db_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """The coordinator shows participants 5-7 the aggregation request without participant
    7 (B) and everybody else the true one (A); the colluder 0 attests B to them too. Group
    A holds 5 = Q attestations of A and answers; group B holds 3 + 1 = 4 < Q of B, uploads
    nothing, and past the deadline refuses with ``no_quorum``. The round publishes from
    group A's results."""
    fid, engines = _engines(http, tmp_path)
    for j in GROUP_B:  # swap in the equivocator's view for group B
        liar = Equivocating(http, engines[COLLUDER])
        liar.token = engines[j].client.token
        liar.me = j
        engines[j].client = liar
    assert http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).status_code == 201
    for _ in range(8):
        for engine in engines:
            engine.step()
    assert _status(http, fid, 1)["stage"] == "aggregation"
    for j in GROUP_B:
        client = engines[j].client
        assert isinstance(client, Equivocating)
        assert (1, "aggregation") not in client.uploads
        assert [s for s, _ in client.attested].count("aggregation") == 1
        assert engines[j]._waiting is not None  # polling for attestations
    for j in set(range(N)) - set(GROUP_B):
        assert (1, "aggregation") in engines[j].client.uploads  # type: ignore[attr-defined]
    # The deadline comes before group B's next poll (by the coordinator's clock): each
    # refuses, recorded before it is sent.
    deadline = engines[5].client.task().deadline
    assert deadline is not None
    clock.now = deadline - timedelta(seconds=0.5)
    for j in GROUP_B:
        engines[j].step()
        refusal = engines[j].progress(1)["aggregation_refusal"]
        assert (refusal["reason"], refusal["sent"]) == ("no_quorum", True)
        assert (1, "aggregation") not in engines[j].client.uploads  # type: ignore[attr-defined]
    for _ in range(4):
        for engine in engines:
            engine.step()
    status = _status(http, fid, 1)
    assert status["stage"] == "published", status
    # The coordinator relayed B's attestations (stored), but no result answers B.
    digests = {r[3] for r in _rows(db_url) if r[0] == "aggregation"}
    assert len(digests) == 2


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_attest_once_survives_a_crash(http: TestClient, db_url: str, tmp_path: Path) -> None:
    """A daemon that committed its answer's digest and crashed before its attestation
    reached the coordinator sends the same attestation after a restart; shown another
    request after that, it refuses (``conflicting_request``) and attests nothing more."""
    fid, engines = _engines(http, tmp_path)
    assert http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).status_code == 201
    victim = engines[6]
    for _ in range(12):
        for engine in engines:
            if engine is victim and _status(http, fid, 1)["stage"] == "aggregation":
                continue
            engine.step()
        if _status(http, fid, 1)["stage"] == "aggregation":
            break
    assert _status(http, fid, 1)["stage"] == "aggregation"
    client = victim.client
    assert isinstance(client, Recording)
    client.fail_attest = True
    with pytest.raises(KeyboardInterrupt):
        victim.step()
    digest = victim.progress(1)["aggregation_digest"]
    assert "aggregation_attested" not in victim.progress(1)
    assert not [r for r in _rows(db_url) if r[0] == "aggregation" and r[1] == 6]
    # Restart: a new engine on the same state directory, shown the same request.
    again = Engine(Recording(http), victim.state, GroupTrainer(6), sleep=lambda s: None)
    again.step()
    assert again.client.attested == [("aggregation", digest)]  # type: ignore[attr-defined]
    stored = {r[3] for r in _rows(db_url) if r[0] == "aggregation" and r[1] == 6}
    assert stored == {digest}
    # Restart again, now shown a different request: refused, nothing attested.
    liar = Equivocating(http, engines[COLLUDER])
    liar.me = 6
    third = Engine(liar, victim.state, GroupTrainer(6), sleep=lambda s: None)
    third.step()
    assert liar.attested == []
    assert third.progress(1)["aggregation_refusal"]["reason"] == "conflicting_request"
    stored = {r[3] for r in _rows(db_url) if r[0] == "aggregation" and r[1] == 6}
    assert stored == {digest}
