"""The participant's side of the protocol, without any I/O.

Pure functions from a task (the wire schema's :class:`~secfpp.wire.messages.Task`, as the
client parsed the coordinator's ``/me/task``) and the participant's own material to what it
uploads: sealed shares, coded distances, coded sums. The daemon (:mod:`participant.engine`)
adds HTTP, persistence and retries; the refusal rules of DESIGN.md section 6 are applied
here, before any coded result exists.
"""

from __future__ import annotations

import base64
import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
from numpy.typing import NDArray

from secfpp.crypto.aggregation import member_sums, prepare_update
from secfpp.crypto.beacon_mix import Contribution, check_contributions
from secfpp.crypto.committee import (
    CommitteeMismatchError,
    beacon_commitment,
    check_announced_committee,
    committee_binding,
)
from secfpp.crypto.contributor_sample import Sample, round_sample
from secfpp.crypto.dp.distance import DistanceNoise, clip_reduced, noisy_contributor_floor
from secfpp.crypto.dp.distributed import DistributedNoise
from secfpp.crypto.errors import ShareAuthenticationError
from secfpp.crypto.field import FieldArray
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.quantize import quantize
from secfpp.crypto.refusal import (
    aggregation_request_digest,
    check_aggregation_request,
    check_distance_request,
    check_zero_contributors,
    distance_request_digest,
)
from secfpp.crypto.rerandomize import (
    SeededContribution,
    ZeroSharing,
    checked_distances,
    expand_seed,
    rerandomized_distances,
)
from secfpp.crypto.rng import RandomSource
from secfpp.crypto.secpc import ReferenceSets, coded_distances
from secfpp.crypto.transport import (
    ShareContext,
    SharedSecretSource,
    load_public_key,
    open_share,
    open_share_into,
    seal_share,
)
from secfpp.crypto.wire import (
    pack_field_matrix,
    pack_field_vector,
    pack_field_vectors,
    unpack_field_vectors,
    vector_size,
)
from secfpp.participant.contributions import Evidence
from secfpp.participant.rerandomize import (
    ZERO_CONTEXT_STAGE,
    ZERO_KIND,
    ZERO_SEED_CONTEXT_STAGE,
    ZERO_SEED_KIND,
    check_zero_sharing_length,
    zero_split,
)
from secfpp.wire.messages import PromptOut, Task

if TYPE_CHECKING:
    from secfpp.participant.client import ReceivedInbox

_Part = TypeVar("_Part")

__all__ = [
    "OpenedShares",
    "aggregation_payload",
    "aggregation_sets",
    "committee_of",
    "contributor_sample",
    "distance_payload",
    "open_inbox",
    "peer_keys",
    "round_committee",
    "share_body",
    "stage_request",
    "task_round",
]


def round_committee(
    task: Task,
    *,
    params: CryptoParams,
    federation_id: str,
    index: int,
    commitment: bytes | None = None,
    evidence: Evidence | None = None,
) -> tuple[int, ...] | None:
    """The round's committee after checking the task's announcement; None when all-to-all.

    ``commitment`` is the commitment to this round's beacon that the daemon recorded
    before the round started (``next_beacon`` of an earlier task), if it saw one: the
    announced ``coordinator_beacon`` must open it. The announced ``beacon`` must be that
    value combined with the revealed contributions
    (:func:`crypto.beacon_mix.check_contributions`, with this daemon's ``evidence``).

    Refuses (:class:`~crypto.committee.CommitteeMismatchError`, reason
    ``committee_mismatch``) a committee round in an all-to-all federation and the
    reverse, and any announcement :func:`crypto.committee.check_announced_committee`
    refuses (not the public draw, another size, a roster without this participant or
    with strangers, sharing recipients other than the committee).
    """
    announced = task.committee
    number = task_round(task)
    if not params.has_committee:
        if announced is not None:
            raise CommitteeMismatchError(
                f"round {number}: the task announces a committee, but the federation shares "
                "all-to-all"
            )
        return None
    assert params.committee_size is not None
    if announced is None:
        raise CommitteeMismatchError(
            f"round {number}: the federation shares to committees of "
            f"{params.committee_size}, but the task announces none"
        )
    try:
        if announced.coordinator_beacon is None:
            raise ValueError("no coordinator_beacon")
        beacon = bytes.fromhex(announced.beacon)
        own = bytes.fromhex(announced.coordinator_beacon)
        parts = [
            Contribution(
                c.index,
                bytes.fromhex(c.commitment),
                None if c.value is None else bytes.fromhex(c.value),
                c.reason,
            )
            for c in announced.contributions
        ]
    except ValueError as err:
        raise CommitteeMismatchError(
            f"round {number}: the committee announcement is malformed ({err})"
        ) from None
    sharing = task.sharing
    committee = check_announced_committee(
        federation_id=federation_id,
        round_number=number,
        me=index,
        committee_size=params.committee_size,
        announced_size=announced.size,
        roster=list(announced.roster),
        beacon=beacon,
        members=list(announced.members),
        recipients=None if sharing is None else list(sharing.recipients),
        enrolled={p.index for p in task.peers},
    )
    if commitment is not None and not hmac.compare_digest(
        beacon_commitment(federation_id, number, own), commitment
    ):
        raise CommitteeMismatchError(
            f"round {number}: the beacon does not open the commitment published before the round"
        )
    evidence = evidence or Evidence(digest=None, mine=None, revealed=False)
    check_contributions(
        federation_id=federation_id,
        round_number=number,
        coordinator_beacon=own,
        beacon=beacon,
        contributions=parts,
        recorded_digest=evidence.digest,
        mine=evidence.mine,
        me=index,
        revealed_mine=evidence.revealed,
    )
    return committee


