"""The coordinator tests' simulated participants, settings and problem-document asserts.

A :class:`SimParticipant` does what the participant daemon will do, with the crypto
core: LCC-share its reduced prompt ``x_i`` and its update ``g_i``, seal one envelope
per recipient and kind, open its inbox, check the request (DESIGN.md section 6) and
upload coded distances or member-set sums. It keeps what it uploaded, so a retry sends
identical bytes, and it remembers its shares so tests can look for them in the database.

A :meth:`FederationHarness.twin` continues a federation on another client whose database
is a copy of the first one's: a test module can build a federation (enrolled, or past
its first round) once and give each test a copy (``tests/coordinator/test_metrics.py``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np

from secfpp.coordinator.settings import Settings
from secfpp.crypto.aggregation import clip_update, member_sums, prepare_update
from secfpp.crypto.quantize import quantize
from secfpp.crypto.refset_rules import check_beacon_probes
from secfpp.crypto.refusal import (
    aggregation_request_digest,
    check_aggregation_request,
    check_distance_request,
    check_zero_contributors,
    distance_request_digest,
)
from secfpp.crypto.rerandomize import (
    ZeroSharing,
    checked_distances,
    expand_seed,
    rerandomized_distances,
)
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets, coded_distances
from secfpp.crypto.transport import (
    ShareContext,
    generate_keypair,
    load_public_key,
    open_share,
    public_key_bytes,
    seal_share,
)
from secfpp.crypto.wire import pack_field_matrix, pack_field_vector, unpack_field_vector
from secfpp.federation import FederationConfig
from secfpp.participant.rerandomize import check_zero_sharing_length, zero_sharing_length
from tests.support import federations
from tests.support.common import ADMIN, ADMIN_TOKEN, b64d, b64e

N = 8


def federation_request(**overrides: Any) -> dict[str, Any]:
    """N = 8; codes tolerating 3 dropouts in total (thresholds 5 and 5), T = 1."""
    body = federations.federation_body(
        "test-federation",
        n=N,
        n_ctx=4,
        dim=8,
        init_seed=7,
        reduced_dim=16,
        dropout_fraction=0.375,
        collusion_fraction=0.125,
        deadline_s=60,
        # the simulated participants send prompt-like x_i (group_vector), so the
        # prompt signal's split rules apply (docs/protocol.md, "What SecPC clusters")
        reduction={"signal": "prompt"},
        operators_see_distances=True,
    )
    body.update(overrides)  # top-level keys replace the preset's
    return body


def group_vector(index: int, dim: int = 16) -> np.ndarray:
    """Reduced prompts of two well-separated groups: 0..3 near +0.5, 4..7 near -0.5."""
    centre = 0.5 if index < N // 2 else -0.5
    noise = DeterministicRandom(f"x|{index}").standard_normal(dim) * 0.05
    return centre + noise


def update_vector(index: int, round_number: int, size: int) -> np.ndarray:
    return DeterministicRandom(f"g|{index}|{round_number}").standard_normal(size) * 0.1


class CountedRandom(DeterministicRandom):
    """:class:`DeterministicRandom` (the same stream) that counts the bytes drawn, so that a
    twin can continue the stream where this one is (:meth:`SimParticipant.twin`)."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed)
        self.drawn = 0

    def random_bytes(self, n: int) -> bytes:
        out = super().random_bytes(n)
        self.drawn += n
        return out


