"""What each transition computes, with the crypto core; no database, no clock.

Every function takes the stored round state and what participants uploaded, and
returns an :class:`Outcome`: the next stage, the new state and whatever rows the
transition writes. The driver applies an outcome in one compare-and-set transaction;
because these functions are deterministic in their inputs (up to the GDP noise, which
is drawn inside the transaction that records it), a transition redone after a crash
gives the same result.

Units: decoded distances are squared real distances; cluster means are real-valued
update means (the decoded sum of quantized updates divided by ``2**bits`` and by the
number of contributors); prompts are flat float64 vectors of ``n_ctx * dim`` values.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.coordinator.rounds.machine import Stage, next_stage
from secfpp.coordinator.rounds.rerandomization import minimum_contributors
from secfpp.coordinator.rounds.state import RoundState, refs_to_dict, step_to_dict
from secfpp.crypto.aggregation import decode_cluster_mean
from secfpp.crypto.clustering import ClusteringConfig, inherit_prompts, secpc_step
from secfpp.crypto.dp import LedgerRecord, gdp_sigma, mean_sensitivity
from secfpp.crypto.dp.distance import noisy_contributor_floor
from secfpp.crypto.errors import DecodeError, OffsetCheckError
from secfpp.crypto.lcc import Decoded
from secfpp.crypto.refset_rules import effective_minimum
from secfpp.crypto.rerandomize import CHALLENGE_SIZE
from secfpp.crypto.rng import RandomSource, default_random
from secfpp.crypto.secpc import decode_distances
from secfpp.crypto.split_review import ReviewPolicy, advance, review
from secfpp.crypto.wire import unpack_field_matrix, unpack_field_vector
from secfpp.federation import FederationConfig

log = logging.getLogger(__name__)

__all__ = [
    "ClusterRow",
    "Outcome",
    "close_sharing",
    "close_stage",
    "planned_releases",
    "publish",
    "run_clustering",
]

Prompt = NDArray[np.float64]


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of the next generation: its members and its global prompt."""

    cluster_id: int
    members: tuple[int, ...]
    prompt: Prompt


@dataclass(frozen=True)
class Outcome:
    """A transition: target stage, new state, event detail and rows to write."""

    stage: Stage
    state: RoundState
    detail: dict[str, Any]
    reason: str | None = None
    clusters: tuple[ClusterRow, ...] = ()
    ledger: tuple[LedgerRecord, ...] = field(default=())


class _Points:
    """Participant index <-> index of its evaluation point in the round's codes.

    Without a committee they are the same; in a committee round member ``k`` of the
    sorted committee holds point ``alpha_k``. Decoders work on point indices; everything
    stored and logged names participants.
    """

    def __init__(self, state: RoundState) -> None:
        self._point = state.point_of()
        self._name = {k: i for i, k in self._point.items()}

    def point(self, participant: int) -> int:
        try:
            return self._point[participant]
        except KeyError:
            raise ValueError(f"participant {participant} holds no evaluation point") from None

    def names(self, points: Sequence[int]) -> list[int]:
        return [self._name[k] for k in points]

    def named(self, decoded: Decoded) -> Decoded:
        return Decoded(
            decoded.values, tuple(self.names(decoded.used)), tuple(self.names(decoded.rejected))
        )


def fail(state: RoundState, reason: str, **detail: Any) -> Outcome:
    return Outcome(Stage.FAILED, state, {"reason": reason, **detail}, reason=reason)


