"""Benchmark of committee sharing (issue 17): prints tables (not a test).

For ``N`` participants and a committee of ``c`` (:func:`crypto.committee.plan_committee`),
each coded stage is measured with the crypto core, one process, one BLAS thread, in CPU
seconds (``time.process_time``; the machine is shared, so wall-clock is noisier):

* **share** (one participant): quantize its vector, LCC-share it for the ``c`` members,
  pack and seal one envelope per member (HKDF + AES-256-GCM);
* **member** (one committee member): open the ``N - 1`` envelopes addressed to it, unpack,
  and compute its result over all ``N`` participants' shares (the cluster sum; the coded
  squared distances);
* **decode** (coordinator): decode from all ``c`` members' results (``c > R``, so with the
  Reed-Solomon consistency check), checked against the plaintext answer.

Sealing and opening go through each participant's :class:`crypto.transport.KeyRing`, as
the daemon does, in the steady state: the ring is warm (one round was already done with
the same peers, untimed), so an envelope costs no X25519 exchange. The first contact
with a peer pays one exchange per pair and side (X25519 and the HKDF-Extract step, about
50 us on a shared 2-core machine; measured and printed at the end): at N = 1,000, c = 81
that is about ``c x 50 us`` = 4 ms more for a participant, ``(N - 1) x 50 us`` = 50 ms
more for a new member, and ``2 (N - 1) c x 50 us`` = 8 s more summed over the federation
in the first round. A daemon keeps its ring across stages and rounds, so later rounds pay
only for pairs that have not met yet (a committee is drawn anew each round; at most
``N - 1`` exchanges per participant over the federation's lifetime, or after a restart).
A member opens its inbox as the daemon does (:func:`participant.protocol.open_inbox`: every
share decrypted into a row of one buffer, all rows checked at once). Both roles are timed
after a first run in the process, which is printed beside them: it also faults in fresh
pages for the buffers, as a daemon's first round does. Like the daemon and the
coordinator, the benchmark first calls :func:`secfpp.process.memory.retain_freed_memory`, so
later calls reuse those pages instead of faulting in fresh ``mmap`` blocks each time.

The same stage without a committee (every participant a member, ``c = N``, today's codes)
is shown for comparison. "Stage total" is the compute summed over every machine,
``N * share + c * member + decode``; "critical path" is ``share + member + decode``, what
a stage takes when participants and members work in parallel on their own machines.

What is sampled (stated in the output): ``share`` is the mean over ``--sample``
participants (the stage total multiplies it by ``N``). For ``member``, the incoming
shares are drawn uniformly from the field: with ``T >= 1`` one share of a secret is
uniform, and participants share independently, so this is the distribution a member
really receives. The aggregation decode gets the members' results as one LCC sharing
of the plaintext sum of ``N`` quantized updates: by linearity ``sum_i share_j(g_i)`` is a
sharing of ``sum_i g_i`` whose masks are sums of uniform masks, i.e. uniform, so the
decoder sees what it would see in a round; the decoded sum is compared exactly. The
distance stage runs for real (all ``N`` shares, every member's coded distances, the
decode compared with plaintext distances) where that fits (``N * c * r`` shares in
memory, up to ``--real-upto`` participants without a committee); otherwise its decode is
timed on a codeword of random polynomials of the same degree
(:func:`bench.crypto.decode.make_case`).
The end-to-end committee path is also exercised by tests/crypto/test_committee.py.

At ``N = 10,000`` (``--committee-only``: the all-to-all rows would need ``N^2`` envelopes
and an ``O(N^2)`` decode at ``N = 10,000`` points) the distance stage is refused by the
parameters themselves: its centre peak ``r (2 (N/2)^2 q)^2`` exceeds ``(p - 1) / 2`` for
``p = 2^61 - 1`` even with zero fractional bits (:func:`crypto.params.largest_safe_bits`),
so that stage is reported as refused, with the reason, rather than timed on a field that
would wrap. ``--json`` writes every figure, the peak resident memory of the process
(``ru_maxrss``) and each stage's bytes per participant and per member.

Usage:  python -m bench.crypto.committee [--quick] [--n 1000] [--d 100000] [--sample 3]
            [--committee-only] [--all-members] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from bench.crypto.decode import make_case
from secfpp.crypto.aggregation import decode_cluster_sum, member_sums, prepare_update
from secfpp.crypto.clustering import Membership
from secfpp.crypto.committee import plan_committee
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec
from secfpp.crypto.quantize import quantize
from secfpp.crypto.rng import DeterministicRandom, SystemRandom
from secfpp.crypto.secpc import (
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)
from secfpp.crypto.transport import (
    KeyPair,
    KeyRing,
    ShareContext,
    generate_keypair,
    seal_share,
)
from secfpp.crypto.wire import pack_field_vector, pack_field_vectors
from secfpp.participant.client import ReceivedEnvelope, ReceivedInbox
from secfpp.participant.protocol import open_inbox
from secfpp.process.memory import retain_freed_memory

REDUCED_DIM = 128
CLUSTERS = 8


def _params(n: int, collusion: float, dropout: float) -> CryptoParams:
    """The federation's parameters; where the distance stage has no safe quantization at this
    ``N`` (:func:`distance_refusal`), those of a federation with the clustering clip lowered
    to the largest that fits, so that the aggregation stage (whose field does not depend on
    it) can still be measured. The distance stage is then not timed."""
    try:
        return CryptoParams.for_federation(
            n, reduced_dim=REDUCED_DIM, collusion_fraction=collusion, dropout_fraction=dropout
        )
    except ParameterError:
        return CryptoParams.for_federation(
            n,
            reduced_dim=REDUCED_DIM,
            collusion_fraction=collusion,
            dropout_fraction=dropout,
            clustering_clip=2.0**-20,
        )


def distance_refusal(n: int) -> str | None:
    """Why the distance stage of ``N`` participants (default clip) is refused, or None."""
    try:
        CryptoParams.for_federation(n, reduced_dim=REDUCED_DIM)
    except ParameterError as exc:
        return str(exc)
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class Setting:
    """Who shares to whom: ``n`` participants, ``members`` of them in the committee."""

    label: str
    n: int
    members: int
    aggregation: CodeSpec
    clustering: CodeSpec
    params: CryptoParams  # fields and quantization bits (they depend on N, not on c)


@dataclass(frozen=True)
class Cost:
    """CPU seconds per role, bytes per role, and how each figure was obtained."""

    share_s: float
    member_s: float
    decode_s: float
    envelope_bytes: int
    result_bytes: int
    how: str

    def total(self, s: Setting) -> float:
        return s.n * self.share_s + s.members * self.member_s + self.decode_s

    def path(self) -> float:
        return self.share_s + self.member_s + self.decode_s


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def setting(n: int, *, collusion: float, dropout: float, committee: bool) -> Setting:
    params = _params(n, collusion, dropout)
    plan = plan_committee(
        n, collusion_fraction=collusion, dropout_fraction=dropout, size=None if committee else n
    )
    if committee and plan.full:
        raise SystemExit(f"N = {n} gets no committee smaller than N at f_c = {collusion}")
    who = f"committee c={plan.size}" if committee else f"all-to-all N={n}"
    label = f"{who} fc={collusion:g}"
    return Setting(label, n, plan.size, plan.aggregation_code, plan.clustering_code, params)


def _warm_ring(own: KeyPair, peers: list[KeyPair], stage: str) -> KeyRing:
    """``own``'s key ring after an earlier round (round 0, untimed) with every peer."""
    ring = KeyRing(own.private)
    for j, peer in enumerate(peers):
        seal_share(ring, peer.public, b"", context=ShareContext("bench", 0, stage, 0, j))
    return ring