@dataclass
class SimParticipant:
    client: httpx.Client
    name: str
    x_of: Callable[[int], np.ndarray] = group_vector
    token: str = ""
    index: int = -1
    participant_id: str = ""
    config: FederationConfig | None = None
    federation_id: str = ""
    sent: dict[tuple[int, str], Any] = field(default_factory=dict)
    digests: dict[tuple[int, str], str] = field(default_factory=dict)
    shares: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)
    updates: dict[int, np.ndarray] = field(default_factory=dict)
    distance_tasks: dict[int, dict[str, Any]] = field(default_factory=dict)
    zero_lengths: dict[int, int] = field(default_factory=dict)  # round -> its sharing task's
    zero_offset: int = 0
    """A cheating contributor when nonzero: its zero-sharings take this value at the data
    point on every output (not on the check mask), which the offset check must catch."""

    def __post_init__(self) -> None:
        self.keys = generate_keypair(DeterministicRandom(f"key|{self.name}"))
        self.rng = CountedRandom(f"sim|{self.name}")

    def twin(self, client: httpx.Client) -> SimParticipant:
        """This participant on ``client``: the same key pair and token, a copy of everything
        it recorded, and its random stream at the same position (it goes on exactly as this
        one would have)."""
        kept = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("client", "x_of")
        }
        twin = SimParticipant(client, x_of=self.x_of, **kept)
        twin.rng.random_bytes(self.rng.drawn)
        return twin

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def enroll(self, enrollment_token: str) -> None:
        r = self.client.post(
            "/v1/enroll",
            json={
                "enrollment_token": enrollment_token,
                "display_name": self.name,
                "public_key": b64e(public_key_bytes(self.keys.public)),
            },
        )
        assert r.status_code == 201, r.text
        body = r.json()
        self.token, self.index = body["api_token"], body["index"]
        self.participant_id, self.federation_id = body["participant_id"], body["federation_id"]
        me = self.client.get("/v1/participants/me", headers=self.headers).json()
        self.config = FederationConfig.model_validate(me["config"])

    def task(self) -> dict[str, Any]:
        r = self.client.get("/v1/participants/me/task", headers=self.headers)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def step(self) -> str:
        """Do whatever the task asks; returns the action."""
        task = self.task()
        action = str(task["action"])
        if action == "share":
            self.share(task)
        elif action == "compute_distances":
            self.compute_distances(task)
        elif action == "compute_sums":
            self.compute_sums(task)
        return action

    # -- sharing ---------------------------------------------------------------------------
    def share_body(self, task: dict[str, Any]) -> dict[str, Any]:
        number = task["round"]
        if (number, "shares") in self.sent:
            return dict(self.sent[(number, "shares")])
        assert self.config is not None
        params = self.config.crypto_params()
        peers = {p["index"]: load_public_key(b64d(p["public_key"])) for p in task["peers"]}
        envelopes = []
        seeded = ZeroSharing(params.clustering_lcc()).seeded_points
        for spec in task["sharing"]["envelopes"]:
            if spec["kind"] in ("zero", "zero-seed"):  # re-randomizing contribution
                length = spec["vector_length"]  # the round's bound, then the check's mask
                check_zero_sharing_length(params, length)  # as the daemon checks it
                self.zero_lengths[number] = length
                key = (number, "zero")
                if key not in self.shares:  # seeds below `seeded`, vectors from it on
                    values = None
                    if self.zero_offset:
                        values = np.full(length, self.zero_offset, dtype=np.int64)
                        values[-1] = 0
                    self.shares[key] = ZeroSharing(params.clustering_lcc()).contribute_seeded(
                        length, self.rng, values=values
                    )
                contribution = self.shares[key]
                for recipient in task["sharing"]["recipients"]:
                    if (recipient < seeded) != (spec["kind"] == "zero-seed"):
                        continue
                    plain = (
                        contribution.seeds[recipient]
                        if recipient < seeded
                        else pack_field_vector(
                            contribution.derived[recipient - seeded], prime=spec["prime"]
                        )
                    )
                    context = ShareContext(
                        self.federation_id, number, spec["context_stage"], self.index, recipient
                    )
                    sealed = seal_share(
                        self.keys.private, peers[recipient], plain, context=context, rng=self.rng
                    )
                    envelopes.append(
                        {"recipient": recipient, "kind": spec["kind"], "ciphertext": b64e(sealed)}
                    )
                continue
            if spec["kind"] == "prompt":
                f = params.clustering_field
                vector = quantize(self.x_of(self.index), f.field, bits=f.bits, clip=f.clip)
                shares = params.clustering_lcc().share(vector, self.rng)
            else:
                update = update_vector(self.index, number, self.config.prompt.size)
                self.updates[number] = clip_update(
                    update, l2_clip=params.l2_clip, entry_clip=params.aggregation_field.clip
                )
                vector = prepare_update(
                    update, params.aggregation_field, l2_clip=params.l2_clip, rng=self.rng
                )
                shares = params.aggregation_lcc().share(vector, self.rng)
            self.shares[(number, spec["kind"])] = shares
            for recipient in task["sharing"]["recipients"]:
                context = ShareContext(
                    self.federation_id, number, spec["context_stage"], self.index, recipient
                )
                packed = pack_field_vector(shares[recipient], prime=spec["prime"])
                sealed = seal_share(
                    self.keys.private, peers[recipient], packed, context=context, rng=self.rng
                )
                envelopes.append(
                    {"recipient": recipient, "kind": spec["kind"], "ciphertext": b64e(sealed)}
                )
        body = {"envelopes": envelopes}
        self.sent[(number, "shares")] = body
        return body

    def share(self, task: dict[str, Any]) -> httpx.Response:
        r = self.client.post(
            f"/v1/participants/me/rounds/{task['round']}/shares",
            json=self.share_body(task),
            headers=self.headers,
        )
        assert r.status_code == 200, r.text
        return r

    # -- coded results ---------------------------------------------------------------------
    def open_inbox(self, number: int, kind: str) -> dict[int, np.ndarray]:
        assert self.config is not None
        r = self.client.get(f"/v1/participants/me/rounds/{number}/inbox", headers=self.headers)
        assert r.status_code == 200, r.text
        task = self.task()
        peers = {p["index"]: load_public_key(b64d(p["public_key"])) for p in task["peers"]}
        c = self.config.crypto
        prime = c.aggregation_field.prime if kind == "update" else c.clustering_field.prime
        length = {
            "prompt": self.config.prompt_share_length(),
            "update": self.config.update_share_length(),
            "zero": self.zero_lengths.get(number, zero_sharing_length(self.config.crypto_params())),
        }[kind]
        stage = f"sharing-{kind}"
        out = {}
        for env in r.json()["envelopes"]:
            if env["kind"] != kind:
                continue
            context = ShareContext(self.federation_id, number, stage, env["sender"], self.index)
            plain = open_share(
                self.keys.private, peers[env["sender"]], b64d(env["ciphertext"]), context=context
            )
            out[env["sender"]] = unpack_field_vector(plain, prime=prime, expected_length=length)
        for env in r.json()["envelopes"]:  # contributions sent as seeds (crypto/rerandomize.py)
            if kind != "zero" or env["kind"] != "zero-seed":
                continue
            context = ShareContext(
                self.federation_id, number, "sharing-zero-seed", env["sender"], self.index
            )
            seed = open_share(
                self.keys.private, peers[env["sender"]], b64d(env["ciphertext"]), context=context
            )
            out[env["sender"]] = expand_seed(seed, prime, length)
        return out

    def distance_payload(self, task: dict[str, Any]) -> bytes:
        number = task["round"]
        if (number, "distances") in self.sent:
            return bytes(self.sent[(number, "distances")])
        assert self.config is not None
        d = task["distances"]
        named = d.get("contributors")
        refs = ReferenceSets(
            participants=tuple(d["participants"]),
            clusters=tuple((c["cluster"], tuple(c["members"])) for c in d["clusters"]),
            probes=tuple((c["cluster"], tuple(c["members"])) for c in d["probes"]),
            contributors=None if named is None else tuple(named),
        )
        if d.get("contribution_length") is not None:  # also when not asked to contribute
            self.zero_lengths[number] = int(d["contribution_length"])
        shares = self.open_inbox(number, "prompt")
        params = self.config.crypto_params()
        check_distance_request(
            refs, have_shares_from=shares, min_reference_size=params.min_reference_size
        )
        # probes drawn from the round's beacon (crypto.refset_rules), as a daemon checks
        assert d["beacon"] is not None or not refs.probes
        if d["beacon"] is not None:
            check_beacon_probes(
                refs,
                federation_id=self.federation_id,
                round_number=number,
                beacon=bytes.fromhex(d["beacon"]),
                min_reference_size=params.min_reference_size,
            )
        self.distance_tasks[number] = task
        challenge = d.get("challenge")
        self.digests[(number, "distances")] = distance_request_digest(
            self.federation_id, number, refs, challenge=challenge
        )
        field_ = params.clustering_field.field
        if self.config.crypto.rerandomize_distances:  # the request's contributors' zeros
            zeros = self.open_inbox(number, "zero")
            check_zero_contributors(  # as the daemon checks them
                refs,
                have_contributions_from=zeros,
                colluders=params.colluders_among_participants,
            )
            if challenge is not None:  # outputs, then the offset checks
                values = checked_distances(field_, shares, zeros, refs, bytes.fromhex(challenge))
            else:
                values = rerandomized_distances(field_, shares, zeros, refs)
        else:
            values = coded_distances(field_, shares, refs)
        payload = pack_field_vector(values, prime=d["prime"])
        self.sent[(number, "distances")] = payload
        return payload

    def compute_distances(self, task: dict[str, Any]) -> httpx.Response:
        return self.upload_result(task["round"], "distances", self.distance_payload(task))

    def sums_payload(self, task: dict[str, Any]) -> bytes:
        number = task["round"]
        if (number, "aggregation") in self.sent:
            return bytes(self.sent[(number, "aggregation")])
        assert self.config is not None
        a = task["aggregation"]
        sets = [tuple(s["members"]) for s in a["sets"]]
        shares = self.open_inbox(number, "update")
        params = self.config.crypto_params()
        check_aggregation_request(
            sets, min_size=params.min_aggregation_size, have_shares_from=shares
        )
        self.digests[(number, "aggregation")] = aggregation_request_digest(
            self.federation_id, number, sets
        )
        sums = member_sums(params.aggregation_field.field, shares, sets)
        payload = pack_field_matrix(sums, prime=a["prime"])
        self.sent[(number, "aggregation")] = payload
        return payload

    def compute_sums(self, task: dict[str, Any]) -> httpx.Response:
        return self.upload_result(task["round"], "aggregation", self.sums_payload(task))

    def upload_result(self, number: int, stage: str, payload: bytes) -> httpx.Response:
        r = self.client.post(
            f"/v1/participants/me/rounds/{number}/results/{stage}",
            json={"payload": b64e(payload)},
            headers={**self.headers, "X-Request-Digest": self.digests.get((number, stage), "")},
        )
        assert r.status_code == 200, r.text
        return r