def task_round(task: Task) -> int:
    """The task's round number (a task without a round has no stage work)."""
    if task.round is None:
        raise ValueError("the task names no round")
    return task.round


def stage_request(task: Task, name: str, part: _Part | None) -> _Part:
    """The task's request for the stage (``sharing``, ``distances``, ``aggregation``)."""
    if part is None:
        raise ValueError(f"the task ({task.action}) carries no {name} request")
    return part


def committee_of(task: Task) -> dict[str, Any] | None:
    """What request digests bind of the task's committee (None when all-to-all)."""
    announced = task.committee
    if announced is None:
        return None
    return committee_binding(
        list(announced.roster), bytes.fromhex(announced.beacon), list(announced.members)
    )


def contributor_sample(task: Task, params: CryptoParams) -> Sample | None:
    """A committee round's drawn zero-sharing contributors, recomputed from the task's
    committee announcement (roster and beacon, checked by :func:`round_committee` before
    any stage's work); None in an all-to-all round or where the sample saves nothing
    (:func:`crypto.contributor_sample.round_sample`)."""
    announced = task.committee
    if announced is None:
        return None
    try:
        beacon = bytes.fromhex(announced.beacon)
    except ValueError:
        raise CommitteeMismatchError(
            f"round {task_round(task)}: the committee announcement's beacon is not hex"
        ) from None
    return round_sample(
        params,
        federation_id=task.federation_id,
        round_number=task_round(task),
        roster=list(announced.roster),
        beacon=beacon,
    )


def peer_keys(task: Task) -> dict[int, X25519PublicKey]:
    """Participant index -> X25519 public key, from the task's peer list.

    :func:`~crypto.transport.load_public_key` remembers keys it validated, so only a
    peer seen for the first time costs an X25519 operation.
    """
    return {p.index: load_public_key(base64.b64decode(p.public_key)) for p in task.peers}


