"""The participant's half of the re-randomized distance stage, with real sealing.

Every participant builds its sharing upload (:func:`share_body`: prompt shares and, as the
task asks, zero-sharing envelopes); each recipient opens its inbox as the daemon does
(:func:`open_inbox`) and answers with :func:`distance_payload` ``(zeros=...)``; the
coordinator's decode of the packed results equals today's path and the plaintext.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from secfpp.crypto.errors import RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets, decode_distances, plaintext_distances
from secfpp.crypto.transport import KeyRing, generate_keypair, public_key_bytes
from secfpp.crypto.wire import unpack_field_vector
from secfpp.federation import FederationCreate
from secfpp.participant.federation import FederationConfigError, federation_config
from secfpp.participant.protocol import OpenedShares, distance_payload, open_inbox, share_body
from secfpp.participant.rerandomize import (
    ZERO_CONTEXT_STAGE,
    ZERO_KIND,
    rerandomizes,
    zero_sharing_length,
)
from tests.support.wire import inbox_of, task_of

N, R, FED, ROUND = 8, 6, "fed-rerandomize", 3
PARAMS = CryptoParams.for_federation(N, reduced_dim=R, min_reference_size=2)
RNG = DeterministicRandom(b"participant-rerandomize")
KEYS = [generate_keypair(RNG) for _ in range(N)]
VECTORS = np.random.default_rng(11).normal(0, 0.5, (N, R))


def _task(refs: ReferenceSets) -> dict[str, Any]:
    prime = PARAMS.clustering_field.prime
    return {
        "federation_id": FED,
        "round": ROUND,
        "peers": [
            {"index": i, "public_key": base64.b64encode(public_key_bytes(k.public)).decode()}
            for i, k in enumerate(KEYS)
        ],
        "sharing": {
            "recipients": list(range(N)),
            "envelopes": [
                {
                    "kind": "prompt",
                    "context_stage": "sharing-prompt",
                    "prime": prime,
                    "vector_length": R,
                },
                {
                    "kind": ZERO_KIND,
                    "context_stage": ZERO_CONTEXT_STAGE,
                    "prime": prime,
                    "vector_length": zero_sharing_length(PARAMS),
                },
            ],
        },
        "distances": {
            "participants": list(refs.participants),
            "clusters": [{"cluster": c, "members": list(m)} for c, m in refs.clusters],
            "probes": [{"cluster": c, "members": list(m)} for c, m in refs.probes],
            "result_length": refs.result_length,
            "prime": prime,
        },
    }


def _inboxes(task: dict[str, Any], senders: list[int]) -> dict[int, dict[str, Any]]:
    """Every sender's prompt and zero envelopes, grouped by recipient (the coordinator's
    inbox documents)."""
    boxes: dict[int, dict[str, Any]] = {j: {"round": ROUND, "envelopes": []} for j in range(N)}
    for i in senders:
        ring = KeyRing(KEYS[i].private)
        common = {"params": PARAMS, "federation_id": FED, "index": i, "private_key": ring}
        body = share_body(task_of(task), **common, reduced=VECTORS[i], update=None, rng=RNG)
        for env in body["envelopes"]:
            boxes[env["recipient"]]["envelopes"].append({"sender": i, **env})
    return boxes


def _open(box: dict[str, Any], j: int, kind: str) -> OpenedShares:
    zero = kind == ZERO_KIND
    return open_inbox(
        inbox_of(box, j),
        kind=kind,
        context_stage=ZERO_CONTEXT_STAGE if zero else "sharing-prompt",
        prime=PARAMS.clustering_field.prime,
        share_length=zero_sharing_length(PARAMS) if zero else R,
        federation_id=FED,
        index=j,
        private_key=KeyRing(KEYS[j].private),
        peers={i: k.public for i, k in enumerate(KEYS)},
    )


def _values(payload: bytes) -> np.ndarray:
    return unpack_field_vector(payload, prime=PARAMS.clustering_field.prime)


def test_sealed_zero_sharings_rerandomize_and_decode_exactly() -> None:
    present = (0, 1, 2, 4, 5, 6, 7)  # participant 3 did not share: it neither counts nor adds
    refs = ReferenceSets(present, ((0, (0, 1, 2, 4, 5, 6, 7)),), ((0, (0, 1, 2)),))
    task = _task(refs)
    boxes = _inboxes(task, list(present))
    code = PARAMS.clustering_lcc()
    answering = [j for j in range(N) if j != 6][: code.recovery_threshold(2) + 1]
    mixed, plain = {}, {}
    for j in answering:
        prompts, zeros = _open(boxes[j], j, "prompt"), _open(boxes[j], j, ZERO_KIND)
        assert not prompts.failed
        assert not zeros.failed
        payload, digest = distance_payload(task_of(task), prompts, PARAMS, zeros=zeros)
        mixed[j] = _values(payload)
        plain_payload, plain_digest = distance_payload(task_of(task), prompts, PARAMS)
        plain[j] = _values(plain_payload)
        assert digest == plain_digest  # the same request
        assert not np.array_equal(mixed[j], plain[j])
    spec = PARAMS.clustering_field
    got, decoded = decode_distances(code, mixed, refs, spec)
    _want, reference = decode_distances(code, plain, refs, spec)
    assert np.array_equal(decoded.values, reference.values)
    assert decoded.rejected == ()
    q = {i: quantize(VECTORS[i], code.field, bits=spec.bits, clip=spec.clip) for i in present}
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in present}
    exact = plaintext_distances(real, refs)
    np.testing.assert_allclose(got.point, exact.point, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.centre, exact.centre, rtol=1e-9, atol=1e-12)


def test_a_missing_zero_sharing_is_refused_like_a_missing_share() -> None:
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    boxes = _inboxes(task, list(range(N)))
    box = boxes[0]
    box["envelopes"] = [
        e for e in box["envelopes"] if not (e["sender"] == 5 and e["kind"] == ZERO_KIND)
    ]
    with pytest.raises(RefusalError, match=r"missing_share.*\[5\]"):
        distance_payload(
            task_of(task), _open(box, 0, "prompt"), PARAMS, zeros=_open(box, 0, ZERO_KIND)
        )


def test_zero_envelopes_do_not_open_as_prompt_shares() -> None:
    """Sealed under their own stage: a zero-sharing replayed as a prompt share fails."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    box = _inboxes(task, [2])[0]
    replayed = {
        "round": ROUND,
        "envelopes": [{**e, "kind": "prompt"} for e in box["envelopes"] if e["kind"] == ZERO_KIND],
    }
    assert _open(replayed, 0, "prompt").failed == (2,)


