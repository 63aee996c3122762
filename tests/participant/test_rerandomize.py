"""The participant's half of the re-randomized distance stage, with real sealing.

Every participant builds its sharing upload (:func:`share_body`: prompt shares and, as the
task asks, zero-sharing envelopes: seeds to the code's first points and vectors to the others,
or vectors to everybody when a coordinator of an earlier release asks for ``zero`` only); each
recipient opens its inbox as the daemon does (:func:`open_inbox`,
:func:`open_zero_contributions`) and answers with :func:`distance_payload` ``(zeros=...)``; the
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
from secfpp.participant.protocol import (
    OpenedShares,
    distance_payload,
    open_inbox,
    open_zero_contributions,
    share_body,
)
from secfpp.participant.rerandomize import (
    ZERO_CONTEXT_STAGE,
    ZERO_KIND,
    ZERO_SEED_CONTEXT_STAGE,
    ZERO_SEED_KIND,
    rerandomizes,
    zero_sharing_length,
    zero_split,
)
from tests.support.wire import inbox_of, task_of

N, R, FED, ROUND = 8, 6, "fed-rerandomize", 3
PARAMS = CryptoParams.for_federation(N, reduced_dim=R, min_reference_size=2)
RNG = DeterministicRandom(b"participant-rerandomize")
KEYS = [generate_keypair(RNG) for _ in range(N)]
VECTORS = np.random.default_rng(11).normal(0, 0.5, (N, R))


def _task(refs: ReferenceSets, *, seeded: bool = True, length: int | None = None) -> dict[str, Any]:
    """A distance-stage task; ``seeded=False``: as a coordinator of an earlier release asks
    (one ``zero`` vector to every recipient); ``length``: the contributions' entries (default:
    the federation's bound and the mask)."""
    prime = PARAMS.clustering_field.prime
    length = length or zero_sharing_length(PARAMS)
    seeds = [
        {
            "kind": ZERO_SEED_KIND,
            "context_stage": ZERO_SEED_CONTEXT_STAGE,
            "prime": prime,
            "vector_length": length,
        }
    ]
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
                    "vector_length": length,
                },
                *(seeds if seeded else []),
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


def _open(box: dict[str, Any], j: int, kind: str, length: int | None = None) -> OpenedShares:
    common: dict[str, Any] = {
        "prime": PARAMS.clustering_field.prime,
        "federation_id": FED,
        "index": j,
        "private_key": KeyRing(KEYS[j].private),
        "peers": {i: k.public for i, k in enumerate(KEYS)},
    }
    if kind == ZERO_KIND:  # vectors and seeds, as the daemon opens them
        return open_zero_contributions(
            inbox_of(box, j), length=length or zero_sharing_length(PARAMS), **common
        )
    return open_inbox(
        inbox_of(box, j), kind=kind, context_stage="sharing-prompt", share_length=R, **common
    )


def _share_as_participant_0(task: dict[str, Any]) -> dict[str, Any]:
    return share_body(
        task_of(task),
        params=PARAMS,
        federation_id=FED,
        index=0,
        private_key=KEYS[0].private,
        reduced=VECTORS[0],
        update=None,
        rng=RNG,
    )


def _values(payload: bytes) -> np.ndarray:
    return unpack_field_vector(payload, prime=PARAMS.clustering_field.prime)


@pytest.mark.parametrize("seeded", [True, False])
def test_sealed_zero_sharings_rerandomize_and_decode_exactly(seeded: bool) -> None:
    present = (0, 1, 2, 4, 5, 6, 7)  # participant 3 did not share: it neither counts nor adds
    refs = ReferenceSets(present, ((0, (0, 1, 2, 4, 5, 6, 7)),), ((0, (0, 1, 2)),))
    task = _task(refs, seeded=seeded)
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
        e
        for e in box["envelopes"]
        if not (e["sender"] == 5 and e["kind"] in (ZERO_KIND, ZERO_SEED_KIND))
    ]
    with pytest.raises(RefusalError, match=r"missing_share.*\[5\]"):
        distance_payload(
            task_of(task), _open(box, 0, "prompt"), PARAMS, zeros=_open(box, 0, ZERO_KIND)
        )


