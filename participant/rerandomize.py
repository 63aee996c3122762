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
from secfpp.crypto.rerandomize import ZeroSharing, contribution_length
from secfpp.federation import FederationConfig

__all__ = [
    "ZERO_CONTEXT_STAGE",
    "ZERO_KIND",
    "ZERO_SEED_CONTEXT_STAGE",
    "ZERO_SEED_KIND",
    "check_zero_sharing_length",
    "rerandomizes",
    "zero_sharing_length",
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
    """The most elements a contribution may have: the federation's public bound on a
    distance request's outputs, then the offset check's mask
    (:func:`crypto.rerandomize.contribution_length`)."""
    return contribution_length(params.n_participants, params.max_clusters)


def check_zero_sharing_length(params: CryptoParams, length: int) -> None:
    """Raise ``ValueError`` unless a sharing task may ask for contributions of ``length``
    entries: at least one, at most :func:`zero_sharing_length`.

    The coordinator sizes a round's contributions by that round's own bound (its
    participants and clusters, ``coordinator.rounds.views.zero_sharing_length``), so every
    length up to the federation's is valid; an earlier release always asked for the
    federation's outputs' bound (:func:`crypto.rerandomize.output_bound`, no mask). What a
    shorter contribution cannot cover is refused at the distance stage
    (:func:`participant.protocol.distance_payload`): no output is answered that no
    contribution re-randomizes.
    """
    most = zero_sharing_length(params)
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= most:
        raise ValueError(
            f"zero-sharing has at most {most} entries (the federation's bound on a distance "
            f"request's outputs and the offset check's mask), the task asks for {length!r}"
        )


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
