"""The participant's side of the re-randomized distance stage, without any I/O.

In the sharing stage a participant sends each recipient, besides its prompt share, one
more envelope of kind :data:`ZERO_KIND`: its zero-sharing contribution
(:class:`crypto.rerandomize.ZeroSharing`) evaluated at the recipient's point, a vector of
:func:`zero_sharing_length` elements of the clustering field, sealed like every share
(:func:`crypto.transport.seal_share`, ``ShareContext`` stage :data:`ZERO_CONTEXT_STAGE`,
so it cannot be replayed as a prompt share or into another round). In the distance stage
the recipient opens them with :func:`participant.protocol.open_inbox` and passes them to
:func:`participant.protocol.distance_payload` (``zeros=``), which adds every present
participant's contribution and refuses (``missing_share``) when one did not open.

The coordinator does not yet ask for this envelope kind (docs/protocol.md, "Known
limits"): these functions are the participant's half, tested end to end with real
sealing in ``tests/participant/test_rerandomize.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from crypto.params import CryptoParams
from crypto.rerandomize import ZeroSharing, output_bound
from crypto.rng import RandomSource
from crypto.transport import ShareContext, SharedSecretSource, seal_share
from crypto.wire import pack_field_vectors
from participant.protocol import peer_keys, round_committee

__all__ = ["ZERO_CONTEXT_STAGE", "ZERO_KIND", "zero_envelopes", "zero_sharing_length"]

ZERO_KIND = "zero"
"""Envelope kind of a zero-sharing contribution."""

ZERO_CONTEXT_STAGE = "sharing-zero"
"""The ``ShareContext.stage`` a zero-sharing contribution is sealed under."""


def zero_sharing_length(params: CryptoParams) -> int:
    """Elements per contribution: the public bound on a distance request's outputs."""
    return output_bound(params.n_participants, params.max_clusters)


def zero_envelopes(
    task: Mapping[str, Any],
    *,
    params: CryptoParams,
    federation_id: str,
    index: int,
    private_key: SharedSecretSource,
    rng: RandomSource,
) -> list[dict[str, Any]]:
    """One sealed zero-sharing envelope per sharing recipient (the committee in a
    committee round, checked as in :func:`participant.protocol.share_body`): member ``k``
    of a committee gets the value at ``alpha_k``, otherwise recipient ``j`` at ``alpha_j``.
    """
    peers = peer_keys(task)
    committee = round_committee(task, params=params, federation_id=federation_id, index=index)
    recipients = [int(r) for r in task["sharing"]["recipients"]]
    point = (
        {r: r for r in recipients} if committee is None else {m: k for k, m in enumerate(committee)}
    )
    values = ZeroSharing(params.clustering_lcc()).contribute(zero_sharing_length(params), rng)
    packed = pack_field_vectors(values, prime=params.clustering_field.prime)
    round_number = int(task["round"])
    envelopes = []
    for recipient in recipients:
        context = ShareContext(federation_id, round_number, ZERO_CONTEXT_STAGE, index, recipient)
        sealed = seal_share(
            private_key, peers[recipient], packed[point[recipient]], context=context, rng=rng
        )
        envelopes.append(
            {
                "recipient": recipient,
                "kind": ZERO_KIND,
                "ciphertext": base64.b64encode(sealed).decode("ascii"),
            }
        )
    return envelopes