def test_zero_envelopes_do_not_open_as_prompt_shares() -> None:
    """Sealed under their own stage: a zero-sharing replayed as a prompt share fails."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    for j in (0, N - 1):  # a seed (point 0) and a vector (point N - 1)
        replayed = {
            "round": ROUND,
            "envelopes": [
                {**e, "kind": "prompt"}
                for e in _inboxes(task, [2])[j]["envelopes"]
                if e["kind"] in (ZERO_KIND, ZERO_SEED_KIND)
            ],
        }
        assert len(replayed["envelopes"]) == 1
        assert _open(replayed, j, "prompt").failed == (2,)


def test_seeds_go_to_the_free_points_and_vectors_to_the_others() -> None:
    """N = 8, T_c = 3: a contribution's polynomial has degree 6 and 6 free values, sent as
    seeds to points 0..5; points 6 and 7 get vectors (61-byte envelopes against 1,349)."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    boxes = _inboxes(_task(refs), [1])
    kinds = {j: {e["kind"] for e in boxes[j]["envelopes"]} - {"prompt"} for j in range(N)}
    assert PARAMS.clustering_code.t == 3
    assert kinds == {j: {ZERO_SEED_KIND if j < 6 else ZERO_KIND} for j in range(N)}
    assert zero_split(PARAMS, {j: j for j in range(N)}) == ([0, 1, 2, 3, 4, 5], [6, 7])
    sizes = {
        e["kind"]: len(base64.b64decode(e["ciphertext"]))
        for box in boxes.values()
        for e in box["envelopes"]
    }
    assert sizes[ZERO_SEED_KIND] == 61
    assert sizes[ZERO_KIND] == 24 + 8 * zero_sharing_length(PARAMS) + 29


def _tampered(j: int, change: Any) -> OpenedShares:
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    box = _inboxes(_task(refs), [1, 2])[j]
    box["envelopes"] = [change(e) for e in box["envelopes"]]
    box["envelopes"] = [e for e in box["envelopes"] if e is not None]
    return _open(box, j, ZERO_KIND)


def test_a_seed_that_does_not_open_or_is_not_32_bytes_fails_its_sender() -> None:
    def seal_other(e: dict[str, Any]) -> dict[str, Any]:
        if e["sender"] != 2 or e["kind"] != ZERO_SEED_KIND:
            return e
        from secfpp.crypto.transport import ShareContext, seal_share

        context = ShareContext(FED, ROUND, ZERO_SEED_CONTEXT_STAGE, 2, 0)
        sealed = seal_share(KEYS[2].private, KEYS[0].public, bytes(31), context=context, rng=RNG)
        return {**e, "ciphertext": base64.b64encode(sealed).decode()}

    def flip(e: dict[str, Any]) -> dict[str, Any]:
        if e["sender"] != 2 or e["kind"] != ZERO_SEED_KIND:
            return e
        raw = bytearray(base64.b64decode(e["ciphertext"]))
        raw[-1] ^= 1
        return {**e, "ciphertext": base64.b64encode(bytes(raw)).decode()}

    for change in (seal_other, flip):
        opened = _tampered(0, change)
        assert opened.failed == (2,)
        assert set(opened.shares) == {1}


def test_a_sender_of_both_a_seed_and_a_vector_fails() -> None:
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    boxes = _inboxes(_task(refs, seeded=False), [2])  # a vector for recipient 0
    seeded = _inboxes(_task(refs), [2])[0]["envelopes"]  # and a seed for it
    box = boxes[0]
    box["envelopes"] += [e for e in seeded if e["kind"] == ZERO_SEED_KIND]
    opened = _open(box, 0, ZERO_KIND)
    assert opened.failed == (2,)
    assert opened.shares == {}


