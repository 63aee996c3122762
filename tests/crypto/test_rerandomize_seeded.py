"""Zero-sharing contributions whose free evaluations travel as seeds (crypto/rerandomize.py).

The seeded contribution must be the same object as the drawn one: one polynomial of degree
``d = 2 (K + T - 1)`` through every recipient's value (seeds expanded), zero (or the DP
noise) at the data points; decoding with seeded contributions gives the plaintext distances
exactly and still corrects wrong results; and the decoded polynomial stays uniform off the
data point (the chi-square oracle of test_rerandomize.py, on seeded contributions). The seed
expansion is pinned by a known-answer vector derived here from its definition.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.linalg import lagrange_matrix, matmul
from secfpp.crypto.params import FieldSpec
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.rerandomize import (
    SEED_SIZE,
    SeededContribution,
    ZeroSharing,
    expand_seed,
    rerandomized_distances,
)
from secfpp.crypto.rng import DeterministicRandom, SeedStream
from secfpp.crypto.secpc import (
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)
from tests.crypto.test_rerandomize import SMALL, _chi_square_pvalues, _interpolate

P61 = 2**61 - 1


def _expanded(contribution: SeededContribution, prime: int, length: int) -> np.ndarray:
    """Every recipient's value, as :meth:`ZeroSharing.contribute` returns them: (N, length)."""
    seeds = [expand_seed(seed, prime, length) for seed in contribution.seeds]
    return np.vstack([*seeds, contribution.derived]) if seeds else contribution.derived


def _on_one_polynomial(code: LagrangeCode, degree: int, rows: np.ndarray) -> np.ndarray:
    """Check every row lies on the degree-``degree`` polynomial through the first ones;
    return its values at the data points (K, length)."""
    nodes = [code.alpha(j) for j in range(degree + 1)]
    basis = rows[: degree + 1]
    rest = [code.alpha(j) for j in range(degree + 1, code.n)]
    if rest:
        predicted = matmul(code.field, lagrange_matrix(nodes, rest, code.field.prime), basis)
        assert np.array_equal(predicted, rows[degree + 1 :])
    return matmul(
        code.field, lagrange_matrix(nodes, list(code.betas[: code.k]), code.field.prime), basis
    )


def test_expand_seed_known_answer() -> None:
    """The definition, spelled out: AES-256-CTR (counter 0) under SHA-256("secfpp-seed-stream|
    zero-sharing|" + seed), little-endian 8-byte words masked to ``bits(p - 1)`` bits,
    words >= p skipped."""
    seed = bytes(range(32))
    key = hashlib.sha256(b"secfpp-seed-stream|zero-sharing|" + seed).digest()
    stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor().update(bytes(8 * 64))
    words = [int.from_bytes(stream[i : i + 8], "little") & (2**61 - 1) for i in range(0, 512, 8)]
    want = [w for w in words if w < P61][:4]
    assert (
        expand_seed(seed, P61, 4).tolist()
        == want
        == [
            1199223334417658522,
            925130865783824790,
            1439180992964731184,
            281523408658667667,
        ]
    )
    assert expand_seed(seed, SMALL, 6).tolist() == [26, 22, 48, 19, 47, 31]
    assert not np.array_equal(expand_seed(bytes(32), P61, 4), expand_seed(seed, P61, 4))


@pytest.mark.parametrize("seed", [b"", bytes(31), bytes(33), "0" * 32])
def test_expand_seed_refuses_what_is_not_a_32_byte_seed(seed: object) -> None:
    with pytest.raises(ParameterError, match="seed"):
        expand_seed(seed, P61, 3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="length"):
        expand_seed(bytes(32), P61, 0)


def test_seed_streams_are_separated_by_label_and_hide_the_seed() -> None:
    seed = bytes(range(32))
    one = SeedStream(seed, label=b"a").random_bytes(32)
    assert one == SeedStream(seed, label=b"a").random_bytes(32)
    assert one != SeedStream(seed, label=b"b").random_bytes(32)
    assert seed.hex() not in repr(SeedStream(seed, label=b"a"))
    contribution = ZeroSharing(LagrangeCode(PrimeField(P61), 1, 2, 8)).contribute_seeded(
        3, DeterministicRandom(0)
    )
    assert all(s.hex() not in repr(contribution) for s in contribution.seeds)
    with pytest.raises(ValueError, match="32 bytes"):
        SeedStream(bytes(16), label=b"a")