def close_sharing(
    state: RoundState,
    config: FederationConfig,
    sharers: set[int],
    dropped: set[int],
    *,
    salt: str | None,
    rng: RandomSource | None = None,
) -> Outcome:
    """Sharing closed: fix who is present and what the later stages compute over.

    Participants an earlier round's offset check named (``state.distance_excluded``) are
    left out of the distance request (they are still present for the aggregation).

    A distance stage of a federation that re-randomizes without distance-stage noise gets a
    fresh offset-check challenge (:mod:`crypto.rerandomize`) from ``rng`` (the system's
    cryptographic source by default): every contribution has been sealed by now.

    ``salt`` (:func:`coordinator.rounds.probes.probe_salt_of`: a hash of the round's
    committed beacon) draws every probe (:func:`initial_probe`); probes refined from last
    round's distances are not used, participants refuse them (``probe_not_drawn``). When no
    cluster has ``effective_minimum(min_reference_size)`` (at least 3) present members,
    or when distance-stage DP noise is on and fewer than
    :func:`~crypto.dp.distance.noisy_contributor_floor` (``T + m_min``) participants are
    present (participants would refuse the request, ``too_few_contributors``), the round has
    no distance stage. So has a round that named its zero-sharing contributors
    (``state.zero_contributors``, :mod:`coordinator.rounds.rerandomization`) when fewer than
    ``T + 1`` of them shared, or in a committee round fewer than its drawn sample's floor
    (participants would refuse it too); the request names the others (``contributors``).
    """
    state = state.with_dropped(dropped, Stage.SHARING)
    present = sorted(sharers - {int(i) for i in state.dropped})
    membership = state.membership_obj()
    min_size = config.crypto.min_aggregation_size
    sets = membership.aggregation_sets(present, min_aggregation_size=min_size)
    noisy = config.dp.distance_noise_multiplier is not None
    excluded = set(state.distance_excluded)  # convicted by an earlier offset check
    eligible = [i for i in present if i not in excluded]
    contributors = None  # every present participant, unless the round named them
    if state.zero_contributors is not None:
        named = set(state.zero_contributors)
        contributors = [i for i in eligible if i in named]
    refs = (
        membership.reference_sets(
            eligible,
            min_aggregation_size=min_size,
            min_reference_size=effective_minimum(config.crypto.min_reference_size),
            salt=salt,
        )
        if state.clustering
        and not (noisy and len(eligible) < noisy_contributor_floor(config.crypto_params()))
        and not (
            contributors is not None
            and len(contributors)
            < minimum_contributors(
                config.crypto_params(),
                len(state.participants) if state.committee is not None else None,
            )
        )
        else None
    )
    if refs is not None and contributors is not None:
        refs = dataclasses.replace(refs, contributors=tuple(contributors))
    checked = refs is not None and config.crypto.rerandomize_distances and not noisy
    challenge = (rng or default_random()).random_bytes(CHALLENGE_SIZE).hex() if checked else None
    state = state.model_copy(
        update={
            "clustering": refs is not None,
            "present": present,
            "refs": None if refs is None else refs_to_dict(refs),
            "challenge": challenge,
            "aggregation_sets": [[c, list(m)] for c, m in sets],
            "responders": {**state.responders, Stage.SHARING.value: present},
        }
    )
    target = next_stage(Stage.SHARING, clustering_round=state.clustering, aggregates=bool(sets))
    detail = {"present": present, "dropped": sorted(dropped), "aggregation_sets": sets}
    return Outcome(target, state, detail)


def close_stage(
    stage: Stage, state: RoundState, responders: set[int], dropped: set[int]
) -> RoundState:
    """An upload stage closed: record who answered and who dropped."""
    state = state.with_dropped(dropped, stage)
    return state.model_copy(
        update={"responders": {**state.responders, stage.value: sorted(responders)}}
    )