class FederationHarness(federations.AdminRounds):
    """A federation with N simulated participants on one HTTP client."""

    group_vector = staticmethod(group_vector)
    admin = ADMIN

    def __init__(self, client: httpx.Client, **overrides: Any) -> None:
        self.client = client
        r = client.post("/v1/federations", json=federation_request(**overrides), headers=ADMIN)
        assert r.status_code == 201, r.text
        self.federation = r.json()
        self.id: str = self.federation["id"]
        n = self.federation["config"]["n_participants"]
        r = client.post(
            f"/v1/federations/{self.id}/enrollment-tokens", json={"count": n}, headers=ADMIN
        )
        assert r.status_code == 201, r.text
        self.sims = [SimParticipant(client, f"org-{i}") for i in range(n)]
        for sim, token in zip(self.sims, r.json()["tokens"], strict=True):
            sim.enroll(token)
        self.sims.sort(key=lambda s: s.index)

    def twin(self, client: httpx.Client) -> FederationHarness:
        """This federation on ``client``, whose database is a copy of this one's (nothing is
        sent): the participants are :meth:`SimParticipant.twin` copies."""
        twin = object.__new__(type(self))
        twin.client = client
        twin.federation = copy.deepcopy(self.federation)
        twin.id = self.id
        twin.sims = [sim.twin(client) for sim in self.sims]
        return twin

    def stage(self, number: int) -> str:
        return str(self.status(number)["stage"])

    def act(self, skip: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
        """Every participant not in ``skip`` performs its current task once."""
        return [sim.step() for sim in self.sims if sim.index not in skip]

    def run_round(
        self,
        skip: dict[str, set[int]] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> int:
        """Start a round and drive it to the end; ``skip[stage]`` stay silent in it;
        ``on_start(number)`` runs once the round started, before anybody acts."""
        skip = skip or {}
        number = self.start_round()
        if on_start is not None:
            on_start(number)
        for _ in range(6):
            stage = self.stage(number)
            if stage in ("published", "failed", "aborted"):
                return number
            self.act(skip.get(stage, set()))
        return number

    def prompts(self, number: int) -> dict[int, np.ndarray]:
        """Global prompt of every cluster in the generation round ``number`` published."""
        out = {}
        for sim in self.sims:
            r = self.client.get(f"/v1/participants/me/rounds/{number}/outcome", headers=sim.headers)
            assert r.status_code == 200, r.text
            body = r.json()
            if body["global_prompt"] is not None:
                out[body["cluster"]] = np.frombuffer(
                    b64d(body["global_prompt"]["data"]), dtype="<f8"
                )
        return out


def make_settings(db_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": db_url,
        "admin_token": ADMIN_TOKEN,
        "tick_interval_s": 0.2,
        "max_body_bytes": 256 * 1024,
        # The upload that completes a stage waits for its decode (in this process's job
        # worker) to finish, so a test reads the next stage right after it. The
        # production default (0.5 s) is shorter than a decode on a loaded 2-core machine
        # (PostgreSQL's worker picks the job up by polling): a test read "aggregation"
        # after the last upload and failed at random.
        "drive_wait_s": 30.0,
    }
    values.update(overrides)
    return Settings(**values)


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """A problem document with ``status`` and stable ``code``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = dict(response.json())
    assert body["code"] == code, body
    assert body["status"] == status
    assert body["type"].endswith(code)
    assert body["title"]
    return body


STORE_NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
"""The clock of the store-level tests' round rows (test_store.py, test_store_envelopes.py)."""