def first_contact_us(peers: int = 200, seed: int = 2) -> float:
    """Microseconds a cold ring adds to one envelope: X25519 + HKDF-Extract, per peer."""
    rng = DeterministicRandom(seed)
    own = generate_keypair(rng)
    others = [generate_keypair(rng) for _ in range(peers)]
    warm = _warm_ring(own, others, "probe")

    def seal_round(ring: KeyRing) -> None:
        for j, peer in enumerate(others):
            seal_share(ring, peer.public, b"", context=ShareContext("bench", 1, "probe", 0, j))

    cold_s = min(cpu(lambda: seal_round(KeyRing(own.private))) for _ in range(3))
    warm_s = min(cpu(lambda: seal_round(warm)) for _ in range(3))
    return (cold_s - warm_s) / peers * 1e6


def _seal_all(
    sender: KeyRing, recipients: list[KeyPair], payloads: list[bytes], stage: str
) -> list[bytes]:
    return [
        seal_share(sender, r.public, p, context=ShareContext("bench", 1, stage, 0, j))
        for j, (r, p) in enumerate(zip(recipients, payloads, strict=True))
    ]


def _open_all(
    member: KeyRing, senders: list[KeyPair], inbox: list[bytes], prime: int, length: int, stage: str
) -> dict[int, np.ndarray]:
    """What the daemon does with its inbox (:func:`participant.protocol.open_inbox`)."""
    received = ReceivedInbox(
        1,
        0,
        tuple(range(len(inbox))),
        tuple(ReceivedEnvelope(i, "share", env) for i, env in enumerate(inbox)),
    )
    opened = open_inbox(
        received,
        kind="share",
        context_stage=stage,
        prime=prime,
        share_length=length,
        federation_id="bench",
        index=0,
        private_key=member,
        peers={i: s.public for i, s in enumerate(senders)},
    )
    assert not opened.failed, f"envelopes from {opened.failed} did not open"
    return opened.shares