def share_body(
    task: Task,
    *,
    params: CryptoParams,
    federation_id: str,
    index: int,
    private_key: SharedSecretSource,
    reduced: NDArray[np.float64] | None,
    update: NDArray[np.float64] | None,
    rng: RandomSource,
    noise: DistributedNoise | None = None,
    distance_noise: DistanceNoise | None = None,
) -> dict[str, Any]:
    """The sharing upload: one sealed envelope per recipient and requested kind.

    With ``distance_noise`` (:func:`distance_noise`, the federation's distance-stage DP)
    the reduced prompt is clipped to its L2 bound before quantizing, and the
    re-randomizing contribution carries this participant's discrete Gaussian noise at the
    data point instead of zero (:mod:`crypto.dp.distance`); a task that shares a prompt
    but asks for no such contribution is refused (the noise cannot be stripped).

    ``reduced`` is ``x_i`` (quantized in the clustering field, deterministic rounding);
    ``update`` is ``g_i`` (clipped to ``C`` and per entry, stochastic rounding), plus
    this participant's discrete Gaussian share when ``noise`` (distributed DP,
    :func:`distributed_noise`) is given.

    ``private_key`` is this participant's ``X25519PrivateKey`` or, in a long-lived
    process, its :class:`~crypto.transport.KeyRing` (same envelopes, one X25519 per
    peer instead of one per envelope).

    In a committee round the announcement is checked first (:func:`round_committee`;
    a mismatch raises before anything is shared) and the recipients are the committee:
    member ``k`` of it gets the share at ``alpha_k``. Otherwise recipient ``j`` gets the
    share at ``alpha_j``.
    """
    sharing = stage_request(task, "sharing", task.sharing)
    kinds = {spec.kind for spec in sharing.envelopes}
    if distance_noise is not None and "prompt" in kinds and ZERO_KIND not in kinds:
        raise ValueError(
            "the federation adds DP noise to distances but the task asks for no "
            f"{ZERO_KIND!r} contribution to carry it"
        )
    peers = peer_keys(task)
    committee = round_committee(task, params=params, federation_id=federation_id, index=index)
    point = (
        {r: r for r in sharing.recipients}
        if committee is None
        else {m: k for k, m in enumerate(committee)}
    )
    round_number = task_round(task)
    envelopes = []

    def seal(recipient: int, kind: str, stage: str, plain: bytes) -> None:
        context = ShareContext(federation_id, round_number, stage, index, recipient)
        sealed = seal_share(private_key, peers[recipient], plain, context=context, rng=rng)
        envelopes.append(
            {
                "recipient": recipient,
                "kind": kind,
                "ciphertext": base64.b64encode(sealed).decode("ascii"),
            }
        )

    seeded = ZERO_SEED_KIND in kinds
    if seeded and ZERO_KIND not in kinds:
        raise ValueError(f"the task asks for {ZERO_SEED_KIND!r} envelopes without {ZERO_KIND!r}")
    contribution: SeededContribution | None = None
    seeds: list[int] = []  # recipients of the contribution's seeds, and of its vectors
    vectors: list[int] = []
    for spec in sharing.envelopes:
        kind = spec.kind
        if kind in (ZERO_KIND, ZERO_SEED_KIND):  # zero-sharing: no data, only randomness
            code = params.clustering_lcc()
            length = spec.vector_length  # the round's bound (and the offset check's mask)
            check_zero_sharing_length(params, length)
            if not seeded:  # a coordinator of an earlier release: vectors to everybody
                values = None if distance_noise is None else distance_noise.share(length, rng=rng)
                shares = ZeroSharing(code).contribute(length, rng, values=values)
            else:  # one contribution: seeds to the free points, vectors to the others
                if contribution is None:
                    values = (
                        None if distance_noise is None else distance_noise.share(length, rng=rng)
                    )
                    contribution = ZeroSharing(code).contribute_seeded(length, rng, values=values)
                    seeds, vectors = zero_split(params, {r: point[r] for r in sharing.recipients})
                stage = spec.context_stage
                if kind == ZERO_SEED_KIND:
                    for recipient in seeds:
                        seal(recipient, kind, stage, contribution.seeds[point[recipient]])
                elif vectors:
                    start = len(contribution.seeds)
                    rows = pack_field_vectors(contribution.derived, prime=spec.prime)
                    for recipient in vectors:
                        seal(recipient, kind, stage, rows[point[recipient] - start])
                continue
        elif kind == "prompt":
            if reduced is None:
                raise ValueError("the task asks for a prompt share but no reduced prompt exists")
            f = params.clustering_field
            if distance_noise is not None:  # the sensitivity assumes |x_i| <= rho
                reduced = clip_reduced(reduced, distance_noise.l2_clip)
            vector = quantize(reduced, f.field, bits=f.bits, clip=f.clip)
            code = params.clustering_lcc()
        else:
            if update is None:
                raise ValueError("the task asks for an update share but no update exists")
            f = params.aggregation_field
            vector = prepare_update(update, f, l2_clip=params.l2_clip, rng=rng, noise=noise)
            code = params.aggregation_lcc()
        if kind != ZERO_KIND:
            if vector.size != spec.vector_length:
                raise ValueError(
                    f"{kind} vector has {vector.size} entries, the federation expects "
                    f"{spec.vector_length}"
                )
            shares = code.share(vector, rng)
        packed_rows = pack_field_vectors(shares, prime=spec.prime)
        for recipient in sharing.recipients:
            seal(recipient, kind, spec.context_stage, packed_rows[point[recipient]])
    return {"envelopes": envelopes}


@dataclass(frozen=True)
class OpenedShares:
    """Shares this participant could authenticate, and the senders it could not."""

    shares: dict[int, FieldArray]
    failed: tuple[int, ...]


