"""The participant daemon's core loop: fetch the task, do the stage's work, upload.

Crash safety: every stage's work is committed to the state directory *before* it is
uploaded (training outputs, the exact share upload body, the exact coded-result payload
and its request digest), and the round's ``progress.json`` is the single commit point.
A daemon killed at any instant and started again re-sends the same bytes (uploads are
idempotent on the coordinator), never trains twice for one round, and never answers two
different requests for one stage.

Agreement before answering (docs/protocol.md section 7, "Equivocation", defence 3): the
digest of the request a coded stage's result answers is committed (``{stage}_digest``)
*before* this participant attests it (crypto.attestation), so it attests at most one
request per round and stage, across restarts too (the MACs are deterministic: a restarted
daemon re-sends the same attestation); the result is uploaded only once the participant
holds valid attestations of that digest from ``Q`` stage participants
(:attr:`crypto.params.CryptoParams.attestation_quorum`), polled at the coordinator's
``poll_after_s`` hint. When the stage's deadline (``seconds_left``, by the coordinator's
clock) comes before its next poll without a quorum it refuses (``no_quorum``); a stage
that closed first is recorded as refused ``no_quorum`` too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.attestation import Attestation, attest, valid_attesters
from secfpp.crypto.committee import CommitteeMismatchError
from secfpp.crypto.errors import RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refusal import (
    aggregation_request_digest,
    check_same_request,
    distance_request_digest,
)
from secfpp.crypto.rng import RandomSource, SystemRandom
from secfpp.crypto.transport import KeyRing, load_private_key
from secfpp.federation import FederationConfig
from secfpp.participant.client import CoordinatorClient, RequestRefusedError, b64d
from secfpp.participant.contributions import ContributionLog
from secfpp.participant.federation import federation_config
from secfpp.participant.protocol import (
    OpenedShares,
    aggregation_payload,
    aggregation_sets,
    committee_of,
    distance_payload,
    distance_request,
    open_inbox,
    open_zero_contributions,
    peer_keys,
    prompt_from_document,
    round_committee,
    share_body,
)
from secfpp.participant.refsets import answered_sets, check_distance_sets, load_answered
from secfpp.participant.rerandomize import (
    ZERO_KIND,
    check_zero_sharing_length,
    rerandomizes,
    zero_sharing_length,
)
from secfpp.participant.state import StateDir
from secfpp.wire.messages import Attestations, Task

__all__ = ["Engine", "TrainOutput", "Trainer"]

log = logging.getLogger(__name__)

#: Stages in which a round is over: its outcome is fetched, whatever this daemon's part.
ENDED = frozenset({"published", "failed", "aborted"})
#: 409 codes that mean "the round moved on without you": poll again, do not stop.
MOVED_ON = {"wrong_stage", "wrong_round", "participant_dropped", "not_expected"}
#: Federation states (the task's ``federation.state``) after which no round starts again.
FEDERATION_ENDED = frozenset({"finished", "aborted"})
#: A round directory's files that make up the personalized prompt: the cluster's
#: published global prompt, and the trainer's state after the round (global and local).
FINAL_FILES = ("global.npy", "state-global.npy", "state-local.npy")
#: How many rounds back the daemon keeps recorded beacon commitments (StateDir.BEACONS).
KEEP_BEACONS = 8
#: The longest wait the daemon takes from the coordinator's ``poll_after_s`` hint.
MAX_POLL_AFTER_S = 60.0
_SPREAD = random.SystemRandom()  # not a secret: spreads the polls of many daemons


def poll_interval(hint: float | None, own_s: float) -> float:
    """Seconds before the next task poll: the daemon's own interval ``own_s``, or the
    coordinator's ``poll_after_s`` hint (of a :class:`~secfpp.wire.messages.Task` or
    :class:`~secfpp.wire.messages.Attestations`) when that is longer (times a random factor
    in [0.9, 1.1], so that a large federation's polls do not arrive in step; at most 60 s,
    so a coordinator cannot park the daemon).

    A missing or non-finite hint counts as none.
    """
    if isinstance(hint, bool) or not isinstance(hint, int | float) or not math.isfinite(hint):
        return own_s
    if hint <= own_s:
        return own_s
    return max(own_s, min(float(hint) * _SPREAD.uniform(0.9, 1.1), MAX_POLL_AFTER_S))


@dataclass
class TrainOutput:
    """What local training of one round produced.

    Attributes:
        reduced: ``x_i`` (r,) for SecPC, or None if the strategy does not cluster.
        update: ``g_i`` (n_ctx * dim,) of the global prompt, or None (``local``).
        state: the trainer's own arrays after training (e.g. the local prompt).
        metrics: numbers only (loss, ...).
    """

    reduced: NDArray[np.float64] | None
    update: NDArray[np.float64] | None
    state: dict[str, NDArray[Any]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


class Trainer(Protocol):
    """Local prompt learning as the engine drives it."""

    def train(self, round_number: int, global_prompt: NDArray[np.float64] | None) -> TrainOutput:
        """Train on local data starting from ``global_prompt``."""
        ...

    def restore(self, state: dict[str, NDArray[Any]]) -> None:
        """Load the arrays of the last committed :class:`TrainOutput`."""
        ...

    def evaluate(self, global_prompt: NDArray[np.float64] | None) -> dict[str, float]:
        """Adopt the published global prompt and return held-out metrics (accuracy)."""
        ...


class Engine:
    """One participant's protocol loop over a :class:`CoordinatorClient`."""

    def __init__(
        self,
        client: CoordinatorClient,
        state: StateDir,
        trainer: Trainer,
        *,
        rng: RandomSource | None = None,
        poll_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.state = state
        self.trainer = trainer
        self.rng = rng or SystemRandom()
        self.poll_s = poll_s
        self._sleep = sleep
        self._waiting: Attestations | None = None
        """Set by a step that waits for its quorum of attestations: the last answer of
        the attestation read (its ``poll_after_s`` paces the next poll)."""
        self._say = on_progress or (lambda text: log.info("%s", text))
        ident = state.identity()
        self.federation_id: str = ident["federation_id"]
        self.participant_id: str = ident["participant_id"]
        self.index: int = int(ident["index"])
        client.token = ident["api_token"]
        self.private_key = load_private_key(state.private_key())
        # One ring for the process: one X25519 exchange per peer for the federation's
        # lifetime, not one per envelope (crypto.transport.KeyRing).
        self.key_ring = KeyRing(self.private_key)
        self.config: FederationConfig = federation_config(ident.get("config") or client.me().config)
        self.params: CryptoParams = self.config.crypto_params()
        self._beacon_log: dict[str, str] | None = None
        self._handled: set[int] = set()
        """Rounds whose outcome this process fetched (also those caught up late)."""
        self.ended: str = ""
        """Set when :meth:`run` returns: why it stopped and where the final prompt is."""
        total = self.config.rounds.total
        self.contributions = ContributionLog(
            client,
            state,
            self.rng,
            federation_id=self.federation_id,
            index=self.index,
            last_round=None if total is None else int(total),
        )
        self._restore_trainer()

    # -- per-round progress ----------------------------------------------------------------
    def _path(self, number: int, name: str) -> str:
        return f"rounds/{number}/{name}"

    def progress(self, number: int) -> dict[str, Any]:
        return self.state.read_object(self._path(number, "progress.json"), {})

    def _commit(self, number: int, progress: dict[str, Any]) -> None:
        self.state.write_json(self._path(number, "progress.json"), progress)
        self.state.save_progress(
            {"round": number, **{k: v for k, v in progress.items() if k in ("stage", "cluster")}}
        )

    def _restore_trainer(self) -> None:
        arrays = self.state.trained_state()  # a missing state file: StateError naming it
        if arrays:
            self.trainer.restore(arrays)

    # -- beacon commitments (docs/protocol.md section 11) ------------------------------------
    def _beacons(self) -> dict[str, str]:
        if self._beacon_log is None:
            self._beacon_log = dict(self.state.read_object(StateDir.BEACONS, {}))
        return self._beacon_log

    def _record_beacon(self, task: Task) -> None:
        """Keep the first commitment seen for each future round (``next_beacon``).

        A coordinator that shows another commitment for the same round later is not
        believed: the round's beacon must open the first one. Only the commitment to the
        round after the task's (round 1 before any round) is taken, so announcements of
        far-off rounds cannot push the recorded ones out.
        """
        announced = task.next_beacon
        if announced is None:
            return
        current = task.round
        try:
            number, commitment = announced.round, announced.commitment
            if len(bytes.fromhex(commitment)) != 32:
                raise ValueError("not 32 bytes")
            expected = 1 if current is None else current + 1
            if number != expected:
                raise ValueError(f"for round {number}, not the next round {expected}")
        except ValueError as err:
            log.warning("ignoring a malformed beacon commitment (%s)", err)
            return
        known = self._beacons()
        if str(number) in known:
            if known[str(number)] != commitment:
                log.warning(
                    "round %s: a second beacon commitment differs; keeping the first", number
                )
            return
        known[str(number)] = commitment
        for old in [k for k in known if int(k) < number - KEEP_BEACONS]:
            del known[old]
        self.state.write_json(StateDir.BEACONS, known)

    def _commitment(self, number: int) -> bytes | None:
        """The commitment to round ``number``'s beacon recorded before it started, if any."""
        recorded = self._beacons().get(str(number))
        return None if recorded is None else bytes.fromhex(recorded)

    # -- the loop --------------------------------------------------------------------------
    def step(self) -> Task:
        """Fetch the task and do its work once; returns the task."""
        self._waiting = None
        task = self.client.task()
        self._record_beacon(task)
        if self.params.has_committee:
            self.contributions.on_task(task)
        action = task.action
        if task.round is not None and task.stage in ENDED:
            if task.outcome_after_s > 0:  # its slot in the end-of-round spread comes later
                return task  # (poll_after_s points at it)
            action = "fetch_outcome"  # published, failed or aborted: whatever our part was
        if task.round is None or (task.uploaded and action != "fetch_outcome"):
            return task
        number = task.round
        self._catch_up(number)
        try:
            if action == "share":
                self._share(task, number)
            elif action == "compute_distances":
                self._coded(task, number, "distances")
            elif action == "compute_sums":
                self._coded(task, number, "aggregation")
            elif action == "fetch_outcome":
                self._outcome(number)
        except RequestRefusedError as exc:
            if exc.code in MOVED_ON:
                self._say(f"round {number}: {exc.code} ({exc.detail}); waiting for the next task")
            else:
                raise
        return task

    def _catch_up(self, current: int) -> None:
        """Handle the outcome of earlier rounds this participant took part in.

        The admin may start round ``n+1`` before this daemon polled round ``n``'s outcome;
        the outcome stays available, so it is fetched (and the metrics reported) late.
        """
        last = self.state.progress().get("round")
        if last is None or int(last) >= current:
            return
        if self.progress(int(last)).get("trained") and not self.progress(int(last)).get(
            "outcome_done"
        ):
            try:
                self._outcome(int(last))
            except RequestRefusedError as exc:
                log.warning("round %s: outcome unavailable: %s", last, exc)

    def run(self, *, rounds: int | None = None, until_complete: bool = True) -> int:
        """Loop until ``rounds`` outcomes were handled (or the federation's last round).

        Returns the number of rounds whose outcome this call handled.
        """
        seen: set[int] = set()
        total = self.config.rounds.total
        while True:
            task = self.step()
            number = task.round
            done = number is not None and bool(self.progress(number).get("outcome_done"))
            if number is not None and done:
                seen.add(number)
            # Also the rounds whose outcome _catch_up fetched: the next round may start (on
            # autopilot) before this daemon polled the previous one's outcome.
            handled = len(seen | self._handled)
            if number is not None and done:
                if rounds is not None and handled >= rounds:
                    self.ended = self._final_words(f"stopped after --rounds {rounds}")
                    return handled
                if until_complete and total is not None and number >= int(total):
                    self.ended = self._final_words("finished: rounds done")
                    return handled
            federation = task.federation
            if (
                until_complete
                and federation.state in FEDERATION_ENDED
                and (number is None or (task.stage in ENDED and not task.outcome_after_s))
            ):
                # The coordinator ended the federation (privacy budget spent, aborted by
                # the admin) and the last round is over: step() fetched its outcome.
                self.ended = self._final_words(federation.reason or "ended")
                return handled
            busy = (
                task.action in ("share", "compute_distances", "compute_sums") and not task.uploaded
            )
            if self._waiting is not None:  # attested; too few attestations yet
                self._sleep(poll_interval(self._waiting.poll_after_s, self.poll_s))
            elif not busy:
                self._sleep(poll_interval(task.poll_after_s, self.poll_s))

    def _final_words(self, why: str) -> str:
        """One line: why the daemon stops and where the personalized prompt is (the newest
        round directory with trained state: the cluster's global and the local prompt)."""
        rounds = self.state.round_numbers()
        published = [n for n in rounds if self.progress(n).get("outcome_stage") == "published"]
        trained = [n for n in rounds if self.progress(n).get("trained")]
        if not published and not trained:
            return f"federation {why}; this participant trained in no round, so there is no prompt"
        where = self.state.root / "rounds" / str((published or trained)[-1])
        files = [n for n in FINAL_FILES if (where / n).exists()]
        return (
            f"federation {why}; the final prompt is in {where} ({', '.join(files)}): "
            "'secfpp-participant export' writes it to one file"
        )

    # -- stages ----------------------------------------------------------------------------
    def _committee_ok(self, task: Task, number: int, stage: str) -> bool:
        """Check the round's committee announcement (committee rounds); refuse it if wrong.

        A refused announcement is recorded (committed first) and sent once; the daemon
        then shares and computes nothing in the round (the coordinator drops it).
        """
        progress = self.progress(number)
        committee_doc = None if task.committee is None else task.committee.model_dump(mode="json")
        announced = json.dumps(committee_doc, sort_keys=True)
        request = hashlib.sha256(announced.encode()).hexdigest()
        refusal = progress.get(f"{stage}_refusal")
        if isinstance(refusal, dict) and refusal.get("reason") == "committee_mismatch":
            if not refusal.get("sent"):
                self._send_refusal(number, stage, progress, refusal)
            return False
        try:
            committee = round_committee(
                task,
                params=self.params,
                federation_id=self.federation_id,
                index=self.index,
                commitment=self._commitment(number),
                evidence=self.contributions.evidence(number),
            )
        except CommitteeMismatchError as exc:
            self._refuse(number, stage, progress, request, exc, blamed=())
            return False
        if committee is not None and stage != "sharing" and self.index not in committee:
            self._say(f"round {number}: not on the committee; nothing to compute")
            return False
        return True

    def _share(self, task: Task, number: int) -> None:
        if not self._committee_ok(task, number, "sharing"):
            return
        sharing = task.sharing
        if sharing is None:
            raise ValueError(f"round {number}: the share task carries no sharing request")
        progress = self.progress(number)
        if not progress.get("trained"):
            self._say(f"round {number}: training (cluster {task.cluster})")
            out = self.trainer.train(number, prompt_from_document(task.global_prompt))
            for name, value in (("reduced", out.reduced), ("update", out.update)):
                if value is not None:
                    self.state.write_array(self._path(number, f"{name}.npy"), value)
            for name, value in out.state.items():
                self.state.write_array(self._path(number, f"state-{name}.npy"), value)
            progress.update(
                trained=True,
                state_arrays=sorted(out.state),
                train_metrics=out.metrics,
                cluster=task.cluster,
            )
            self._commit(number, progress)
        body_path = self._path(number, "shares.json")
        if not (self.state.root / body_path).exists():
            body = share_body(
                task,
                params=self.params,
                federation_id=self.federation_id,
                index=self.index,
                private_key=self.key_ring,
                reduced=self.state.read_array(self._path(number, "reduced.npy")),
                update=self.state.read_array(self._path(number, "update.npy")),
                rng=self.rng,
                noise=self.config.distributed_noise(self.params),  # distributed DP, else None
                distance_noise=self.config.distance_noise(self.params),  # distance-stage DP
            )
            self.state.write_bytes(body_path, json.dumps(body).encode())
            progress["sharing_specs"] = [spec.model_dump(mode="json") for spec in sharing.envelopes]
            self._commit(number, progress)
        else:
            body = self.state.read_object(body_path)
        self.client.upload_shares(number, body)
        recipients = len(sharing.recipients)
        whom = "committee members" if task.committee else "peers"
        self._say(f"round {number}: shares uploaded to {recipients} {whom}")

    def _opened(self, task: Task, number: int, kind: str) -> OpenedShares:
        specs = {s["kind"]: s for s in self.progress(number).get("sharing_specs", [])}
        if kind == "prompt":
            prime = self.params.clustering_field.prime
            length = self.params.clustering_lcc().chunk_length(self.params.reduced_dim)
        elif kind == ZERO_KIND:  # the round's length: from the request, else own task
            prime = self.params.clustering_field.prime
            asked = None if task.distances is None else task.distances.contribution_length
            length = (
                asked
                or int(specs.get(ZERO_KIND, {}).get("vector_length", 0))
                or zero_sharing_length(self.params)
            )
            check_zero_sharing_length(self.params, length)
        else:
            prime = self.params.aggregation_field.prime
            size = self.config.aggregation_length
            length = self.params.aggregation_lcc().chunk_length(size)
        inbox = self.client.inbox(self.participant_id, number)
        keys: dict[str, Any] = {
            "federation_id": self.federation_id,
            "index": self.index,
            "private_key": self.key_ring,
            "peers": peer_keys(task),
        }
        if kind == ZERO_KIND:  # vectors and seeds (participant/rerandomize.py)
            zeros = open_zero_contributions(inbox, prime=prime, length=length, **keys)
            if zeros.failed:
                self._say(f"round {number}: zero-sharings from {list(zeros.failed)} failed")
            return zeros
        opened = open_inbox(
            inbox,
            kind=kind,
            context_stage=specs.get(kind, {}).get("context_stage", f"sharing-{kind}"),
            prime=prime,
            share_length=length,
            **keys,
        )
        if opened.failed:
            self._say(f"round {number}: shares from {list(opened.failed)} failed authentication")
        return opened

    def _request_digest(self, task: Task, number: int, stage: str) -> str:
        """Digest of the request the task holds for ``stage`` (as the coordinator has it)."""
        committee = committee_of(task)
        if stage == "distances":
            return distance_request_digest(
                self.federation_id,
                number,
                distance_request(task),
                committee=committee,
                challenge=task.distances.challenge if task.distances else None,
            )
        return aggregation_request_digest(
            self.federation_id, number, aggregation_sets(task), committee=committee
        )

    def _coded(self, task: Task, number: int, stage: str) -> None:
        """Answer the stage's request once, or refuse it (naming whom it blames).

        A refusal is tied to the request it refuses: when the coordinator plans the stage
        again (a blamed sender was dropped) the new request is tried afresh. A request
        other than the one already answered is refused (``conflicting_request``).
        """
        if not self._committee_ok(task, number, stage):
            return
        progress = self.progress(number)
        if progress.get(f"{stage}_refused"):  # state written before refusals were per request
            return
        request = self._request_digest(task, number, stage)
        refusal = progress.get(f"{stage}_refusal")
        if isinstance(refusal, dict) and refusal.get("request") == request:
            if not refusal.get("sent"):  # interrupted between recording and sending it
                self._send_refusal(number, stage, progress, refusal)
            return
        payload_path = self._path(number, f"{stage}.bin")
        digest_key = f"{stage}_digest"
        answered = progress.get(digest_key)
        payload = self.state.read_bytes(payload_path) if answered is not None else None
        if answered is not None and answered != request:
            error = RefusalError(
                "conflicting_request", f"a different {stage} request was already answered"
            )
            self._refuse(number, stage, progress, request, error, blamed=())
            return
        if payload is None:
            kind = "prompt" if stage == "distances" else "update"
            opened = self._opened(task, number, kind)
            failed = opened.failed
            try:
                if stage == "distances":
                    check_distance_sets(
                        task,
                        self.params,
                        federation_id=self.federation_id,
                        previous=load_answered(self.progress(number - 1).get("distances_sets")),
                        commitment=self._commitment(number),
                    )
                if stage != "distances":
                    payload, digest = aggregation_payload(task, opened, self.params)
                elif rerandomizes(self.config):  # the federation's choice, not the task's
                    zeros = self._opened(task, number, ZERO_KIND)
                    failed = tuple(sorted(set(failed) | set(zeros.failed)))
                    payload, digest = distance_payload(
                        task,
                        opened,
                        self.params,
                        zeros=zeros,
                        noisy=self.config.distance_noise(self.params) is not None,
                    )
                else:
                    payload, digest = distance_payload(task, opened, self.params)
                check_same_request(answered, digest)
            except RefusalError as exc:
                blamed = failed if exc.reason == "missing_share" else ()
                self._refuse(number, stage, progress, request, exc, blamed=blamed)
                return
            self.state.write_bytes(payload_path, payload)
            progress[digest_key] = digest
            if stage == "distances":  # the next round's sets must follow from these
                progress["distances_sets"] = answered_sets(task)
            self._commit(number, progress)  # the attest-once record: before any attestation
        if not self._agreed(task, number, stage, progress, str(progress[digest_key])):
            return
        self.client.upload_result(number, stage, payload, str(progress[digest_key]))
        self._say(f"round {number}: {stage} result uploaded")

    def _stage_members(self, task: Task) -> list[int]:
        """The stage's ``P`` participants: the committee, or every code point ``0..N-1``."""
        announced = task.committee
        if announced is not None:
            return sorted(announced.members)
        return list(range(self.params.n_participants))

    def _agreed(
        self, task: Task, number: int, stage: str, progress: dict[str, Any], digest: str
    ) -> bool:
        """Attest ``digest`` (the committed answer's request) once, then whether a quorum of
        valid attestations of it is held (module docstring). Not yet: ``self._waiting`` is
        set, or past the stage's deadline the request is refused with ``no_quorum``."""
        quorum_key, sent_key = f"{stage}_quorum", f"{stage}_attested"
        if progress.get(quorum_key):  # reached before a restart
            return True
        members = self._stage_members(task)
        peers = peer_keys(task)
        if progress.get(sent_key) != digest:
            macs = attest(
                self.key_ring,
                peers,
                federation_id=self.federation_id,
                round_number=number,
                stage=stage,
                sender=self.index,
                digest=digest,
                recipients=[m for m in members if m in peers],
            )
            self.client.attest(number, stage, digest, macs)
            progress[sent_key] = digest
            self._commit(number, progress)
            self._say(f"round {number}: {stage} request attested to {len(macs)} participants")
        try:
            doc = self.client.attestations(number, stage)
        except RequestRefusedError as exc:
            if exc.code in MOVED_ON and not progress.get(f"{stage}_refusal"):
                # The stage closed (its deadline passed) before a quorum: recorded, not sent.
                progress[f"{stage}_refusal"] = {
                    "request": digest,
                    "reason": "no_quorum",
                    "message": f"the stage closed before a quorum of attestations ({exc.code})",
                    "senders": [],
                    "sent": False,
                }
                self._commit(number, progress)
            raise
        items = []
        for entry in doc.attestations:
            try:
                items.append(Attestation(entry.sender, entry.digest, b64d(entry.mac)))
            except ValueError:
                continue  # a MAC that is not base64: counts for nothing
        valid = valid_attesters(
            self.key_ring,
            peers,
            items,
            federation_id=self.federation_id,
            round_number=number,
            stage=stage,
            me=self.index,
            digest=digest,
            members=members,
        )
        quorum = self.params.attestation_quorum
        if len(valid) >= quorum:
            progress[quorum_key] = sorted(valid)
            self._commit(number, progress)
            return True
        left = doc.seconds_left
        if left is not None and left <= poll_interval(doc.poll_after_s, self.poll_s):
            # By the coordinator's clock the deadline comes before the next poll.
            error = RefusalError(
                "no_quorum",
                f"only {len(valid)} of the {quorum} attestations of this {stage} request "
                "needed arrived before the deadline (participants may have been shown "
                "different requests)",
            )
            self._refuse(number, stage, progress, digest, error, blamed=())
            return False
        self._waiting = doc
        return False

    def _refuse(
        self,
        number: int,
        stage: str,
        progress: dict[str, Any],
        request: str,
        error: RefusalError,
        *,
        blamed: Sequence[int],
    ) -> None:
        """Record the refusal of ``request`` (committed first), then send it."""
        message = str(error)
        if blamed:
            message = (
                f"shares from senders {sorted(blamed)} failed authentication (bad MAC, or "
                f"sealed with a key other than the registered one); {message}"
            )
        self._say(f"round {number}: refusing the {stage} request ({error.reason}): {message}")
        refusal = {
            "request": request,
            "reason": error.reason,
            "message": message,
            "senders": sorted(int(i) for i in blamed),
            "sent": False,
        }
        progress[f"{stage}_refusal"] = refusal
        self._commit(number, progress)
        self._send_refusal(number, stage, progress, refusal)

    def _send_refusal(
        self, number: int, stage: str, progress: dict[str, Any], refusal: dict[str, Any]
    ) -> None:
        self.client.refuse(
            number, str(refusal["reason"]), str(refusal["message"]), refusal.get("senders", [])
        )
        refusal["sent"] = True
        progress[f"{stage}_refusal"] = refusal
        self._commit(number, progress)

    def _outcome(self, number: int) -> None:
        progress = self.progress(number)
        if progress.get("outcome_done"):
            return
        outcome = self.client.outcome(number)
        if outcome.stage == "published":
            prompt = prompt_from_document(outcome.global_prompt)
            if prompt is not None:
                self.state.write_array(self._path(number, "global.npy"), prompt)
            metrics = self.trainer.evaluate(prompt)
            self.state.write_json(self._path(number, "metrics.json"), metrics)
            try:
                self.client.report_metrics(number, metrics)
            except RequestRefusedError as exc:
                log.warning("round %s: metrics not accepted: %s", number, exc)
            shown = ", ".join(f"{k} {v:.3f}" for k, v in sorted(metrics.items()))
            self._say(f"round {number}: published; cluster {outcome.cluster}; {shown}")
        else:
            self._say(f"round {number}: {outcome.stage}: {outcome.failure_reason}")
        progress.update(
            outcome_done=True, outcome_stage=outcome.stage, next_cluster=outcome.cluster
        )
        self._commit(number, progress)
        self._handled.add(number)
        self.state.drop_round_shares(number)
