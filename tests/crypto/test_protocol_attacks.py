"""The coordinator plays each attack of docs/protocol.md section 7, and learns nothing more."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.aggregation import member_sums
from secfpp.crypto.attestation import Attestation, attest, valid_attesters
from secfpp.crypto.clustering import Membership
from secfpp.crypto.committee import committee_threshold
from secfpp.crypto.errors import DecodeError, ParameterError, RefusalError
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec, equivocation_safe, safe_dropouts
from secfpp.crypto.quantize import quantize
from secfpp.crypto.refset_rules import effective_minimum
from secfpp.crypto.refusal import (
    aggregation_request_digest,
    check_aggregation_request,
    check_distance_request,
    check_same_request,
    distance_request_digest,
)
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import (
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)
from secfpp.crypto.transport import generate_keypair


def test_curious_coordinator_decodes_only_totals() -> None:
    """N = 64 with r = 8: the old parameters chunked the reduced prompt into K_c >= r pieces,
    so each decoded chunk value was one coordinate's squared difference. Now the decode holds
    exactly one value per (participant, reference set): the total."""
    n, r = 64, 8
    params = CryptoParams.for_federation(n, reduced_dim=r)
    assert params.clustering_code.k == 1
    code = params.clustering_lcc()
    spec = params.clustering_field
    rng = np.random.default_rng(0)
    vectors = rng.uniform(-1, 1, (n, r))
    quantized = [quantize(v, spec.field, bits=spec.bits, clip=spec.clip) for v in vectors]
    real = np.vstack([spec.field.centered(q) / spec.scale for q in quantized])
    source = DeterministicRandom(1)
    shares = [code.share(q, source) for q in quantized]
    refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(n))),))
    results = {
        j: coded_distances(spec.field, {i: shares[i][j] for i in range(n)}, refs)
        for j in range(code.recovery_threshold(2))
    }
    distances, decoded = decode_distances(code, results, refs, spec)
    # One row of decoded values: the coordinator never holds a per-coordinate partial.
    assert decoded.values.shape == (1, refs.result_length)
    np.testing.assert_allclose(distances.point, plaintext_distances(real, refs).point, rtol=1e-9)
    # The chunked code the issue describes is refused outright.
    with pytest.raises(ParameterError, match="K = 1"):
        CryptoParams(
            n_participants=n,
            reduced_dim=r,
            clustering_code=CodeSpec(16, 16),
            aggregation_code=params.aggregation_code,
        )


def test_participants_refuse_singleton_centres() -> None:
    n = 8
    everyone = tuple(range(n))
    singleton_cluster = ReferenceSets(everyone, ((0, (0,)), (1, tuple(range(1, n)))))
    singleton_probe = ReferenceSets(everyone, ((0, everyone),), ((0, (3,)),))
    leaves_one = ReferenceSets(everyone, ((0, everyone),), ((0, tuple(range(1, n))),))
    for refs in (singleton_cluster, singleton_probe, leaves_one):
        with pytest.raises(RefusalError) as info:
            check_distance_request(refs, have_shares_from=everyone, min_reference_size=2)
        assert info.value.reason == "set_too_small"


@given(
    labels=st.lists(st.integers(0, 3), min_size=2, max_size=30),
    absent=st.sets(st.integers(0, 29), max_size=10),
    minimum=st.integers(2, 4),
    salt=st.text(max_size=6),
)
def test_the_coordinator_never_asks_what_participants_refuse(
    labels: list[int], absent: set[int], minimum: int, salt: str
) -> None:
    """Whatever the membership and whoever is present, the reference sets the coordinator
    builds pass every participant's check."""
    n = len(labels)
    clusters = tuple((c, tuple(i for i in range(n) if labels[i] == c)) for c in sorted(set(labels)))
    probes = tuple((c, m[: len(m) // 2]) for c, m in clusters if len(m) > 1)
    membership = Membership(clusters, probes, next_id=4)
    present = [i for i in range(n) if i not in absent]
    floor = effective_minimum(minimum)  # what the coordinator uses (never below 3)
    refs = membership.reference_sets(
        present, min_aggregation_size=3, min_reference_size=floor, salt=salt
    )
    if refs is None:
        assert all(sum(m in present for m in members) < floor for _, members in clusters)
        return
    check_distance_request(refs, have_shares_from=present, min_reference_size=minimum)


def test_equivocating_coordinator_learns_nothing() -> None:
    """The coordinator shows {0,1,2,3} to participants 0-3 and {0,1,2} to 4-7 and hopes to
    decode both sums and subtract: participant 3's update. Every threshold exceeds N/2, so
    neither half decodes, and a participant asked both refuses the second."""
    n, d = 8, 5
    params = CryptoParams.for_federation(n, reduced_dim=4)
    code = params.aggregation_lcc()
    spec = params.aggregation_field
    assert 2 * code.recovery_threshold(1) > n
    rng = np.random.default_rng(3)
    updates = [
        quantize(rng.uniform(-1, 1, d), spec.field, bits=spec.bits, clip=spec.clip)
        for _ in range(n)
    ]
    source = DeterministicRandom(4)
    shares = [code.share(u, source) for u in updates]
    first, second = [(0, 1, 2, 3)], [(0, 1, 2)]
    answers: dict[int, np.ndarray] = {}
    answered: dict[int, str] = {}
    for j in range(n):
        sets = first if j < 4 else second
        check_aggregation_request(sets, min_size=3, have_shares_from=range(n))  # permitted
        answered[j] = aggregation_request_digest("fed", 1, sets)
        mine = {i: shares[i][j] for i in range(n)}
        answers[j] = member_sums(spec.field, mine, sets)[0]
    for group in (range(4), range(4, 8)):
        with pytest.raises(DecodeError, match="need"):
            code.decode({j: answers[j] for j in group}, degree=1)
    # Participant 3 asked the other request as well refuses it.
    with pytest.raises(RefusalError) as info:
        check_same_request(answered[3], aggregation_request_digest("fed", 1, second))
    assert info.value.reason == "conflicting_request"
    # Parameters that would let each half decode on its own are refused.
    with pytest.raises(ParameterError, match="equivocation"):
        CryptoParams.for_federation(n, reduced_dim=4, dropout_fraction=0.5)


def test_request_digests_bind_every_part_of_the_request() -> None:
    refs = ReferenceSets((0, 1, 2, 3, 4, 5), ((0, (0, 1, 2, 3, 4, 5)),), ((0, (0, 1, 2)),))
    base = distance_request_digest("fed", 2, refs)
    assert base == distance_request_digest("fed", 2, refs)
    other_probe = ReferenceSets(refs.participants, refs.clusters, ((0, (0, 1, 3)),))
    for changed in (
        distance_request_digest("fed2", 2, refs),
        distance_request_digest("fed", 3, refs),
        distance_request_digest("fed", 2, other_probe),
        distance_request_digest("fed", 2, refs, challenge="00" * 32),  # the offset check's
        aggregation_request_digest("fed", 2, [(0, 1, 2, 3, 4, 5)]),
    ):
        assert changed != base
    with_challenge = distance_request_digest("fed", 2, refs, challenge="00" * 32)
    assert with_challenge != distance_request_digest("fed", 2, refs, challenge="01" * 32)


# -- equivocation with colluders (issue 26, item 1) -------------------------------------
def _split_with_colluders(n: int, colluders: int, threshold: int) -> tuple[list[int], list[int]]:
    """The coordinator's best split: colluders ``0..T-1`` answer both requests; of the honest
    ``N - T`` participants, ``R - T`` answer request A and all the others request B."""
    shared = list(range(colluders))
    honest = list(range(colluders, n))
    cut = max(threshold - colluders, 0)
    return shared + honest[:cut], shared + honest[cut:]


def _aggregation_equivocation(
    code: LagrangeCode, spec: FieldSpec, colluders: int, *, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray], dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Request A sums everybody, request B everybody but the last participant (honest).
    Returns the quantized updates, their shares (row j: participant j's share) and the
    answers of group A and group B."""
    n, d = code.n, 7
    rng = np.random.default_rng(seed)
    updates = [
        quantize(rng.uniform(-1, 1, d), spec.field, bits=spec.bits, clip=spec.clip)
        for _ in range(n)
    ]
    source = DeterministicRandom(seed + 1)
    shares = [code.share(u, source) for u in updates]
    first, second = (tuple(range(n)),), (tuple(range(n - 1)),)
    group_a, group_b = _split_with_colluders(n, colluders, code.recovery_threshold(1))
    answers_a, answers_b = {}, {}
    for j in range(n):
        mine = {i: shares[i][j] for i in range(n)}
        if j in group_a:  # colluders (j < T) are in both groups and answer both requests
            answers_a[j] = member_sums(spec.field, mine, first)[0]
        if j in group_b:
            answers_b[j] = member_sums(spec.field, mine, second)[0]
    return updates, shares, answers_a, answers_b


def test_equivocation_with_colluders_isolates_one_update_at_the_old_parameters() -> None:
    """Issue 26: N = 40, T = 10 colluders, dropout_fraction = 0.45. The old parameters
    (K_a = 12, T = 10, R_a = 22 <= (N + T) / 2 = 25) let the honest 30 split 12 / 18: with the
    colluders answering both requests each group decodes, and the difference of the two sums
    is participant 39's update, exactly. for_federation now refuses these parameters, naming
    the largest safe dropout fraction, and at that fraction the same split cannot decode B."""
    n, colluders = 40, 10
    with pytest.raises(ParameterError, match=r"'dropout_fraction'.*largest safe dropout_fraction "):
        CryptoParams.for_federation(n, reduced_dim=4, dropout_fraction=0.45)
    spec = CryptoParams.for_federation(n, reduced_dim=4).aggregation_field
    old = LagrangeCode(spec.field, 12, colluders, n)  # what main derived for f_d = 0.45
    assert old.recovery_threshold(1) == 22
    assert not equivocation_safe(22, colluders=colluders, points=n)
    updates, _, a, b = _aggregation_equivocation(old, spec, colluders, seed=5)
    assert (len(a), len(b)) == (22, 28)
    assert set(a) & set(b) == set(range(colluders))
    sum_a = old.decode(a, degree=1).values.reshape(-1)[:7]
    sum_b = old.decode(b, degree=1).values.reshape(-1)[:7]
    np.testing.assert_array_equal(spec.field.sub(sum_a, sum_b), updates[n - 1])

    # The largest fraction the refusal names is accepted; the coordinator's best split then
    # leaves group B short of R_a, whatever it does.
    safe = CryptoParams.for_federation(n, reduced_dim=4, dropout_fraction=13.5 / n)
    assert (safe.aggregation_dropouts, safe.colluders) == (13, colluders)
    code = safe.aggregation_lcc()
    assert equivocation_safe(code.recovery_threshold(1), colluders=colluders, points=n)
    _, _, a, b = _aggregation_equivocation(code, spec, colluders, seed=5)
    assert len(a) == code.recovery_threshold(1) > len(b)
    code.decode(a, degree=1)
    with pytest.raises(DecodeError, match="need"):
        code.decode(b, degree=1)


def test_equivocation_with_colluders_in_the_distance_stage() -> None:
    """N = 24, T = 6: main's distance threshold was 13 <= (N + T) / 2 = 15, so colluders
    answering both requests let two groups sharing only them decode the distances to two
    different reference sets. The threshold is now 17 (T_c = 8): the split leaves B short."""
    n, r, colluders = 24, 4, 6
    params = CryptoParams.for_federation(n, reduced_dim=r)
    threshold = params.clustering_lcc().recovery_threshold(2)
    assert threshold == 17
    assert equivocation_safe(threshold, colluders=colluders, points=n)
    assert params.colluders == params.aggregation_code.t == colluders
    spec = params.clustering_field
    rng = np.random.default_rng(11)
    quantized = [
        quantize(v, spec.field, bits=spec.bits, clip=spec.clip) for v in rng.uniform(-1, 1, (n, r))
    ]
    real = np.vstack([spec.field.centered(q) / spec.scale for q in quantized])
    everyone = tuple(range(n))
    first = ReferenceSets(everyone, ((0, everyone),))
    second = ReferenceSets(everyone, ((0, everyone),), ((0, everyone[:12]),))

    def play(code: LagrangeCode) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        source = DeterministicRandom(12)
        shares = [code.share(q, source) for q in quantized]
        group_a, group_b = _split_with_colluders(n, colluders, code.recovery_threshold(2))
        answers: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = ({}, {})
        for answers_of, group, refs in (
            (answers[0], group_a, first),
            (answers[1], group_b, second),
        ):
            for j in group:
                answers_of[j] = coded_distances(
                    spec.field, {i: s[j] for i, s in enumerate(shares)}, refs
                )
        return answers

    old = LagrangeCode(spec.field, 1, 6, n)  # main: T_c = max(6, ceil(12 / 2)) = 6, R_c = 13
    assert old.recovery_threshold(2) == 13
    a, b = play(old)
    assert set(a) & set(b) == set(range(colluders))
    for answers, refs in ((a, first), (b, second)):
        distances, _ = decode_distances(old, answers, refs, spec)
        np.testing.assert_allclose(
            distances.point, plaintext_distances(real, refs).point, rtol=1e-9
        )

    code = params.clustering_lcc()
    a, b = play(code)
    assert len(a) == threshold > len(b)
    decode_distances(code, a, first, spec)
    with pytest.raises(DecodeError, match="need"):
        decode_distances(code, b, second, spec)


# more examples than the profile (cheap, no crypto): unsafe (n, T, dropout) corners are thin
@settings(max_examples=300)
@given(
    n=st.integers(2, 400),
    collusion=st.floats(0, 0.6),
    dropout=st.one_of(st.none(), st.floats(0, 0.6)),
)
def test_every_accepted_parameter_set_is_equivocation_safe(
    n: int, collusion: float, dropout: float | None
) -> None:
    """for_federation either refuses (naming dropout_fraction with a safe value, the
    collusion fraction, or N) or returns codes with 2R - T > N in both stages, T the
    colluders it was asked to tolerate; the safe value it names is accepted."""
    colluders = max(1, math.floor(collusion * n))
    limit = safe_dropouts(n, colluders) if n >= 3 else -1

    def build(fraction: float | None) -> CryptoParams:
        return CryptoParams.for_federation(
            n, reduced_dim=4, collusion_fraction=collusion, dropout_fraction=fraction
        )

    if limit < 0:
        with pytest.raises(ParameterError, match=r"'(collusion_fraction|n_participants)'"):
            build(dropout)
        return
    if dropout is not None and math.floor(dropout * n) > limit:
        named = rf"'dropout_fraction'.*largest safe dropout_fraction is {limit}/{n} "
        with pytest.raises(ParameterError, match=named):
            build(dropout)
        dropout = (limit + 0.5) / n  # the fraction the refusal names is accepted
    params = build(dropout)
    assert params.aggregation_code.t == colluders <= params.clustering_code.t
    clustering = params.clustering_lcc().recovery_threshold(2)
    aggregation = params.aggregation_lcc().recovery_threshold(1)
    for threshold in (clustering, aggregation):
        assert 2 * threshold - colluders > n
    expected = min(n // 4, limit) if dropout is None else math.floor(dropout * n)
    assert params.aggregation_dropouts == expected
    assert params.clustering_dropouts >= params.aggregation_dropouts


def _committee_safe(size: int, dropouts: int) -> bool:
    t = (size - dropouts - 1) // 2
    return t >= 1 and 2 * (2 * t + 1) - t > size and 2 * (size - dropouts) - t > size


# more examples than the profile (cheap, no crypto): unsafe committee sizes are thin
@settings(max_examples=200)
@given(size=st.integers(3, 600), dropout=st.one_of(st.none(), st.floats(0, 0.49)))
def test_every_accepted_committee_code_is_equivocation_safe(
    size: int, dropout: float | None
) -> None:
    """Committee codes over c members with T colluding members: 2R - T > c in both stages;
    an unsafe dropout fraction is refused naming the largest safe one."""
    limit = max(d for d in range(size) if _committee_safe(size, d))
    if dropout is not None and not _committee_safe(size, math.floor(dropout * size)):
        named = rf"'dropout_fraction'.*largest safe dropout_fraction is {limit}/{size} "
        with pytest.raises(ParameterError, match=named):
            committee_threshold(size, dropout)
        return
    t, d = committee_threshold(size, dropout)
    assert d == (min(size // 4, limit) if dropout is None else math.floor(dropout * size))
    assert t >= 1
    assert 2 * (2 * t + 1) - t > size  # distance stage
    assert 2 * (size - d) - t > size  # aggregation stage, R_a = c - D
    assert 2 * t + 1 <= size - d


def test_small_federations_keep_a_safe_default() -> None:
    """N = 5 and N = 8 cannot tolerate floor(N / 4) dropouts with T = max(1, floor(N / 4))
    colluders: the default lowers them to one, an explicit 0.25 is refused naming 1/8."""
    for n, dropouts in ((3, 0), (4, 1), (5, 0), (6, 1), (7, 1), (8, 1), (9, 2), (12, 3)):
        params = CryptoParams.for_federation(n, reduced_dim=4)
        assert params.aggregation_dropouts == dropouts, n
    with pytest.raises(ParameterError, match=r"largest safe dropout_fraction is 1/8 = 0\.125"):
        CryptoParams.for_federation(8, reduced_dim=4, dropout_fraction=0.25)
    with pytest.raises(ParameterError, match="'n_participants'"):
        CryptoParams.for_federation(2, reduced_dim=4)
    with pytest.raises(ParameterError, match=r"'collusion_fraction'.*at most 3 colluders"):
        CryptoParams.for_federation(8, reduced_dim=4, collusion_fraction=0.5)


def test_without_agreement_a_short_group_would_yield_d_functionals_of_one_update() -> None:
    """Why participants agree on the request first (docs/protocol.md section 7,
    "Equivocation", defence 3): 2R - T > N stops a second *decode*, not partial
    information. N = 12 at the defaults (T = 3, D = 3, K_a = 6, R_a = 9, accepted): if
    the colluders 0-2 answer both requests, 3-8 answer A (everybody: decoded) and 9-11
    answered B (everybody but participant 11), the coordinator would compute from its
    view alone D = 3 independent linear combinations of the K_a = 6 chunks of participant
    11's update, exactly (per chunk position). This was the residual of issue 26 item 1;
    the agreement test below shows 9-11 no longer answer B."""
    n = 12
    params = CryptoParams.for_federation(n, reduced_dim=4)
    code, spec = params.aggregation_lcc(), params.aggregation_field
    t, k, dropouts = code.t, code.k, params.aggregation_dropouts
    assert (t, k, dropouts, code.recovery_threshold(1)) == (3, 6, 3, 9)
    updates, shares, a, b = _aggregation_equivocation(code, spec, t, seed=21)
    field = spec.field
    assert sorted(set(b) - set(a)) == [9, 10, 11]
    decoded = code.decode(a, degree=1).values  # (K, L): the chunks of sum A
    masks_a = np.vstack([a[c] for c in range(t)])  # f_A(alpha_0..T-1): colluders' answers
    masks_j = shares[n - 1][:t]  # colluders' own shares of participant 11's update
    rows = [j - t for j in (9, 10, 11)]
    matrix = code.encoding_matrix[rows]  # (D, K + T): B[j, m] = l_m(alpha_j)
    f_a = field.matmul(matrix, np.vstack([decoded, masks_a]))  # f_A(alpha_9..11)
    seen = field.sub(  # f_A - f_B = u_11 at alpha_9..11, minus its masks' part
        field.sub(f_a, np.vstack([b[j] for j in (9, 10, 11)])),
        field.matmul(matrix[:, k:], masks_j),
    )
    chunk = code.chunk_length(7)
    padded = np.zeros(k * chunk, dtype=np.int64)
    padded[:7] = updates[n - 1]
    truth = field.matmul(matrix[:, :k], padded.reshape(k, chunk))
    np.testing.assert_array_equal(seen, truth)
    assert _rank_mod(matrix[:, :k].tolist(), field.prime) == dropouts


def _agreed_answerers(
    n: int, colluders: int, requests: dict[int, str], quorum: int, *, seed: int
) -> set[int]:
    """Who answers under the agreement rule (crypto.attestation): every honest participant
    ``j`` attests ``requests[j]`` (the digest it was shown) once, with real pairwise MACs;
    the colluders ``0..T-1`` attest *every* digest shown to anybody; an honest participant
    answers when it holds valid attestations of its own digest from ``quorum`` stage
    participants. Colluders answer everything (returned too)."""
    keys = {i: generate_keypair(DeterministicRandom(f"{seed}|{i}")) for i in range(n)}
    public = {i: k.public for i, k in keys.items()}
    shown = sorted(set(requests.values()))
    inboxes: dict[int, list[Attestation]] = {j: [] for j in range(n)}
    for i in range(n):
        for digest in shown if i < colluders else [requests[i]]:
            macs = attest(
                keys[i].private,
                public,
                federation_id="fed",
                round_number=1,
                stage="aggregation",
                sender=i,
                digest=digest,
                recipients=range(n),
            )
            for j, mac in macs.items():
                inboxes[j].append(Attestation(i, digest, mac))
    out = set(range(colluders))
    for j in range(colluders, n):
        valid = valid_attesters(
            keys[j].private,
            public,
            inboxes[j],
            federation_id="fed",
            round_number=1,
            stage="aggregation",
            me=j,
            digest=requests[j],
            members=range(n),
        )
        if len(valid) >= quorum:
            out.add(j)
    return out


def test_equivocation_with_colluders_yields_nothing_of_one_update_under_agreement() -> None:
    """Issue 26 item 1, the residual: the attack of the test above (N = 12, T = 3
    colluders answering and attesting both requests, K_a = 6, honest 3-8 shown A =
    everybody, honest 9-11 shown B = everybody but 11) played against participants that
    answer only after a quorum of Q = 8 attestations of their own digest. Group A holds
    3 + 6 = 9 attestations of A and answers (A still decodes: no availability is lost);
    group B holds 3 + 3 = 6 of B and answers nothing, so the coordinator holds zero linear
    combinations of participant 11's update chunks (it had D = 3 before). Over every
    split of the honest participants, at most one request is answered by honest ones."""
    n = 12
    params = CryptoParams.for_federation(n, reduced_dim=4)
    code, spec = params.aggregation_lcc(), params.aggregation_field
    t, k = code.t, code.k
    assert (t, k, params.attestation_quorum) == (3, 6, 8)
    first = aggregation_request_digest("fed", 1, [tuple(range(n))])
    second = aggregation_request_digest("fed", 1, [tuple(range(n - 1))])
    requests = {j: first if j < 9 else second for j in range(n)}
    answering = _agreed_answerers(n, t, requests, params.attestation_quorum, seed=21)
    assert answering == set(range(9))  # colluders 0-2 and group A
    _, _, a, b = _aggregation_equivocation(code, spec, t, seed=21)
    a = {j: v for j, v in a.items() if j in answering}
    b = {j: v for j, v in b.items() if j in answering}
    code.decode(a, degree=1)  # the honest request completes
    honest_b = sorted(set(b) - set(range(t)))
    assert honest_b == []
    # What the coordinator can compute about participant 11's chunks from B: the rows
    # of honest B answers in the encoding matrix, none; the colluders' own rows are
    # masks (any T shares are uniform), which is the T the code already tolerates.
    matrix = code.encoding_matrix[[j - t for j in honest_b]]
    assert _rank_mod(matrix[:, :k].tolist(), spec.field.prime) == 0
    # Whatever split the coordinator picks, honest participants answer one request only.
    for cut in range(t, n + 1):
        shown = {j: first if j < cut else second for j in range(n)}
        got = _agreed_answerers(n, t, shown, params.attestation_quorum, seed=cut)
        honest_digests = {shown[j] for j in got if j >= t}
        assert len(honest_digests) <= 1, cut


def _rank_mod(rows: list[list[int]], prime: int) -> int:
    """Rank of an integer matrix over GF(prime), by Gaussian elimination."""
    rows = [[v % prime for v in row] for row in rows]
    rank = 0
    for col in range(len(rows[0]) if rows else 0):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][col]), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        inv = pow(rows[rank][col], -1, prime)
        for r in range(len(rows)):
            if r != rank and rows[r][col]:
                factor = rows[r][col] * inv % prime
                rows[r] = [
                    (x - factor * y) % prime for x, y in zip(rows[r], rows[rank], strict=True)
                ]
        rank += 1
    return rank