@given(
    k=st.integers(1, 2),
    t=st.integers(1, 4),
    extra=st.integers(0, 6),
    length=st.integers(1, 9),
    noisy=st.booleans(),
    seed=st.integers(0, 2**32),
)
@settings(max_examples=60)
def test_a_seeded_contribution_is_one_polynomial_with_the_given_values_at_the_data_points(
    k: int, t: int, extra: int, length: int, noisy: bool, seed: int
) -> None:
    degree = 2 * (k + t - 1)
    n = degree + 1 + extra  # extra = 0: every point but the derived ones is free
    code = LagrangeCode(PrimeField(P61), k=k, t=t, n=n)
    sharing = ZeroSharing(code)
    rng = DeterministicRandom(seed)
    values = rng.field_elements(1000, (k, length)) - 500 if noisy else None
    contribution = sharing.contribute_seeded(length, rng, values=values)
    assert len(contribution.seeds) == sharing.seeded_points == degree + 1 - k
    assert all(isinstance(s, bytes) and len(s) == SEED_SIZE for s in contribution.seeds)
    assert contribution.derived.shape == (n - sharing.seeded_points, length)
    rows = _expanded(contribution, P61, length)
    at_data = _on_one_polynomial(code, degree, rows)
    want = np.zeros((k, length), dtype=np.int64) if values is None else np.mod(values, P61)
    assert np.array_equal(at_data, want)


def test_fewer_recipients_than_free_values_get_only_seeds() -> None:
    code = LagrangeCode(PrimeField(P61), k=1, t=3, n=4)  # F = 6 > N = 4
    contribution = ZeroSharing(code).contribute_seeded(3, DeterministicRandom(0))
    assert len(contribution.seeds) == 4
    assert contribution.derived.shape == (0, 3)
    with pytest.raises(ParameterError, match="no derived evaluation"):
        ZeroSharing(code).contribute_seeded(3, DeterministicRandom(0), values=np.zeros(3, int))


def _seeded_stage(
    code: LagrangeCode, data: dict[int, np.ndarray], refs: ReferenceSets, seed: bytes
) -> dict[int, np.ndarray]:
    rng = DeterministicRandom(seed)
    shares = {i: code.share(data[i], rng) for i in refs.participants}
    sharing = ZeroSharing(code)
    contributions = {
        i: _expanded(
            sharing.contribute_seeded(refs.result_length, rng),
            code.field.prime,
            refs.result_length,
        )
        for i in refs.participants
    }
    return {
        j: rerandomized_distances(
            code.field,
            {i: shares[i][j] for i in refs.participants},
            {i: contributions[i][j] for i in refs.participants},
            refs,
        )
        for j in range(code.n)
    }


def test_seeded_contributions_decode_exactly_and_wrong_results_are_corrected() -> None:
    spec = FieldSpec(P61, 16, 4.0)
    code = LagrangeCode(spec.field, k=1, t=2, n=12)  # degree 4, 2 errors correctable
    vectors = np.random.default_rng(3).normal(0, 0.5, (7, 5))
    data = {i: quantize(vectors[i], code.field, bits=16, clip=4.0) for i in range(7)}
    refs = ReferenceSets(tuple(range(7)), ((0, (0, 1, 2, 3)), (1, (4, 5, 6))), ((0, (0, 1, 2)),))
    results = _seeded_stage(code, data, refs, b"seeded-decode")
    reference, clean = decode_distances(code, results, refs, spec)
    assert clean.rejected == ()
    wrong = dict(results)
    wrong[3] = code.field.add(wrong[3], np.ones_like(wrong[3]))
    wrong[8] = code.field.add(wrong[8], np.full_like(wrong[8], 7))
    got, decoded = decode_distances(code, wrong, refs, spec)
    assert sorted(decoded.rejected) == [3, 8]
    np.testing.assert_array_equal(got.point, reference.point)
    real = {i: dequantize(data[i], code.field, bits=16) for i in range(7)}
    exact = plaintext_distances(real, refs)
    np.testing.assert_allclose(got.point, exact.point, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.centre, exact.centre, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # 2,000 coded stages: out of the inner loop (bash dev.sh quick)
def test_seeded_decoded_polynomial_is_uniform_off_the_data_point() -> None:
    """test_rerandomize.py's oracle, with every contribution's free values sent as seeds."""
    field = PrimeField(SMALL)
    code = LagrangeCode(field, k=1, t=1, n=5)
    values = [1, 0, -1, 1, 0]
    data = {i: field.asarray([v % SMALL]) for i, v in enumerate(values)}
    refs = ReferenceSets(tuple(range(5)), ((0, (0, 1, 2)), (1, (3, 4))))
    samples = np.stack(
        [
            _interpolate(code, _seeded_stage(code, data, refs, b"oracle-%d" % run), [1, 0, 2, 3])
            for run in range(2000)
        ]
    )
    assert (samples[:, 0, :] == coded_distances(field, data, refs)[None, :]).all()
    assert min(_chi_square_pvalues(samples)) > 1e-4