def _member_inbox(
    s: Setting,
    spec: FieldSpec,
    length: int,
    stage: str,
    rng: DeterministicRandom,
    senders: list[KeyPair] | None = None,
) -> tuple[KeyPair, list[KeyPair], list[bytes]]:
    """``N - 1`` envelopes to one member, each a uniform share (see module doc), from
    ``senders`` (new key pairs when None)."""
    member = generate_keypair(rng)
    if senders is None:
        senders = [generate_keypair(rng) for _ in range(s.n - 1)]
    inbox = [
        seal_share(
            k.private,
            member.public,
            pack_field_vector(rng.field_elements(spec.prime, length), prime=spec.prime),
            context=ShareContext("bench", 1, stage, i, 0),
        )
        for i, k in enumerate(senders)
    ]
    return member, senders, inbox


def aggregation(
    s: Setting, d: int, sample: int, seed: int = 0, *, all_members: bool = False
) -> Cost:
    """The aggregation stage (one cluster of everybody) for a ``d``-entry update.

    ``all_members``: every one of the ``c`` members opens its own inbox of ``N - 1``
    envelopes (fresh uniform shares from the same senders, sealed to that member's key,
    untimed) and sums it, each timed; ``member_s`` is then the mean over all ``c``."""
    spec = s.params.aggregation_field
    code = LagrangeCode(spec.field, s.aggregation.k, s.aggregation.t, s.members)
    length, prime = code.chunk_length(d), spec.prime
    rng = DeterministicRandom(seed)
    recipients = [generate_keypair(rng) for _ in range(s.members)]
    sender = _warm_ring(generate_keypair(rng), recipients, "aggregation")
    gen = np.random.default_rng(seed)
    code.share(spec.field.asarray(np.zeros(d, dtype=np.int64)), rng)  # encoding matrix, once
    sizes: list[int] = []

    updates = [gen.normal(0, 0.01, d) for _ in range(sample)]  # training's output: untimed

    def participant(k: int) -> None:  # production randomness for rounding and masks
        q = prepare_update(updates[k], spec, l2_clip=s.params.l2_clip, rng=SystemRandom())
        shares = code.share(q, SystemRandom())
        payloads = pack_field_vectors(shares, prime=prime)
        sizes.append(len(_seal_all(sender, recipients, payloads, "aggregation")[0]))

    first_s = cpu(lambda: participant(0))  # fresh pages for every buffer; reported
    share_s = sum(cpu(lambda k=k: participant(k)) for k in range(sample)) / sample

    member_keys, senders, inbox = _member_inbox(s, spec, length, "aggregation", rng)
    member = _warm_ring(member_keys, senders, "aggregation")
    own = rng.field_elements(prime, length)

    def member_work() -> None:
        opened = _open_all(member, senders, inbox, prime, length, "aggregation")
        opened[s.n - 1] = own
        member_sums(spec.field, opened, [tuple(range(s.n))])

    cold_s = cpu(member_work)  # a fresh process: its buffers' pages are faulted in first
    member_s = cpu(member_work)
    member_times = [member_s]
    if all_members:
        del inbox
        for _ in range(1, s.members):  # every other member, its own keys and shares
            keys_j, _, inbox_j = _member_inbox(s, spec, length, "aggregation", rng, senders)
            ring_j = _warm_ring(keys_j, senders, "aggregation")

            def work_j(ring: KeyRing = ring_j, box: list[bytes] = inbox_j) -> None:
                opened = _open_all(ring, senders, box, prime, length, "aggregation")
                opened[s.n - 1] = own
                member_sums(spec.field, opened, [tuple(range(s.n))])

            member_times.append(cpu(work_j))
            del inbox_j
        member_s = sum(member_times) / len(member_times)

    bound = spec.quantum_bound()
    total = np.zeros(d, dtype=np.int64)
    for _ in range(s.n):  # the plaintext sum of N quantized updates
        total += gen.integers(-bound, bound + 1, d)
    rows = code.share(spec.field.asarray(total), rng)  # members' results, by linearity
    results = {j: rows[j] for j in range(s.members)}
    decoded: list[np.ndarray] = []
    decode_s = cpu(lambda: decoded.append(decode_cluster_sum(code, results, length=d)[0]))
    assert np.array_equal(decoded[0], total), "aggregation decode differs from the plaintext sum"
    result_bytes = len(pack_field_vector(rows[0], prime=prime))
    if all_members:
        who = (
            f"all {s.members} members run, mean (max {max(member_times):.3f} s, first "
            f"member's cold run {cold_s * 1e3:.0f} ms not counted)"
        )
    else:
        who = f"one member, second run (first {cold_s * 1e3:.0f} ms)"
    how = (
        f"share: mean of {sample} after a first run of {first_s * 1e3:.1f} ms; member: uniform "
        f"shares, {who}; decode: sharing of the sum"
    )
    return Cost(share_s, member_s, decode_s, sizes[0], result_bytes, how)