def run_clustering(
    state: RoundState,
    config: FederationConfig,
    results: Mapping[int, bytes],
    *,
    federation_id: str = "",
    number: int = 0,
    salt: str | None = None,
    accuracy: Mapping[int, Mapping[int, float]] | None = None,
) -> Outcome:
    """Decode the SecPC distances (Reed-Solomon when redundant) and run the clustering step.

    With distance-stage DP (``dp.distance_noise_multiplier``) the decoded values carry the
    contributors' noise; the outcome's ledger holds the release's record
    (:meth:`crypto.dp.distance.DistanceNoise.record`) for ``federation_id``, round
    ``number``.

    ``salt``: the round's probe salt (:func:`coordinator.rounds.probes.probe_salt_of`), which
    also keys the split rule's public null draws. ``number`` and ``accuracy`` (round ->
    participant -> reported ``accuracy``) drive the accuracy review of earlier splits
    (:mod:`crypto.split_review`); without them no split is undone.
    """
    params = config.crypto_params()
    refs = state.refs_obj()
    if refs is None:
        raise ValueError("clustering stage without reference sets")
    spec = params.clustering_field
    noise = config.distance_noise(params)
    points = _Points(state)
    vectors = {
        points.point(j): unpack_field_vector(
            data, prime=spec.prime, expected_length=state.distance_result_length()
        )
        for j, data in results.items()
    }
    try:
        distances, decoded = decode_distances(
            params.clustering_lcc(),
            vectors,
            refs,
            spec,
            noisy=noise is not None,
            checked=state.distance_checks(),
        )
        decoded = points.named(decoded)
        if decoded.rejected:
            log.warning(
                "distance stage: the results of participants %s disagree with the others (a "
                "wrong computation, or an inconsistent share sent to them); decoded without "
                "them (error correction)",
                list(decoded.rejected),
            )
    except OffsetCheckError as err:
        return _offsets_failed(state, points, err)
    except DecodeError as err:
        return fail(
            state,
            f"distance decode failed: {err}",
            rejected=points.names(err.rejected),
            received=points.names(err.received),
        )
    membership = state.membership_obj()
    policy = config.clustering
    review_policy = ReviewPolicy(
        tolerance=0.0 if policy.undo_tolerance is None else policy.undo_tolerance,
        after=policy.undo_after,
        cooldown=policy.resplit_cooldown,
        min_reporters=params.min_aggregation_size,
        enabled=policy.undo_tolerance is not None and accuracy is not None,
    )
    decided = review(membership, number, accuracy or {}, review_policy)
    step = secpc_step(
        distances,
        membership,
        ClusteringConfig(
            false_split_rate=policy.false_split_rate,
            null_draws=policy.null_draws,
            max_trim=config.clustering.max_trim,
            trim_factor=config.clustering.trim_factor,
            merge_factor=config.clustering.merge_factor,
            min_aggregation_size=params.min_aggregation_size,
            min_reference_size=effective_minimum(params.min_reference_size),
            max_clusters=params.max_clusters,
        ),
        salt=salt,
        undo=decided.undo,
        frozen=decided.frozen,
    )
    step = advance(membership, step, decided, number, review_policy)
    state = state.model_copy(
        update={
            "rejected": {**state.rejected, Stage.DISTANCES.value: list(decoded.rejected)},
            "distances": {
                "point": distances.point.tolist(),
                "centre": distances.centre.tolist(),
            },
            "step": step_to_dict(step),
        }
    )
    target = next_stage(
        Stage.CLUSTERING, clustering_round=True, aggregates=bool(state.aggregation_sets)
    )
    detail = {
        "used": list(decoded.used),
        "rejected": list(decoded.rejected),
        "next_clusters": step.membership.to_dict()["clusters"],
        "splits": state.step["splits"] if state.step else [],
        "merges": state.step["merges"] if state.step else [],
        # The split statistic W2/W1 per tested cluster: why a cluster did or did not split.
        "split_ratios": state.step.get("split_ratios", {}) if state.step else {},
        # Its p-value against the fitted single-group null, and the level it had to reach
        # (false_split_rate spent over the cluster's tests, crypto.clustering.split_level).
        "split_p_values": state.step.get("split_p_values", {}) if state.step else {},
        "split_levels": state.step.get("split_levels", {}) if state.step else {},
        # The accuracy review of earlier splits (crypto/split_review.py).
        "split_reviews": [dataclasses.asdict(v) for v in decided.verdicts],
        "decoded_distances": int(distances.point.size + len(refs.cluster_pairs)),
    }
    if noise is None:
        return Outcome(target, state, detail)
    record = noise.record(federation_id=federation_id, round=number, refs=refs)
    detail["distance_noise_rho"] = record.rho
    return Outcome(target, state, detail, ledger=(record,))


def _offsets_failed(state: RoundState, points: _Points, err: OffsetCheckError) -> Outcome:
    """The offset check named contributors whose zero-sharing shifted every distance: the
    round keeps its membership (no clustering step, no distances kept) and goes on to its
    aggregation, which those contributions do not touch; the contributors are recorded
    (``offset_failures``) and left out of every later round's distance request
    (``distance_excluded``, carried from round to round)."""
    decoded = points.named(err.decoded)
    failures = sorted(err.contributors)
    log.warning(
        "distance stage: the zero-sharing contributions of participants %s do not vanish at "
        "the data point (offset check): this round's distances are discarded, no clustering "
        "step",
        failures,
    )
    state = state.model_copy(
        update={
            "rejected": {**state.rejected, Stage.DISTANCES.value: list(decoded.rejected)},
            "offset_failures": failures,
        }
    )
    target = next_stage(
        Stage.CLUSTERING, clustering_round=True, aggregates=bool(state.aggregation_sets)
    )
    detail = {
        "used": list(decoded.used),
        "rejected": list(decoded.rejected),
        "offset_failures": failures,
        "next_clusters": state.membership_obj().to_dict()["clusters"],
        "splits": [],
        "merges": [],
        "split_ratios": {},
        "split_p_values": {},
        "split_reviews": [],
        "decoded_distances": 0,
    }
    return Outcome(target, state, detail)


def planned_releases(
    config: FederationConfig, federation_id: str, number: int, state: RoundState
) -> list[LedgerRecord]:
    """The DP releases round ``number`` would make if every member contributed: the cluster
    sums' (GDP or distributed) and, in a clustering round with distance-stage noise, a
    record that bounds the distance release
    (:meth:`~crypto.dp.distance.DistanceNoise.planned_record`: its request is fixed only
    after sharing, so the check uses the largest one the round's membership allows)."""
    dp = config.dp
    membership = state.membership_obj()
    releases: list[LedgerRecord] = []
    if state.clustering:
        noise = config.distance_noise()
        if noise is not None:
            releases.append(
                noise.planned_record(
                    federation_id=federation_id,
                    round=number,
                    participants=state.participants,
                    clusters=[members for _, members in membership.clusters],
                )
            )
    if dp.mechanism == "none" or dp.noise_multiplier is None:
        return releases
    sets = membership.aggregation_sets(
        state.participants, min_aggregation_size=config.crypto.min_aggregation_size
    )
    return releases + [
        _release(config, federation_id, number, c, members, dp.noise_multiplier)
        for c, members in sets
    ]


