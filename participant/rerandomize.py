"""The participant's side of the re-randomized distance stage: names and sizes, no I/O.

When the federation's config sets ``secfpp.crypto.rerandomize_distances`` (docs/protocol.md
section 4), the sharing task lists one more envelope kind, :data:`ZERO_KIND`: each
participant sends every recipient its zero-sharing contribution
(:class:`crypto.rerandomize.ZeroSharing`) at the recipient's point, a vector of
:func:`zero_sharing_length` elements of the clustering field, sealed like every share
(:func:`participant.protocol.share_body`; ``ShareContext`` stage
:data:`ZERO_CONTEXT_STAGE`, so it cannot be replayed as a prompt share or into another
round). In the distance stage the recipient opens them
(:func:`participant.protocol.open_inbox`) and passes them to
:func:`participant.protocol.distance_payload` (``zeros=``), which adds every present
participant's contribution and refuses (``missing_share``) when one did not open.

A contribution's free evaluations travel as seeds (:meth:`crypto.rerandomize.ZeroSharing.
contribute_seeded`): the recipients at the code's first ``seeded_points`` points get a 32-byte
seed in a :data:`ZERO_SEED_KIND` envelope (``ShareContext`` stage
:data:`ZERO_SEED_CONTEXT_STAGE`) and expand it, the others a vector in a :data:`ZERO_KIND`
envelope (:func:`zero_split` says which; the coordinator's task lists both kinds and checks the
same split). A task from a coordinator of an earlier release lists only :data:`ZERO_KIND`: then
every recipient gets a vector, as before.

Whether to re-randomize comes from the federation's config (:func:`rerandomizes`), never
from a round's task: a coordinator cannot ask some members for plain results.
"""

from __future__ import annotations

from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import ZeroSharing, contribution_length, output_bound
from secfpp.federation import FederationConfig

__all__ = [
    "ZERO_CONTEXT_STAGE",
    "ZERO_KIND",
    "ZERO_SEED_CONTEXT_STAGE",
    "ZERO_SEED_KIND",
    "rerandomizes",
    "zero_sharing_length",
    "zero_sharing_lengths",
    "zero_split",
]

ZERO_KIND = "zero"
"""Envelope kind of a zero-sharing contribution."""

ZERO_CONTEXT_STAGE = "sharing-zero"
"""The ``ShareContext.stage`` a zero-sharing contribution is sealed under."""

ZERO_SEED_KIND = "zero-seed"
"""Envelope kind of a zero-sharing contribution's value at a free point, as a seed."""

ZERO_SEED_CONTEXT_STAGE = "sharing-zero-seed"
"""The ``ShareContext.stage`` a contribution's seed is sealed under."""


def zero_sharing_length(params: CryptoParams) -> int:
    """Elements per contribution: the public bound on a distance request's outputs, then
    the offset check's mask (:func:`crypto.rerandomize.contribution_length`)."""
    return contribution_length(params.n_participants, params.max_clusters)


def zero_sharing_lengths(params: CryptoParams) -> tuple[int, int]:
    """The contribution lengths a sharing task may ask for: :func:`zero_sharing_length`,
    and the outputs' bound alone (a coordinator of an earlier release, which sends no
    offset-check challenge)."""
    return zero_sharing_length(params), output_bound(params.n_participants, params.max_clusters)


def rerandomizes(config: FederationConfig) -> bool:
    """Whether the federation re-randomizes distances (distance-stage DP noise,
    ``dp.distance_noise_multiplier``, implies it)."""
    if config.dp.distance_noise_multiplier is not None:
        return True
    return config.crypto.rerandomize_distances


def zero_split(params: CryptoParams, point: dict[int, int]) -> tuple[list[int], list[int]]:
    """The recipients that get a contribution as a seed, and those that get a vector.

    ``point`` maps each recipient to its code point (its committee position, or itself).
    Seeds go to the points below :attr:`~crypto.rerandomize.ZeroSharing.seeded_points`.
    """
    return ZeroSharing(params.clustering_lcc()).split(point)