def _refs(n: int) -> ReferenceSets:
    groups = np.array_split(np.arange(n), CLUSTERS)
    membership = Membership(
        tuple((c, tuple(int(i) for i in g)) for c, g in enumerate(groups)),
        tuple((c, tuple(int(i) for i in g[: len(g) // 2])) for c, g in enumerate(groups)),
        CLUSTERS,
    )
    built = membership.reference_sets(
        range(n), min_aggregation_size=1, min_reference_size=3, salt="bench"
    )
    assert built is not None
    return built


def distances(s: Setting, sample: int, real: bool, seed: int = 1) -> Cost:
    """The distance stage: r = 128, 8 clusters and their 8 probes."""
    spec = s.params.clustering_field
    code = LagrangeCode(spec.field, 1, s.clustering.t, s.members)
    prime, r = spec.prime, REDUCED_DIM
    rng = DeterministicRandom(seed)
    refs = _refs(s.n)
    vectors = np.random.default_rng(seed).normal(0, 0.5, (s.n, r))
    recipients = [generate_keypair(rng) for _ in range(s.members)]
    sender = _warm_ring(generate_keypair(rng), recipients, "distances")
    code.share(quantize(vectors[0], code.field, bits=spec.bits, clip=spec.clip), rng)  # warm
    sizes: list[int] = []

    def participant(i: int) -> None:
        q = quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip)
        shares = code.share(q, SystemRandom())
        payloads = pack_field_vectors(shares, prime=prime)
        sizes.append(len(_seal_all(sender, recipients, payloads, "distances")[0]))

    first_s = cpu(lambda: participant(0))  # fresh pages for every buffer; reported
    share_s = sum(cpu(lambda i=i: participant(i)) for i in range(sample)) / sample

    member_keys, senders, inbox = _member_inbox(s, spec, r, "distances", rng)
    member = _warm_ring(member_keys, senders, "distances")
    cold_s = cpu(lambda: _open_all(member, senders, inbox, prime, r, "distances"))
    open_s = cpu(lambda: _open_all(member, senders, inbox, prime, r, "distances"))
    if real:
        by_member = np.empty((s.members, s.n, r), dtype=np.int64)
        for i in range(s.n):  # every participant's real shares (untimed: costed above)
            q = quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip)
            by_member[:, i, :] = code.share(q, rng)
        results: dict[int, np.ndarray] = {}

        def compute(j: int) -> None:
            results[j] = coded_distances(code.field, dict(enumerate(by_member[j])), refs)

        compute_s = sum(cpu(lambda j=j: compute(j)) for j in range(s.members)) / s.members
        del by_member
        decoded: list[np.ndarray] = []

        def decode() -> None:
            coded, _ = decode_distances(code, results, refs, spec)
            decoded.append(coded.point)

        decode_s = cpu(decode)
        quantized = np.round(np.clip(vectors, -spec.clip, spec.clip) * spec.scale) / spec.scale
        plain = plaintext_distances(quantized, refs)
        np.testing.assert_allclose(decoded[0], plain.point, rtol=1e-9, atol=1e-9)
        how = f"share: mean of {sample} after a first run of {first_s * 1e3:.1f} ms"
        how += f"; member: all {s.members} real; decode: real, checked"
        how += f"; opening: second run (first {cold_s * 1e3:.0f} ms)"
        result_len = refs.result_length
    else:
        uniform = {i: rng.field_elements(prime, r) for i in range(s.n)}
        compute_s = sum(cpu(lambda: coded_distances(code.field, uniform, refs)) for _ in range(2))
        compute_s /= 2
        case = make_case(s.members, "distance", refs.result_length, 0, code=code)
        assert (case.code.n, case.code.t) == (s.members, s.clustering.t)
        decode_s = cpu(lambda: case.code.decode(case.evaluations, degree=2))
        how = f"share: mean of {sample} after a first run of {first_s * 1e3:.1f} ms"
        how += "; member: uniform shares; decode: random codeword"
        how += f"; opening: second run (first {cold_s * 1e3:.0f} ms)"
        result_len = refs.result_length
    result_bytes = 24 + result_len * 8
    return Cost(share_s, open_s + compute_s, decode_s, sizes[0], result_bytes, how)


def _mb(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def as_row(s: Setting, c: Cost, code: CodeSpec, rss_mb: float) -> dict[str, Any]:
    """One table row as JSON: CPU seconds per role and summed, bytes per role, memory."""
    return {
        "label": s.label,
        "n": s.n,
        "c": s.members,
        "k": code.k,
        "t": code.t,
        **asdict(c),
        "path_s": c.path(),
        "total_s": c.total(s),
        "bytes_up_per_participant": s.members * c.envelope_bytes,
        "bytes_in_per_member": (s.n - 1) * c.envelope_bytes,
        "bytes_results": s.members * c.result_bytes,
        "peak_rss_mb": rss_mb,
    }


def report(title: str, rows: list[tuple[Setting, Cost]]) -> None:
    print(f"\n== {title}")
    print(
        f"{'setting':<25} {'N':>5} {'c':>4} {'K':>4} {'T':>4} {'envelopes':>10} "
        f"{'MB up/part':>10} {'MB in/memb':>10} {'MB results':>10} {'share s':>8} "
        f"{'member s':>8} {'decode s':>8} {'path s':>7} {'total s':>8}"
    )
    for s, c in rows:
        code = s.aggregation if "aggregation" in title else s.clustering
        envelopes = s.n * s.members - s.members
        print(
            f"{s.label:<25} {s.n:>5} {s.members:>4} {code.k:>4} {code.t:>4} {envelopes:>10,} "
            f"{_mb(s.members * c.envelope_bytes):>10} {_mb((s.n - 1) * c.envelope_bytes):>10} "
            f"{_mb(s.members * c.result_bytes):>10} {c.share_s:>8.4f} {c.member_s:>8.3f} "
            f"{c.decode_s:>8.3f} {c.path():>7.2f} {c.total(s):>8.1f}"
        )
    for s, c in rows:
        print(f"  {s.label}: {c.how}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, d = 8192 (smoke run)")
    parser.add_argument("--n", type=int, default=1000, help="participants (default 1000)")
    parser.add_argument("--d", type=int, default=100_000, help="update length (default 100000)")
    parser.add_argument("--sample", type=int, default=3, help="participants timed per setting")
    parser.add_argument("--collusion", type=float, default=0.25, help="f_c (default 0.25)")
    parser.add_argument("--dropout", type=float, default=0.25, help="f_d (default 0.25)")
    parser.add_argument(
        "--real-upto", type=int, default=300, help="largest all-to-all N run for real"
    )
    parser.add_argument(
        "--also-collusion", type=float, default=0.1, help="second f_c for the committee rows"
    )
    parser.add_argument(
        "--committee-only", action="store_true", help="no all-to-all rows (large N)"
    )
    parser.add_argument(
        "--all-members",
        action="store_true",
        help="aggregation: run every committee member on its own inbox (not one sampled)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    retain_freed_memory()  # as the daemon and the coordinator do (secfpp/process/memory.py)
    n, d = (200, 8192) if args.quick else (args.n, args.d)
    compare = [m for m in ([50, 100] if args.quick else [100, 300]) if m < n] + [n]
    if args.committee_only:
        compare = [n]
    fractions = [args.collusion] + ([args.also_collusion] if args.also_collusion else [])
    print(
        f"CPU seconds, one BLAS thread, shared machine (ratios within one run are the steady "
        f"figure). N = {n}, d = {d}, r = {REDUCED_DIM}, f_d = {args.dropout}."
    )
    settings = []
    for fc in fractions:
        settings.append((fc, setting(n, collusion=fc, dropout=args.dropout, committee=True)))
        if not args.committee_only:
            settings.append((fc, setting(n, collusion=fc, dropout=args.dropout, committee=False)))
    settings += [
        (
            args.collusion,
            setting(m, collusion=args.collusion, dropout=args.dropout, committee=False),
        )
        for m in compare[:-1]
    ]
    out: dict[str, Any] = {
        "n": n,
        "d": d,
        "r": REDUCED_DIM,
        "dropout": args.dropout,
        "sample": args.sample,
        "timer": "cpu",
        "aggregation": [],
        "distances": [],
        "distances_refused": None,
    }
    agg = []
    for _, s in settings:
        agg.append((s, aggregation(s, d, args.sample, all_members=args.all_members)))
        out["aggregation"].append(as_row(s, agg[-1][1], s.aggregation, peak_rss_mb()))
    report(f"aggregation stage, d = {d} (f_c as in each setting's T)", agg)
    dist = []
    for _, s in settings:
        refused = distance_refusal(s.n)
        if refused is not None:
            # no federation of this N has a distance stage with the default clip; its cost
            # does not depend on the clip, so it is timed on _params' lowered one, with
            # uniform shares and a random codeword (as the all-to-all rows at large N)
            out["distances_refused"] = f"N = {s.n}: {refused}"
            dist.append((s, distances(s, args.sample, real=False)))
            row = as_row(s, dist[-1][1], s.clustering, peak_rss_mb())
            out["distances"].append({**row, "clip_lowered": True})
            continue
        real = s.members < s.n or s.n <= args.real_upto
        dist.append((s, distances(s, args.sample, real=real)))
        out["distances"].append(as_row(s, dist[-1][1], s.clustering, peak_rss_mb()))
    if out["distances_refused"]:
        print(f"\n== distance stage refused by the parameters: {out['distances_refused']}")
    if dist:
        report(f"distance stage, r = {REDUCED_DIM}, {CLUSTERS} clusters + probes", dist)
    print(f"\npeak resident memory of this process: {peak_rss_mb():,.0f} MB")
    first = first_contact_us()
    print(
        f"\nShares are sealed and opened through warm key rings (steady state). The first "
        f"contact with a peer adds {first:.0f} us per envelope and side (X25519 + "
        f"HKDF-Extract), once per pair for the federation's lifetime; in a first round:"
    )
    for _, s in settings:
        pairs = (s.n - 1) * s.members
        print(
            f"  {s.label}: +{s.members * first / 1e3:.1f} ms per participant, "
            f"+{(s.n - 1) * first / 1e3:.1f} ms per member, +{2 * pairs * first / 1e6:.1f} s "
            f"summed over the federation"
        )
    for fc, s in settings:
        if s.members < s.n:
            plan = plan_committee(
                s.n, collusion_fraction=fc, dropout_fraction=args.dropout, size=s.members
            )
            bits = f"2^{np.log2(float(plan.failure)):.1f}" if plan.failure else "exactly 0"
            print(
                f"\n{s.label}: {plan.colluders} colluders among {s.n}; P[more than T = "
                f"{plan.t} in the committee] = {float(plan.failure):.3g} ({bits}); tolerates "
                f"{plan.dropouts} member dropouts"
            )
            out.setdefault("plans", []).append(
                {
                    "label": s.label,
                    "collusion": fc,
                    "c": s.members,
                    "colluders": plan.colluders,
                    "t": plan.t,
                    "failure": float(plan.failure),
                    "dropouts": plan.dropouts,
                }
            )
    out["first_contact_us"] = first
    out["peak_rss_mb"] = peak_rss_mb()
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