def open_inbox(
    inbox: ReceivedInbox,
    *,
    kind: str,
    context_stage: str,
    prime: int,
    share_length: int,
    federation_id: str,
    index: int,
    private_key: SharedSecretSource,
    peers: Mapping[int, X25519PublicKey],
) -> OpenedShares:
    """Open every envelope of ``kind`` addressed to this participant.

    ``private_key`` is its ``X25519PrivateKey`` or its :class:`~crypto.transport.KeyRing`.
    An envelope's ``ciphertext`` is its bytes or their base64 text (the JSON inbox,
    :class:`~secfpp.participant.client.ReceivedInbox`).
    Every share is decrypted into a row of one buffer and all rows are unpacked and
    range-checked at once (:func:`crypto.wire.unpack_field_vectors`); the returned
    shares are rows of one ``int64`` matrix. A sender whose envelope does not open, or
    opens to anything but a share of ``share_length`` elements of GF(prime), or who is
    not a peer, is in ``failed``; of several envelopes from one sender only the first
    is opened.
    """
    wanted = [env for env in inbox.envelopes if env.kind == kind]
    size = vector_size(prime, share_length)
    # One row per distinct sender: repeated envelopes cannot make the buffer grow.
    plain = np.empty((len({env.sender for env in wanted}), size), dtype=np.uint8)
    round_number = inbox.round
    rows: list[int] = []
    seen: set[int] = set()
    failed: set[int] = set()
    for env in wanted:
        sender = env.sender
        if sender in seen:
            continue
        seen.add(sender)
        row = len(rows)
        ciphertext = env.ciphertext
        try:
            if sender not in peers:
                raise ShareAuthenticationError()
            sealed = ciphertext if isinstance(ciphertext, bytes) else base64.b64decode(ciphertext)
            context = ShareContext(federation_id, round_number, context_stage, sender, index)
            open_share_into(private_key, peers[sender], sealed, plain[row], context=context)
        except (ShareAuthenticationError, ValueError):
            failed.add(sender)
            continue
        rows.append(sender)
    values, bad = unpack_field_vectors(plain[: len(rows)], prime=prime, length=share_length)
    failed.update(rows[i] for i in bad)
    shares = {sender: values[i] for i, sender in enumerate(rows) if sender not in failed}
    return OpenedShares(shares, tuple(sorted(failed)))


def open_zero_contributions(
    inbox: ReceivedInbox,
    *,
    prime: int,
    length: int,
    federation_id: str,
    index: int,
    private_key: SharedSecretSource,
    peers: Mapping[int, X25519PublicKey],
) -> OpenedShares:
    """Every zero-sharing contribution addressed to this participant, as vectors of
    ``length`` elements: opened from :data:`ZERO_KIND` envelopes, or expanded from the seed
    of a :data:`ZERO_SEED_KIND` envelope (:func:`crypto.rerandomize.expand_seed`). A sender
    whose envelope does not open, or opens to anything but a share of ``length`` elements or
    a seed of 32 bytes, is in ``failed``; so is one that sent both kinds."""
    vectors = open_inbox(
        inbox,
        kind=ZERO_KIND,
        context_stage=ZERO_CONTEXT_STAGE,
        prime=prime,
        share_length=length,
        federation_id=federation_id,
        index=index,
        private_key=private_key,
        peers=peers,
    )
    shares = dict(vectors.shares)
    failed = set(vectors.failed)
    seen: set[int] = set()
    for env in inbox.envelopes:
        sender = env.sender
        if env.kind != ZERO_SEED_KIND or sender in seen:
            continue
        seen.add(sender)
        try:
            if sender not in peers or sender in shares or sender in failed:
                raise ShareAuthenticationError()  # a stranger, or a vector as well
            ciphertext = env.ciphertext
            sealed = ciphertext if isinstance(ciphertext, bytes) else base64.b64decode(ciphertext)
            context = ShareContext(
                federation_id, inbox.round, ZERO_SEED_CONTEXT_STAGE, sender, index
            )
            seed = open_share(private_key, peers[sender], sealed, context=context)
            shares[sender] = expand_seed(seed, prime, length)
        except (ShareAuthenticationError, ValueError):  # ParameterError: not 32 bytes
            shares.pop(sender, None)
            failed.add(sender)
    return OpenedShares(shares, tuple(sorted(failed)))


def distance_request(task: Task) -> ReferenceSets:
    """The reference sets of a distance task."""
    d = stage_request(task, "distances", task.distances)
    return ReferenceSets(
        participants=tuple(d.participants),
        clusters=tuple((c.cluster, tuple(c.members)) for c in d.clusters),
        probes=tuple((c.cluster, tuple(c.members)) for c in d.probes),
        contributors=None if d.contributors is None else tuple(d.contributors),
    )