def test_the_choice_comes_from_the_federation_config() -> None:
    body = {"name": "f", "n_participants": 8, "backbone": None, "prompt": {"n_ctx": 2, "dim": 8}}
    on = FederationCreate.model_validate(body).resolve()  # automatic: on at N = 8
    assert rerandomizes(on)
    off = FederationCreate.model_validate(
        {**body, "tolerance": {"rerandomize_distances": False}}
    ).resolve()
    assert not rerandomizes(off)
    noisy = FederationCreate.model_validate(
        {**body, "dp": {"distance_noise_multiplier": 1.0}}
    ).resolve()
    assert rerandomizes(noisy)  # the noise travels on the re-randomizing polynomial
    # the daemon parses the document strictly: a 1 is not a boolean
    doc = off.model_dump(mode="json")
    doc["crypto"]["rerandomize_distances"] = 1
    with pytest.raises(FederationConfigError, match=r"crypto\.rerandomize_distances"):
        federation_config(doc)


def test_a_zero_sharing_of_another_length_is_refused_before_sharing() -> None:
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    task["sharing"]["envelopes"][1]["vector_length"] = 5
    with pytest.raises(ValueError, match="zero-sharing has"):
        share_body(
            task_of(task),
            params=PARAMS,
            federation_id=FED,
            index=0,
            private_key=KEYS[0].private,
            reduced=VECTORS[0],
            update=None,
            rng=RNG,
        )
