"""Simulated participants for the load benchmark and the fault tests (no torch, no data).

* :class:`~tests.support.trainers.FixedTrainer` (the tests' stand-in trainer, one copy in
  ``tests/support/trainers.py``: the load runs train what the tests verify) stands in for
  prompt learning; participant ``i`` belongs to group ``i % 2`` (:func:`group_of`).
* :class:`LoadMember` speaks the participant API over its own keep-alive connection
  (:class:`bench.load.http.Connection`) with the production protocol code
  (:mod:`participant.protocol`): it seals real shares, opens its real inbox and uploads
  real coded results with their request digests, so the coordinator decodes and
  publishes exactly as in a deployment. Share uploads and inboxes are binary
  (``application/octet-stream``, :mod:`crypto.wire` batches) as the daemon's are, or
  base64 JSON with ``binary=False`` (``--json-bodies``). Its share upload for a round is
  prepared (sealed and encoded by :func:`prepare_body`, in the process pool, and kept by
  :meth:`LoadMember.keep`) before it polls, and opening the inbox and computing the coded
  result (:func:`compute_result`) run in a process pool when one is given, so that a
  load run measures the coordinator rather than the clients: the process that times
  the requests does little besides sending them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from bench.load.http import Connection, Reply
from secfpp.crypto.rng import DeterministicRandom, SystemRandom
from secfpp.crypto.transport import (
    generate_keypair,
    load_private_key,
    private_key_bytes,
    public_key_bytes,
)
from secfpp.crypto.wire import pack_envelopes, unpack_inbox
from secfpp.federation import FederationConfig
from secfpp.participant.client import (
    RETRY_STATUSES,
    ReceivedEnvelope,
    ReceivedInbox,
    retry_after_seconds,
)
from secfpp.participant.engine import poll_interval
from secfpp.participant.federation import federation_config
from secfpp.participant.protocol import (
    aggregation_payload,
    distance_payload,
    open_inbox,
    open_zero_contributions,
    peer_keys,
    share_body,
)
from secfpp.participant.rerandomize import rerandomizes, zero_sharing_length
from secfpp.wire.messages import Inbox, Task
from tests.support.trainers import FixedTrainer, group_of

__all__ = ["FixedTrainer", "LoadMember", "Sample", "compute_result", "group_of", "prepare_body"]

JSON = {"Content-Type": "application/json"}
OCTETS = {"Content-Type": "application/octet-stream"}
BINARY_INBOX = {"Accept": "application/octet-stream"}


@dataclass(frozen=True)
class Sample:
    """One request: endpoint label, HTTP status, seconds from send to full response, and
    when it was sent (Unix time: where in the round the slowest requests fall)."""

    endpoint: str
    status: int
    seconds: float
    at: float = 0.0


@dataclass
class LoadMember:
    """One simulated participant of a load run (module docstring)."""

    http: Connection
    name: str
    samples: list[Sample]
    pool: Executor | None = None
    """Where :func:`compute_result` runs (None: a thread of this process)."""
    token: str = ""
    index: int = -1
    participant_id: str = ""
    federation_id: str = ""
    config: FederationConfig | None = None
    """The federation's config, parsed from ``/me`` at enrollment (as the daemon does)."""
    prepared: dict[int, dict[str, Any]] = field(default_factory=dict)
    binary: bool = True
    """Binary share uploads and inboxes (False: the JSON bodies, for comparison)."""
    done: set[tuple[int, str]] = field(default_factory=set)
    uploaded_at: dict[tuple[int, str], float] = field(default_factory=dict)
    """``(round, stage)`` -> wall-clock time (``time.time()``) at which the upload that was
    accepted was sent (its last attempt)."""

    def __post_init__(self) -> None:
        self.keys = generate_keypair(DeterministicRandom(f"load-key|{self.name}"))

    @property
    def public_key(self) -> bytes:
        return public_key_bytes(self.keys.public)

    async def call(
        self,
        endpoint: str,
        method: str,
        path: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """One timed request (the bearer token added).

        A transport error (typically a keep-alive connection the server closed just as
        it was reused) is recorded with status 0 and the request sent again, as the
        daemon's client does; every participant request is idempotent. An answer the
        daemon retries (429, 502, 503, 504: ``participant.client.RETRY_STATUSES``) is
        recorded and the request sent again after its ``Retry-After`` (1 s without one)
        plus up to 10 % jitter, as the daemon does.
        """
        all_headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        while True:
            start, sent = time.perf_counter(), time.time()
            try:
                response = await self.http.request(
                    method, path, headers=all_headers, content=content
                )
            except ConnectionError:
                self.samples.append(Sample(endpoint, 0, time.perf_counter() - start, sent))
                await asyncio.sleep(0.1)
                continue
            elapsed = time.perf_counter() - start
            self.samples.append(Sample(endpoint, response.status_code, elapsed, sent))
            if response.status_code not in RETRY_STATUSES:
                return response
            wait = retry_after_seconds(response.headers.get("retry-after"))
            await asyncio.sleep(min(wait or 1.0, 300.0) * random.uniform(1.0, 1.1))

    async def enroll(self, enrollment_token: str) -> None:
        document = {
            "enrollment_token": enrollment_token,
            "display_name": self.name,
            "public_key": base64.b64encode(self.public_key).decode(),
        }
        r = await self.http.request(
            "POST", "/v1/enroll", headers=JSON, content=json.dumps(document).encode()
        )
        if r.status_code != 201:
            raise RuntimeError(f"{self.name}: enrollment answered {r.status_code}: {r.content!r}")
        body = r.json()
        self.token, self.index = body["api_token"], int(body["index"])
        self.participant_id, self.federation_id = body["participant_id"], body["federation_id"]
        me = await self.call("me", "GET", "/v1/participants/me")
        if me.status_code != 200:
            raise RuntimeError(f"{self.name}: /me answered {me.status_code}")
        self.config = federation_config(me.json()["config"])

    def body_args(self, number: int, sharing_task: dict[str, Any]) -> tuple[Any, ...]:
        """Arguments of :func:`prepare_body` for this member (picklable)."""
        assert self.config is not None, "enroll first"
        return (
            self.config,
            self.federation_id,
            self.index,
            private_key_bytes(self.keys.private),
            {**sharing_task, "round": number},
            self.binary,
        )

    def keep(
        self, number: int, sharing_task: dict[str, Any], body: bytes, train_s: float = 0.0
    ) -> None:
        """Hold ``body`` (from :func:`prepare_body`) as the share upload of round ``number``,
        sent ``train_s`` seconds after the member first sees its sharing task (its local
        training time: the daemon trains, then uploads)."""
        self.prepared[number] = {"expect": sharing_task["sharing"], "body": body, "train": train_s}

    async def run_round(
        self, number: int, poll_s: float, jitter: Callable[[], float], first_poll_s: float = 0.0
    ) -> str:
        """Poll and act until round ``number`` ends (the first poll after ``first_poll_s``
        seconds: where the round's start falls in a waiting daemon's poll interval);
        returns its final stage."""
        await asyncio.sleep(first_poll_s)
        while True:
            r = await self.call("task", "GET", "/v1/participants/me/task")
            if r.status_code != 200:
                await asyncio.sleep(poll_s)
                continue
            task = r.json()
            if task["round"] == number and task["stage"] in ("published", "failed", "aborted"):
                due = task.get("outcome_after_s", 0.0)  # its slot in the end-of-round spread
                if task["stage"] == "published" and (number, "outcome") not in self.done:
                    if due > 0:  # as the daemon: poll again at the slot
                        hint = task.get("poll_after_s")
                        await asyncio.sleep(poll_interval(hint, poll_s + jitter()))
                        continue
                    await self._outcome(number)
                return str(task["stage"])
            action = task["action"]
            if task["round"] == number and not task["uploaded"]:
                if action == "share" and (number, "share") not in self.done:
                    await self._share(task, number)
                    continue
                if action in ("compute_distances", "compute_sums"):
                    stage = "distances" if action == "compute_distances" else "aggregation"
                    if (number, stage) not in self.done:
                        await self._result(task, number, stage)
                        continue
            hint = task.get("poll_after_s")
            await asyncio.sleep(poll_interval(hint, poll_s + jitter()))  # as the daemon

    async def _share(self, task: dict[str, Any], number: int) -> None:
        prepared = self.prepared.get(number)
        if prepared is None or prepared["expect"] != task["sharing"]:
            raise RuntimeError(f"round {number}: the sharing task is not the prepared one")
        if prepared["train"] > 0:  # training, once: a resent upload does not train again
            await asyncio.sleep(prepared["train"])
            prepared["train"] = 0.0
        path = f"/v1/participants/me/rounds/{number}/shares"
        headers = OCTETS if self.binary else JSON
        sent = time.time()
        r = await self.call("shares", "POST", path, content=prepared["body"], headers=headers)
        if r.status_code == 200:
            self.done.add((number, "share"))
            self.uploaded_at[(number, "sharing")] = sent

    async def _result(self, task: dict[str, Any], number: int, stage: str) -> None:
        path = f"/v1/participants/{self.participant_id}/rounds/{number}/inbox"
        r = await self.call("inbox", "GET", path, headers=BINARY_INBOX if self.binary else None)
        if r.status_code != 200:
            return
        assert self.config is not None, "enroll first"
        zero = [
            e["vector_length"]
            for e in self.prepared.get(number, {}).get("expect", {}).get("envelopes", [])
            if e["kind"] == "zero"
        ]
        args = (
            self.config,
            self.federation_id,
            self.index,
            private_key_bytes(self.keys.private),
            task,
            r.content,
            stage,
            zero[0] if zero else None,
        )
        if self.pool is None:
            payload, digest = await asyncio.to_thread(compute_result, *args)
        else:
            loop = asyncio.get_running_loop()
            payload, digest = await loop.run_in_executor(self.pool, compute_result, *args)
        sent = time.time()
        r = await self.call(
            f"results/{stage}",
            "POST",
            f"/v1/participants/me/rounds/{number}/results/{stage}",
            content=payload,
            headers={"Content-Type": "application/octet-stream", "X-Request-Digest": digest},
        )
        if r.status_code == 200:
            self.done.add((number, stage))
            self.uploaded_at[(number, stage)] = sent

    async def _outcome(self, number: int) -> None:
        r = await self.call("outcome", "GET", f"/v1/participants/me/rounds/{number}/outcome")
        if r.status_code == 200:
            path = f"/v1/participants/me/rounds/{number}/metrics"
            await self.call("metrics", "POST", path, content=b'{"accuracy":0.5}', headers=JSON)
            self.done.add((number, "outcome"))


def prepare_body(
    config: FederationConfig,
    federation_id: str,
    index: int,
    private_key: bytes,
    task: Mapping[str, Any],
    binary: bool,
) -> bytes:
    """The encoded share upload of participant ``index`` for ``task`` (a ``/me/task``
    document of the round's sharing stage: its ``round``, ``peers``, ``sharing`` and, in a
    committee round, ``committee``, which is checked against the public draw as the daemon
    does): the stand-in trainer's ``x_i`` and ``g_i`` quantized, shared, sealed and packed
    (binary) or JSON-encoded.

    Picklable arguments (the raw X25519 private key, the parsed config), so that it can
    run in another process.
    """
    params = config.crypto_params()
    number = int(task["round"])
    size = config.prompt.size
    trainer = FixedTrainer(index, reduced_dim=params.reduced_dim, prompt_size=size)
    out = trainer.train(number, None)
    body = share_body(
        Task.model_validate(task),
        params=params,
        federation_id=federation_id,
        index=index,
        private_key=load_private_key(private_key),
        reduced=out.reduced,
        update=out.update,
        rng=SystemRandom(),
    )
    if binary:
        records = [
            (int(e["recipient"]), str(e["kind"]), base64.b64decode(e["ciphertext"]))
            for e in body["envelopes"]
        ]
        return pack_envelopes(records)
    return json.dumps(body, separators=(",", ":")).encode()


def compute_result(
    config: FederationConfig,
    federation_id: str,
    index: int,
    private_key: bytes,
    task: Mapping[str, Any],
    inbox: bytes,
    stage: str,
    zero_length: int | None = None,
) -> tuple[bytes, str]:
    """Open the inbox (JSON or binary bytes) and compute the packed coded result of ``stage``
    (``distances`` or ``aggregation``) and its request digest, as the daemon does.

    ``zero_length``: the entries of a zero-sharing contribution, as the round's sharing task
    gave them (the round's bound), when the distance task does not say
    (``contribution_length``); None: the federation's bound.

    Picklable arguments (the raw X25519 private key, the parsed config), so that it can
    run in another process.
    """
    params = config.crypto_params()
    if stage == "distances":
        kind, spec = "prompt", params.clustering_field
        length = params.clustering_lcc().chunk_length(params.reduced_dim)
    else:
        kind, spec = "update", params.aggregation_field
        size = config.prompt.size
        length = params.aggregation_lcc().chunk_length(size)
    if inbox.startswith(b"SFI"):
        number, recipient, senders, records = unpack_inbox(inbox)
        received = ReceivedInbox(
            number,
            recipient,
            tuple(senders),
            tuple(ReceivedEnvelope(s, k, c) for s, k, c in records),
        )
    else:
        received = ReceivedInbox.of(Inbox.model_validate_json(inbox))
    the_task = Task.model_validate(task)
    opened = open_inbox(
        received,
        kind=kind,
        context_stage=f"sharing-{kind}",
        prime=spec.prime,
        share_length=length,
        federation_id=federation_id,
        index=index,
        private_key=load_private_key(private_key),
        peers=peer_keys(the_task),
    )
    if stage == "distances" and rerandomizes(config):  # as the daemon: the contributors' zeros
        zeros = open_zero_contributions(
            received,
            prime=spec.prime,
            length=(
                (the_task.distances.contribution_length if the_task.distances else None)
                or zero_length
                or zero_sharing_length(params)
            ),
            federation_id=federation_id,
            index=index,
            private_key=load_private_key(private_key),
            peers=peer_keys(the_task),
        )
        return distance_payload(the_task, opened, params, zeros)
    build = distance_payload if stage == "distances" else aggregation_payload
    return build(the_task, opened, params)