def distance_payload(
    task: Task,
    opened: OpenedShares,
    params: CryptoParams,
    zeros: OpenedShares | None = None,
    *,
    noisy: bool = False,
) -> tuple[bytes, str]:
    """Packed coded distances and the request digest; raises RefusalError first if unsafe.

    With ``zeros`` (the opened zero-sharing contributions, :mod:`participant.rerandomize`)
    the result is re-randomized (:func:`crypto.rerandomize.rerandomized_distances`), and a
    present participant whose contribution did not open is refused like a missing share.
    ``noisy`` (the federation's distance-stage DP noise, :mod:`crypto.dp.distance`): the
    centre-centre slots are left at 0, so only point-centre values (plus noise) are released.
    """
    refs = distance_request(task)
    d = stage_request(task, "distances", task.distances)
    check_distance_request(
        refs,
        have_shares_from=opened.shares,
        min_reference_size=params.min_reference_size,
        min_contributors=noisy_contributor_floor(params) if noisy else 0,
    )
    field = params.clustering_field.field
    if noisy and zeros is None:
        raise ValueError("distance noise needs the re-randomizing contributions (zeros=)")
    if zeros is not None:
        check_zero_contributors(
            refs,
            have_contributions_from=zeros.shares,
            colluders=params.colluders_among_participants,
            noisy=noisy,
            sample=contributor_sample(task, params),
        )
    elif refs.contributors is not None:
        raise ValueError("the task names zero-sharing contributors but none were opened")
    if d.challenge is not None and (zeros is None or noisy):
        raise ValueError(
            "the task asks for offset checks, which only a re-randomized distance stage "
            "without distance-stage noise has"
        )
    if zeros is not None:
        _check_covered(refs, zeros, checked=d.challenge is not None)
    if zeros is None:
        values = coded_distances(field, opened.shares, refs)
    elif d.challenge is not None:  # outputs, then one offset check per contributor
        values = checked_distances(
            field, opened.shares, zeros.shares, refs, bytes.fromhex(d.challenge)
        )
    else:
        values = rerandomized_distances(
            field, opened.shares, zeros.shares, refs, centre_pairs=not noisy
        )
    checks = 0 if d.challenge is None else len(refs.zero_contributors)
    if values.size != d.result_length + checks:
        raise ValueError("result length disagrees with the task")
    payload = pack_field_vector(values, prime=d.prime)
    digest = distance_request_digest(
        task.federation_id,
        task_round(task),
        refs,
        committee=committee_of(task),
        challenge=d.challenge,
    )
    return payload, digest


def _check_covered(refs: ReferenceSets, zeros: OpenedShares, *, checked: bool) -> None:
    """Raise ``ValueError`` when a contribution is too short for the request: every output
    must be re-randomized, and with the offset check the mask (the last entry) must follow
    them. The coordinator sizes contributions by the round's bound (the participants and
    clusters it started with), which a request of that round never exceeds."""
    need = refs.result_length + (1 if checked else 0)
    have = min((int(np.asarray(v).shape[0]) for v in zeros.shares.values()), default=need)
    if have < need:
        raise ValueError(
            f"the distance request has {refs.result_length} outputs"
            + (" and an offset check" if checked else "")
            + f", more than the zero-sharing contributions of {have} entries cover: refused, "
            "no output is answered without re-randomization"
        )


def aggregation_sets(task: Task) -> list[tuple[int, ...]]:
    """The member sets of an aggregation task."""
    return [tuple(s.members) for s in stage_request(task, "aggregation", task.aggregation).sets]


def aggregation_payload(
    task: Task, opened: OpenedShares, params: CryptoParams
) -> tuple[bytes, str]:
    """Packed member-set sums and the request digest; raises RefusalError first if unsafe."""
    a = stage_request(task, "aggregation", task.aggregation)
    sets = aggregation_sets(task)
    check_aggregation_request(
        sets, min_size=params.min_aggregation_size, have_shares_from=opened.shares
    )
    sums = member_sums(params.aggregation_field.field, opened.shares, sets)
    payload = pack_field_matrix(sums, prime=a.prime)
    digest = aggregation_request_digest(
        task.federation_id, task_round(task), sets, committee=committee_of(task)
    )
    return payload, digest


def prompt_from_document(doc: PromptOut | None) -> NDArray[np.float64] | None:
    """A global prompt (``PromptOut``) as a float64 array of shape (n_ctx, dim)."""
    if doc is None:
        return None
    rows, cols = doc.shape
    data = np.frombuffer(base64.b64decode(doc.data), dtype="<f8")
    if data.size != rows * cols or not math.isfinite(float(np.sum(data))):
        raise ValueError(f"global prompt payload does not hold {rows}x{cols} finite floats")
    return data.reshape(rows, cols).astype(np.float64)