def test_an_opened_seed_is_the_contributions_value_at_the_point() -> None:
    """Recipients' values, seeds expanded, lie on one polynomial of degree 2 T_c that
    vanishes at the data point."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    boxes = _inboxes(_task(refs), [3])
    rows = np.vstack([_open(boxes[j], j, ZERO_KIND).shares[3] for j in range(N)])
    code = PARAMS.clustering_lcc()
    from secfpp.crypto.linalg import lagrange_matrix, matmul

    degree = 2 * code.t
    nodes = [code.alpha(j) for j in range(degree + 1)]
    basis = rows[: degree + 1]
    rest = [code.alpha(j) for j in range(degree + 1, N)]
    on_it = matmul(code.field, lagrange_matrix(nodes, rest, code.field.prime), basis)
    assert np.array_equal(on_it, rows[degree + 1 :])
    at_data = matmul(code.field, lagrange_matrix(nodes, [code.betas[0]], code.field.prime), basis)
    assert not at_data.any()


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


@pytest.mark.parametrize("length", [0, -3])
def test_a_zero_sharing_of_no_valid_length_is_refused_before_sharing(length: Any) -> None:
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    for spec in task["sharing"]["envelopes"][1:]:
        spec["vector_length"] = length
    with pytest.raises(ValueError, match="zero-sharing has at most"):
        _share_as_participant_0(task)


def test_a_zero_sharing_longer_than_the_federations_bound_is_refused_before_sharing() -> None:
    """Any length up to the federation's bound is a round's bound; one more entry is not."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs, length=zero_sharing_length(PARAMS) + 1)
    with pytest.raises(ValueError, match=rf"at most {zero_sharing_length(PARAMS)} entries"):
        _share_as_participant_0(task)


def test_round_sized_contributions_rerandomize_and_decode_exactly() -> None:
    """The coordinator sizes contributions by the round's bound: contributions of exactly the
    request's outputs re-randomize every output and decode to the plaintext path's values."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),), ((0, (0, 1, 2)),))
    task = _task(refs, length=refs.result_length)
    assert refs.result_length < zero_sharing_length(PARAMS) // 4
    boxes = _inboxes(task, list(range(N)))
    code = PARAMS.clustering_lcc()
    mixed, plain = {}, {}
    for j in range(code.recovery_threshold(2)):
        prompts = _open(boxes[j], j, "prompt")
        zeros = _open(boxes[j], j, ZERO_KIND, length=refs.result_length)
        assert not zeros.failed
        assert {v.shape for v in zeros.shares.values()} == {(refs.result_length,)}
        mixed[j] = _values(distance_payload(task_of(task), prompts, PARAMS, zeros=zeros)[0])
        plain[j] = _values(distance_payload(task_of(task), prompts, PARAMS)[0])
        assert not np.array_equal(mixed[j], plain[j])
    spec = PARAMS.clustering_field
    _got, decoded = decode_distances(code, mixed, refs, spec)
    _want, reference = decode_distances(code, plain, refs, spec)
    assert np.array_equal(decoded.values, reference.values)


@pytest.mark.parametrize("checked", [False, True])
def test_a_request_with_more_outputs_than_the_contributions_cover_is_refused(
    checked: bool,
) -> None:
    """A coordinator that sized contributions for fewer outputs than it then asks for (or left
    no room for the offset check's mask) gets no answer: an output beyond the contributions
    would go out without re-randomization."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),), ((0, (0, 1, 2)),))
    short = refs.result_length if checked else refs.result_length - 1
    task = _task(refs, length=short)
    if checked:
        task["distances"]["challenge"] = "ab" * 32
    box = _inboxes(task, list(range(N)))[0]
    zeros = _open(box, 0, ZERO_KIND, length=short)
    assert not zeros.failed
    with pytest.raises(ValueError, match=f"has {refs.result_length} outputs.* of {short} entries"):
        distance_payload(task_of(task), _open(box, 0, "prompt"), PARAMS, zeros=zeros)


def test_a_task_that_asks_for_seeds_without_vectors_is_refused_before_sharing() -> None:
    """Seeds stand for the free values only: a contribution without its derived values is
    not a zero-sharing, so a task listing ``zero-seed`` alone is refused."""
    refs = ReferenceSets(tuple(range(N)), ((0, tuple(range(N))),))
    task = _task(refs)
    task["sharing"]["envelopes"] = [
        e for e in task["sharing"]["envelopes"] if e["kind"] != ZERO_KIND
    ]
    with pytest.raises(ValueError, match="'zero-seed' envelopes without 'zero'"):
        _share_as_participant_0(task)
