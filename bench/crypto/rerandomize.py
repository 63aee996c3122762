"""Benchmark: the re-randomized distance stage against today's (issue 26, item 3).

Prints a Markdown report (not a test). For each setting (``N = 100`` all-to-all and
``N = 1,000`` with its committee, :func:`bench.crypto.committee.setting`), in one process, one
BLAS thread, CPU seconds (``time.process_time``), the same reference sets as
:mod:`bench.crypto.committee` (8 clusters and their 8 probes: ``result_length`` is the public
bound :func:`crypto.rerandomize.output_bound`, the worst case):

* **distance stage, member** — before: open the ``N - 1`` prompt envelopes and compute
  the coded distances (:func:`crypto.secpc.coded_distances`); after: the same, plus open
  the ``K - 1`` zero-sharing envelopes of the round's other contributors (``K``,
  :func:`contributors_of`: ``T + 1 + D`` all-to-all, a drawn sample with a committee), add
  them and compute the
  offset checks (``K`` more values), :func:`crypto.rerandomize.checked_distances` as the
  participant does.
  A member at one of the code's first ``2 T_c`` points gets 32-byte seeds and expands each
  to the bound's length (:func:`crypto.rerandomize.expand_seed`); the others get vectors of
  the bound's length. Both are timed; the stage takes the slower.
* **distance stage, decode** — the coordinator's decode of the members' results. Before
  and after decode codewords of the same degree (re-randomized results are one), after
  with the ``K`` offset-check values appended, timed on separate codewords in the same run.
* **sharing stage, participant** (moved there by the design): drawing one seeded
  zero-sharing of the bound's length for the ``c`` recipients
  (:meth:`crypto.rerandomize.ZeroSharing.contribute_seeded`: ``2 T_c`` seeds expanded, the
  other values derived), packing and sealing ``c - 2 T_c`` vectors and ``2 T_c`` seeds.
* **traffic**: bytes a participant uploads and a member receives per round for the
  zero-sharing, beside today's prompt shares and results (and, for comparison, with a
  vector to every recipient, the design before seeds).

The incoming shares and contributions are uniform field elements: with ``T >= 1`` one
share is uniform (see :mod:`bench.crypto.committee`); a contribution's value at one point is
uniform too (``F >= 1`` drawn values). At ``N = 100`` the stage also runs for real (all
shares and contributions, every member, decode checked against plaintext distances).

Usage:  python -m bench.crypto.rerandomize [--n 100 1000] [--out
docs/results/rerandomized-distances.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import sys
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bench.crypto.committee import (
    REDUCED_DIM,
    Setting,
    _open_all,
    _refs,
    _seal_all,
    _warm_ring,
    cpu,
    setting,
)
from bench.crypto.decode import make_case
from secfpp.crypto.contributor_sample import sample_plan
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.quantize import quantize
from secfpp.crypto.rerandomize import (
    CHALLENGE_SIZE,
    SEED_SIZE,
    SeededContribution,
    ZeroSharing,
    checked_distances,
    contribution_length,
    contributors_wanted,
    dropouts_of,
    expand_seed,
    output_bound,
)
from secfpp.crypto.rng import DeterministicRandom, SystemRandom
from secfpp.crypto.secpc import coded_distances, decode_distances, plaintext_distances
from secfpp.crypto.transport import (
    ENVELOPE_OVERHEAD,
    KeyPair,
    KeyRing,
    ShareContext,
    generate_keypair,
    open_share,
    seal_share,
)
from secfpp.crypto.wire import pack_field_vector, pack_field_vectors
from secfpp.process.memory import retain_freed_memory

_HEADER = 24  # packed vector header (crypto.wire)


def contributors_of(s: Setting) -> int:
    """``K``: the zero-sharing contributors a round of ``s`` names
    (as :func:`coordinator.rounds.rerandomization.designate` asks them and
    :func:`secfpp.federation.crypto.zero_contributors_per_round` counts them, from the
    setting's own figures): with a committee the
    sample drawn with the round's beacon (:mod:`crypto.contributor_sample`, since
    2026-11-29), all-to-all ``T + 1 + D`` (``T`` the colluders among the ``n`` participants,
    ``D = ceil(n f)`` with ``f`` the fraction of the code points the distance stage may
    lose); every participant before 2026-11-29."""
    f, missing = s.params.colluders_among_participants, s.members - s.clustering.threshold(2)
    plan = sample_plan(s.n, f, missing, s.members) if s.members < s.n else None
    return (
        contributors_wanted(s.n, f, dropouts_of(s.n, missing, s.members))
        if plan is None
        else plan.size
    )


def _inbox(
    n: int, length: int, prime: int, stage: str, seed: int
) -> tuple[KeyRing, list[KeyPair], list[bytes]]:
    """``n - 1`` envelopes of uniform field vectors to one member, and its warm ring."""
    rng = DeterministicRandom(seed)
    member = generate_keypair(rng)
    senders = [generate_keypair(rng) for _ in range(n - 1)]
    inbox = [
        seal_share(
            k.private,
            member.public,
            pack_field_vector(rng.field_elements(prime, length), prime=prime),
            context=ShareContext("bench", 1, stage, i, 0),
        )
        for i, k in enumerate(senders)
    ]
    return _warm_ring(member, senders, stage), senders, inbox


def _real_check(s: Setting, seed: int = 3) -> str:
    """Every share, contribution and member result for real; decode vs plaintext."""
    spec = s.params.clustering_field
    code = LagrangeCode(spec.field, 1, s.clustering.t, s.members)
    refs = _refs(s.n)
    rng = DeterministicRandom(seed)
    vectors = np.random.default_rng(seed).normal(0, 0.5, (s.n, REDUCED_DIM))
    q = [quantize(v, code.field, bits=spec.bits, clip=spec.clip) for v in vectors]
    shares = np.stack([code.share(x, rng) for x in q], axis=1)  # (members, n, r)
    zeros = ZeroSharing(code)
    length = contribution_length(s.n, 8)
    challenge = rng.random_bytes(CHALLENGE_SIZE)

    def expanded(c: SeededContribution) -> np.ndarray:
        seeds = [expand_seed(seed, code.field.prime, length) for seed in c.seeds]
        return np.vstack([*seeds, c.derived])

    k = contributors_of(s)
    refs = dataclasses.replace(refs, contributors=tuple(range(s.n - k, s.n)))
    contributions = np.stack(
        [expanded(zeros.contribute_seeded(length, rng)) for _ in range(k)], axis=1
    )  # (members, k, length)
    results = {
        j: checked_distances(
            code.field,
            dict(enumerate(shares[j])),
            dict(zip(refs.zero_contributors, contributions[j], strict=True)),
            refs,
            challenge,
        )
        for j in range(s.members)
    }
    plain = {j: coded_distances(code.field, dict(enumerate(shares[j])), refs) for j in results}
    got, _ = decode_distances(code, results, refs, spec, checked=refs.zero_contributors)
    want, _ = decode_distances(code, plain, refs, spec)
    assert np.array_equal(got.point, want.point)
    assert np.array_equal(got.centre, want.centre)
    assert not any(np.array_equal(results[j][: refs.result_length], plain[j]) for j in results)
    real = np.round(np.clip(vectors, -spec.clip, spec.clip) * spec.scale) / spec.scale
    exact = plaintext_distances(list(real), refs)
    np.testing.assert_allclose(got.point, exact.point, rtol=1e-9)
    return (
        f"real run at N = {s.n} ({k} contributors): decoded distances equal today's exactly "
        "and the plaintext"
    )


def measure(s: Setting, sample: int) -> dict[str, float]:
    spec = s.params.clustering_field
    code = LagrangeCode(spec.field, 1, s.clustering.t, s.members)
    prime, r = spec.prime, REDUCED_DIM
    refs = _refs(s.n)
    bound = output_bound(s.n, 8)
    assert refs.result_length == bound
    length = contribution_length(s.n, 8)  # the outputs' bound and the offset check's mask
    k = contributors_of(s)  # the member itself and k - 1 others contribute
    rng = DeterministicRandom(1)
    ring, senders, prompt_inbox = _inbox(s.n, r, prime, "sharing-prompt", 1)
    _, _, zero_inbox = _inbox(s.n, length, prime, "sharing-zero", 1)  # same member and senders
    zero_senders, zero_inbox = senders[: k - 1], zero_inbox[: k - 1]
    checked_refs = dataclasses.replace(refs, contributors=(*range(k - 1), s.n - 1))
    seed_inbox = [
        seal_share(
            key.private,
            ring.public_key(),
            rng.random_bytes(SEED_SIZE),
            context=ShareContext("bench", 1, "sharing-zero-seed", i, 0),
        )
        for i, key in enumerate(zero_senders)
    ]
    uniform = {i: rng.field_elements(prime, r) for i in range(s.n)}
    own_zero = rng.field_elements(prime, length)  # the member's own contribution
    challenge = rng.random_bytes(CHALLENGE_SIZE)

    def before() -> None:
        opened = _open_all(ring, senders, prompt_inbox, prime, r, "sharing-prompt")
        opened[s.n - 1] = uniform[s.n - 1]
        coded_distances(code.field, opened, refs)

    def after() -> None:  # a member that gets vectors
        opened = _open_all(ring, senders, prompt_inbox, prime, r, "sharing-prompt")
        opened[s.n - 1] = uniform[s.n - 1]
        zeros = _open_all(ring, zero_senders, zero_inbox, prime, length, "sharing-zero")
        zeros[s.n - 1] = own_zero
        checked_distances(code.field, opened, zeros, checked_refs, challenge)

    def after_seeded() -> None:  # a member that gets seeds
        opened = _open_all(ring, senders, prompt_inbox, prime, r, "sharing-prompt")
        opened[s.n - 1] = uniform[s.n - 1]
        zeros = {
            i: expand_seed(
                open_share(
                    ring,
                    zero_senders[i].public,
                    env,
                    context=ShareContext("bench", 1, "sharing-zero-seed", i, 0),
                ),
                prime,
                length,
            )
            for i, env in enumerate(seed_inbox)
        }
        zeros[s.n - 1] = own_zero
        checked_distances(code.field, opened, zeros, checked_refs, challenge)

    before()
    after()  # first runs fault in pages; then alternate, best of `sample`
    after_seeded()
    member_before = min(cpu(before) for _ in range(sample))
    member_vector = min(cpu(after) for _ in range(sample))
    member_seed = min(cpu(after_seeded) for _ in range(sample))
    member_after = max(member_vector, member_seed)
    case_before = make_case(s.n, "distance", bound, 0, seed=1)
    case_after = make_case(s.n, "distance", bound + k, 0, seed=2)  # outputs + checks
    decode_before = min(
        cpu(lambda: case_before.code.decode(case_before.evaluations, degree=2))
        for _ in range(sample)
    )
    decode_after = min(
        cpu(lambda: case_after.code.decode(case_after.evaluations, degree=2)) for _ in range(sample)
    )

    recipients = [generate_keypair(rng) for _ in range(s.members)]
    sender = _warm_ring(generate_keypair(rng), recipients, "sharing-zero")
    zeros = ZeroSharing(code)
    zeros.contribute(1, rng)  # interpolation matrix, once per federation
    seeded = zeros.seeded_points

    def contribute() -> None:
        values = zeros.contribute_seeded(length, SystemRandom())
        _seal_all(sender, recipients[:seeded], list(values.seeds), "sharing-zero-seed")
        if seeded < s.members:
            packed = pack_field_vectors(values.derived, prime=prime)
            _seal_all(sender, recipients[seeded:], packed, "sharing-zero")

    contribute()
    share_extra = min(cpu(contribute) for _ in range(sample))
    zero_env = ENVELOPE_OVERHEAD + _HEADER + length * 8
    seed_env = ENVELOPE_OVERHEAD + SEED_SIZE
    prompt_env = ENVELOPE_OVERHEAD + _HEADER + r * 8
    up_extra = (s.members - seeded) * zero_env + seeded * seed_env
    return {
        "n": s.n,
        "c": s.members,
        "t": s.clustering.t,
        "outputs": bound,
        "contributors": k,
        "member_before": member_before,
        "member_after": member_after,
        "member_vector": member_vector,
        "member_seed": member_seed,
        "seeded": seeded,
        "decode_before": decode_before,
        "decode_after": decode_after,
        "share_extra": share_extra,
        "up_before_mb": s.members * prompt_env / 2**20,
        "up_extra_mb": up_extra / 2**20,
        "up_unseeded_mb": s.members * zero_env / 2**20,
        "in_before_mb": (s.n - 1) * prompt_env / 2**20,
        "in_extra_mb": (k - 1) * zero_env / 2**20,
        "in_seed_mb": (k - 1) * seed_env / 2**20,
        "round_extra_gb": k * up_extra / 2**30,
        "round_everyone_gb": s.n * up_extra / 2**30,
        "round_unseeded_gb": s.n * s.members * zero_env / 2**30,
        # T + 1 contributors, each sending c - 2T values per output (2T from pairwise keys)
        "floor_gb": (s.clustering.t + 1)
        * max(s.members - 2 * s.clustering.t, 0)
        * bound
        * 8
        / 2**30,
    }


def render(rows: list[tuple[Setting, dict[str, float]]], notes: list[str], command: str) -> str:
    load = os.getloadavg()
    lines = [
        "# Re-randomized distance stage: cost against today's",
        "",
        f"Generated by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (shared with other work; CPU seconds, "
        f"one BLAS thread, best of the runs), Python {sys.version.split()[0]}.",
        "",
        *section(figures(rows, notes)),
        "",
    ]
    return "\n".join(lines)


def figures(rows: list[tuple[Setting, dict[str, float]]], notes: list[str]) -> dict[str, Any]:
    """What ``--json`` writes: one dict per setting (its label, N, c and the measures)."""
    return {
        "rows": [{"label": s.label, "n": s.n, "members": s.members, **m} for s, m in rows],
        "notes": notes,
    }


def section(data: dict[str, Any]) -> list[str]:
    """The tables and their reading, from :func:`figures` (also ``bench.report``'s section)."""
    lines = [
        "Reference sets: 8 clusters and their 8 probes, so `result_length` equals the public "
        "bound `N * 16 + 28` (the worst case). Before and after are measured in the same run; "
        "after adds the zero-sharings of the round's `K` contributors "
        "(`coordinator.rounds.rerandomization.designate`: `T + 1 + D` all-to-all, the sample "
        "drawn with the round's beacon in a committee round, `crypto.contributor_sample`) "
        "and the offset check (each member "
        "appends `K` check values, `crypto.rerandomize.offset_checks`, and the decode covers "
        "them).",
        "",
        "| setting | N | c | T_c | K | outputs | member s before | member s after (vectors / "
        "seeds) | decode s before | decode s after | stage s before | stage s after | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in data["rows"]:
        stage_b = m["member_before"] + m["decode_before"]
        stage_a = m["member_after"] + m["decode_after"]
        lines.append(
            f"| {m['label']} | {m['n']} | {m['members']} | {m['t']:.0f} "
            f"| {m['contributors']:.0f} | {m['outputs']:,.0f} "
            f"| {m['member_before']:.3f} | {m['member_vector']:.3f} / {m['member_seed']:.3f} "
            f"| {m['decode_before']:.3f} "
            f"| {m['decode_after']:.3f} | {stage_b:.3f} | {stage_a:.3f} "
            f"| {stage_a / stage_b:.2f}x |"
        )
    lines += [
        "",
        "Stage = one member's work (open its inbox, compute) plus the coordinator's decode: the "
        "distance stage's critical path when members work in parallel, with the slower of a "
        "member that gets vectors and one that gets seeds (the first `2 T_c` code points).",
        "",
        "Moved to the sharing stage (per contributor, per round) and traffic:",
        "",
        "| setting | seeded points | zero-sharing draw + seal s | MiB up/participant today "
        "| + MiB up/contributor (no seeds) | MiB in/member today | + MiB in (vectors / seeds) "
        "| + GiB per round through the coordinator (every participant contributing; no seeds) "
        "| floor GiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in data["rows"]:
        lines.append(
            f"| {m['label']} | {m['seeded']:.0f} of {m['members']} | {m['share_extra']:.3f} "
            f"| {m['up_before_mb']:.2f} "
            f"| {m['up_extra_mb']:.2f} ({m['up_unseeded_mb']:.1f}) | {m['in_before_mb']:.2f} "
            f"| {m['in_extra_mb']:.1f} / {m['in_seed_mb']:.2f} "
            f"| {m['round_extra_gb']:.2f} ({m['round_everyone_gb']:.2f}; "
            f"{m['round_unseeded_gb']:.2f}) | {m['floor_gb']:.2f} |"
        )
    lines += [
        "",
        '"floor": what any non-interactive zero-sharing that hides the outputs from T '
        "colluders *whoever they are* must carry at least, `(T + 1)(c - 2T)` values per "
        "output (T + 1 contributors so that one is honest; each polynomial's other 2T values "
        "could come from keys it shares with 2T members). All-to-all the design measured here "
        "(`K = T + 1 + D` contributors, so that T + 1 remain after the tolerated dropouts; "
        "each sends its 2T free values as seeds) carries `K (c - 2T)` values per output: the "
        "floor's per-contributor cost, with K contributors instead of T + 1. A committee "
        "round's contributors are a sample drawn with the round's beacon, like the committee, "
        "whose colluders exceed what its floor tolerates with probability below 2^-40: it "
        "goes below the any-T floor because its guarantee is the committee's statistical "
        "one. With every present participant contributing it would carry `N (c - 2T)`, "
        "without seeds `N c`.",
        "",
        *[f"- {note}" for note in data["notes"]],
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--sample", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument("--out", help="also write the Markdown report here")
    parser.add_argument("--json", help="also write the figures here (bench.report)")
    args = parser.parse_args(argv)
    retain_freed_memory()
    rows, notes = [], []
    for n in args.n:
        s = setting(n, collusion=0.25, dropout=0.25, committee=n > 128)
        rows.append((s, measure(s, args.sample)))
        if n <= 128:
            notes.append(_real_check(s))
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m bench.crypto.rerandomize " + " ".join(given)
    text = render(rows, notes, command.strip())
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures(rows, notes), f, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
