"""Engines against the real coordinator app with ``rerandomize_distances`` switched on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from secfpp.coordinator.rounds.rerandomization import sharing_dropouts
from secfpp.crypto.rerandomize import SEED_SIZE
from secfpp.crypto.transport import ENVELOPE_OVERHEAD
from secfpp.federation import FederationConfig
from secfpp.participant import engine as engine_module
from secfpp.participant import protocol
from tests.participant.test_engine import ADMIN, N, drive, http, make_engines
from tests.support.asgi import TestClient

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
    params = FederationConfig.model_validate(config).crypto_params()
    lengths = []
    rounds: list[tuple[int, ...]] = []
    for _ in range(2):
        number = drive(http, fid, engines)
        status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
        assert status["stage"] == "published", status["failure_reason"]
        c = len(status["clusters"])  # the clusters the round started with
        # N = 8, T = 1, D = 3: T + 1 + D = 5 contributors, a different subset each round
        contributors = status["zero_contributors"]
        assert (params.colluders_among_participants, sharing_dropouts(params, N)) == (1, 3)
        assert len(contributors) == 5
        assert set(contributors) < set(range(N))
        rounds.append(tuple(contributors))
        length = N * 2 * c + c * (c - 1) // 2 + 1
        for engine in engines:
            specs = engine.progress(number)["sharing_specs"]
            if engine.index not in contributors:  # asked for no zero-sharing
                assert [s["kind"] for s in specs] == ["prompt", "update"]
                continue
            assert [s["kind"] for s in specs] == ["prompt", "zero", "zero-seed", "update"]
            zero, seed = specs[1], specs[2]
            assert zero["context_stage"] == "sharing-zero"
            # the round's bound (N rows, c clusters and a probe each, their pairs) + the mask,
            # not the federation's N * 2 * 8 + 28 + 1 = 157
            assert zero["vector_length"] == seed["vector_length"] == length
            lengths.append(zero["vector_length"])
            assert seed["context_stage"] == "sharing-zero-seed"
            assert seed["envelope_length"] == ENVELOPE_OVERHEAD + SEED_SIZE  # 61 bytes, not 1,301
        # N = 8, T_c = 2: the recipients at points 0..3 get seeds, 4..7 vectors
        sender = engines[contributors[0]]
        body = sender.state.read_object(sender._path(number, "shares.json"))
        kinds = {(e["recipient"], e["kind"]) for e in body["envelopes"]} - {
            (j, k) for j in range(N) for k in ("prompt", "update")
        }
        assert kinds == {(j, "zero-seed") for j in range(4)} | {(j, "zero") for j in range(4, N)}
        # every member added exactly the contributors' zero-sharings
        assert set(added[-N:]) == {tuple(contributors)}
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert set(lengths) <= {17, 34}  # one cluster: 16 outputs; two: 32 and their pair
    assert len(added) == 2 * N  # every member, both rounds
    assert rounds[0] != rounds[1]  # the load rotates


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


class _Offset:
    """What a cheating contributor passes where distance-stage noise would go: a fixed
    offset at the data point on every output (and 0 on the check mask: it cannot know
    the challenge). ``l2_clip`` clips nothing."""

    l2_clip = 1e9

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def share(self, length: int, *, rng: Any) -> Any:
        values = np.full(length, self.offset, dtype=np.int64)
        values[-1] = 0
        return values


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_contribution_that_does_not_vanish_is_named_and_shifts_nothing(
    http: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/protocol.md section 4, "Offset check": a contributor seals zero-sharings whose
    polynomials are not zero at the data point (every decoded distance would move by its
    offset, and the results are still a codeword). The round names it, keeps no shifted
    distance and still publishes; the next round leaves it out of its distances (it keeps
    cheating, to no effect) and clusters the others."""
    chosen: list[int] = []  # the first participant asked for a zero-sharing cheats
    real_share_body = engine_module.share_body

    def cheating(task: Any, **kw: Any) -> Any:
        asked_zero = any(spec.kind == "zero" for spec in task.sharing.envelopes)
        if asked_zero and not chosen:
            chosen.append(kw["index"])
        if asked_zero and kw["index"] == chosen[0] and cheating.on:  # type: ignore[attr-defined]
            kw["distance_noise"] = _Offset(10**6)
        return real_share_body(task, **kw)

    cheating.on = True  # type: ignore[attr-defined]
    monkeypatch.setattr(engine_module, "share_body", cheating)
    asked: dict[int, list[int]] = {}
    real_payload = engine_module.distance_payload

    def recording(task: Any, *args: Any, **kw: Any) -> Any:
        participants = list(task.distances.participants)
        assert asked.setdefault(task.round, participants) == participants
        return real_payload(task, *args, **kw)

    monkeypatch.setattr(engine_module, "distance_payload", recording)
    fid, engines = make_engines(http, tmp_path, rerandomize_distances=True)
    number = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    (cheater,) = chosen
    assert cheater in status["zero_contributors"]
    assert status["offset_failures"] == [cheater]
    assert status["next_clusters"] is None  # no clustering step on shifted distances
    assert status["rejected"]["distances"] == []  # the results were a codeword
    (event,) = [e for e in status["events"] if "offset_failures" in e["detail"]]
    assert event["detail"]["offset_failures"] == [cheater]
    assert event["detail"]["decoded_distances"] == 0
    assert status["distance_excluded"] == []
    number = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    assert status["distance_excluded"] == [cheater]
    assert cheater not in status["zero_contributors"]  # no longer asked to contribute
    assert status["offset_failures"] == []  # its contribution is no longer added
    assert status["next_clusters"] is not None
    assert status["present"] == list(range(N))  # it still shares and is aggregated
    assert asked[number] == sorted(set(range(N)) - {cheater})  # every member was asked so
