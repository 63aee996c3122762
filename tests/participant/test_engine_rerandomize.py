"""Engines against the real coordinator app with ``rerandomize_distances`` switched on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from secfpp.crypto.rerandomize import SEED_SIZE
from secfpp.crypto.transport import ENVELOPE_OVERHEAD
from secfpp.participant import engine as engine_module
from secfpp.participant import protocol
from tests.participant.test_engine import ADMIN, N, drive, http, make_engines

__all__ = ["http"]


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_rerandomized_rounds_publish_and_find_the_groups(
    http: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added: list[tuple[int, ...]] = []

    def recording(task: Any, opened: Any, params: Any, zeros: Any = None, **kw: Any) -> Any:
        assert zeros is not None, "a member answered without adding the zero-sharings"
        added.append(tuple(sorted(zeros.shares)))
        return protocol.distance_payload(task, opened, params, zeros=zeros, **kw)

    monkeypatch.setattr(engine_module, "distance_payload", recording)
    fid, engines = make_engines(http, tmp_path, rerandomize_distances=True)
    config = http.get(f"/v1/federations/{fid}", headers=ADMIN).json()["config"]
    assert config["crypto"]["rerandomize_distances"] is True
    for _ in range(2):
        number = drive(http, fid, engines)
        status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
        assert status["stage"] == "published", status["failure_reason"]
        for engine in engines:
            specs = engine.progress(number)["sharing_specs"]
            assert [s["kind"] for s in specs] == ["prompt", "zero", "zero-seed", "update"]
            zero, seed = specs[1], specs[2]
            assert zero["context_stage"] == "sharing-zero"
            assert zero["vector_length"] == seed["vector_length"] == N * 2 * 8 + 28
            assert seed["context_stage"] == "sharing-zero-seed"
            assert seed["envelope_length"] == ENVELOPE_OVERHEAD + SEED_SIZE  # 61 bytes, not 1,301
        # N = 8, T_c = 2: the recipients at points 0..3 get seeds, 4..7 vectors
        body = engines[0].state.read_object(engines[0]._path(number, "shares.json"))
        kinds = {(e["recipient"], e["kind"]) for e in body["envelopes"]} - {
            (j, k) for j in range(N) for k in ("prompt", "update")
        }
        assert kinds == {(j, "zero-seed") for j in range(4)} | {(j, "zero") for j in range(4, N)}
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(added) == 2 * N  # every member, both rounds, with every sender's contribution
    assert set(added) == {tuple(range(N))}


def test_default_federation_rerandomizes(http: TestClient, tmp_path: Path) -> None:
    fid, _ = make_engines(http, tmp_path)  # all-to-all, N = 8: the automatic default is on
    config = http.get(f"/v1/federations/{fid}", headers=ADMIN).json()["config"]
    assert config["crypto"]["rerandomize_distances"] is True


def test_without_the_switch_no_zero_envelopes_are_asked(http: TestClient, tmp_path: Path) -> None:
    fid, engines = make_engines(http, tmp_path, rerandomize_distances=False)
    config = http.get(f"/v1/federations/{fid}", headers=ADMIN).json()["config"]
    assert config["crypto"]["rerandomize_distances"] is False
    number = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    assert [s["kind"] for s in engines[0].progress(number)["sharing_specs"]] == [
        "prompt",
        "update",
    ]