def _release(
    config: FederationConfig,
    federation_id: str,
    number: int,
    cluster: int,
    members: tuple[int, ...],
    noise_multiplier: float,
) -> LedgerRecord:
    noise = config.distributed_noise()  # each contributor's share, before sharing
    if noise is not None:
        return noise.record(
            federation_id=federation_id,
            round=number,
            cluster_id=cluster,
            members=members,
            dimension=config.aggregation_length,
        )
    clip = config.crypto.l2_clip
    m = len(members)
    return LedgerRecord(
        federation_id=federation_id,
        round=number,
        kind="gdp",
        participants=tuple(members),
        sigma=gdp_sigma(noise_multiplier=noise_multiplier, clip_norm=clip, n_contributors=m),
        sensitivity=mean_sensitivity(clip_norm=clip, n_contributors=m),
        cluster_id=cluster,
        mechanism="discrete_gaussian",  # drawn exactly on the decoded integer sum
    )


def publish(
    state: RoundState,
    config: FederationConfig,
    *,
    federation_id: str,
    number: int,
    results: Mapping[int, bytes],
    prompts: Mapping[int, Prompt],
    rng: RandomSource,
) -> Outcome:
    """Decode every cluster mean, update the global prompts, derive the next generation.

    ``G_c <- G_c + lr_global * (mean_c [+ GDP noise])`` for each aggregated cluster; the
    clustering step's result (if any) then takes effect: new clusters start from their
    parent's prompt, merged ones from the size-weighted mean.
    """
    params = config.crypto_params()
    spec = params.aggregation_field
    sets = state.sets()
    length = config.aggregation_length
    updated = {c: np.array(p, dtype=np.float64, copy=True) for c, p in prompts.items()}
    records: list[LedgerRecord] = []
    rejected: set[int] = set()
    means: dict[str, list[float]] = {}
    if sets:
        share_len = config.update_share_length()
        points = _Points(state)
        matrices = {
            points.point(j): unpack_field_matrix(
                data, prime=spec.prime, expected_shape=(len(sets), share_len)
            )
            for j, data in results.items()
        }
        code = params.aggregation_lcc()
        z = config.dp.noise_multiplier
        for row, (c, members) in enumerate(sets):
            record = (
                None
                if config.dp.mechanism == "none" or z is None
                else _release(config, federation_id, number, c, members, z)
            )
            # GDP: discrete Gaussian noise on the integer sum; distributed: already noisy.
            gdp_noise = record.sigma if record is not None and record.kind == "gdp" else None
            try:
                mean, decoded = decode_cluster_mean(
                    code,
                    {j: m[row] for j, m in matrices.items()},
                    length=length,
                    spec=spec,
                    contributors=len(members),
                    noise_sigma=gdp_noise,
                    rng=rng,
                )
            except DecodeError as err:
                return fail(
                    state,
                    f"aggregation decode of cluster {c} failed: {err}",
                    rejected=points.names(err.rejected),
                    received=points.names(err.received),
                )
            decoded = points.named(decoded)
            if decoded.rejected:
                log.warning(
                    "aggregation stage: the results of participants %s disagree with the "
                    "others (a wrong computation, or an inconsistent share sent to them); "
                    "decoded without them (error correction)",
                    list(decoded.rejected),
                )
            rejected |= set(decoded.rejected)
            if record is not None:
                records.append(record)
            means[str(c)] = [float(np.linalg.norm(mean))]
            if config.prototypes is not None:  # protopfl: the average block replaces the last
                updated[c] = mean
            else:
                updated[c] = updated[c] + config.rounds.lr_global * mean
    membership = state.membership_obj()
    step = state.step_obj()
    if step is not None:
        next_prompts = inherit_prompts(updated, membership, step)
        next_membership = step.membership
    else:
        next_prompts, next_membership = updated, membership
    rows = tuple(ClusterRow(c, members, next_prompts[c]) for c, members in next_membership.clusters)
    state = state.model_copy(
        update={
            "rejected": {**state.rejected, Stage.AGGREGATION.value: sorted(rejected)},
            "next_generation": number,
            "next_membership": next_membership.to_dict(),
        }
    )
    detail = {
        "aggregated": [c for c, _ in sets],
        "rejected": sorted(rejected),
        "mean_norms": means,
        "generation": number,
        "clusters": [[r.cluster_id, list(r.members)] for r in rows],
    }
    return Outcome(Stage.PUBLISHED, state, detail, clusters=rows, ledger=tuple(records))
