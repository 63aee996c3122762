"""SecFPP's crypto core: the recipes callers outside ``crypto`` need, by task.

Like pyca/cryptography's split between recipes and ``hazmat``, the names below are the
supported surface; the modules behind them (``secfpp.crypto.field``, ``.lcc``, ``.linalg``,
``.codes``, ``.split_test``, ``.beacon_mix``, ``.dp.*`` ...) stay importable for tests,
benchmarks and the rare caller that needs a primitive, and may change shape more freely.

Map of the surface (module that defines each name in brackets):

* **Parameters** [params]: :class:`CryptoParams` (``CryptoParams.for_federation`` sizes
  codes, fields and a committee for ``N`` participants), :class:`CodeSpec`,
  :class:`FieldSpec`.
* **Errors** [errors]: :class:`CryptoError` and its kinds :class:`ParameterError`,
  :class:`RefusalError`, :class:`DecodeError` (and its :class:`OffsetCheckError`),
  :class:`WireFormatError`,
  :class:`ShareAuthenticationError`, :class:`PrivacyBudgetError`.
* **Randomness** [rng]: :class:`RandomSource` (what every share, mask and noise draw takes),
  :class:`SystemRandom` (the OS CSPRNG), :class:`DeterministicRandom` (tests and
  benchmarks only).
* **Sealed shares** [transport]: :func:`generate_keypair`, :class:`KeyPair`,
  :class:`KeyRing`, :class:`ShareContext`, :func:`seal_share`, :func:`open_share`, and the
  key (de)serializers :func:`public_key_bytes`, :func:`private_key_bytes`,
  :func:`load_public_key`, :func:`load_private_key`.
* **Packed field vectors** [wire]: :func:`pack_field_vector`, :func:`unpack_field_vector`,
  :func:`pack_field_matrix`, :func:`unpack_field_matrix`.
* **Distance stage** [secpc]: :class:`ReferenceSets`, :class:`Distances`,
  :func:`coded_distances` (a participant's result), :func:`decode_distances` (the
  coordinator's decode).
* **Clustering step** [clustering]: :class:`ClusteringConfig`, :class:`Membership`,
  :class:`StepResult`, :func:`secpc_step`, :func:`inherit_prompts`.
* **Aggregation stage** [aggregation]: :func:`prepare_update` (clip and quantize an update),
  :func:`member_sums` (a participant's coded sums), :func:`decode_cluster_sum`,
  :func:`decode_cluster_mean`.
* **Committees** [committee]: :func:`plan_committee`, :func:`round_committee`,
  :func:`verify_committee`, :class:`CommitteeMismatchError`.
* **Refusal digests** [refusal]: :func:`distance_request_digest`,
  :func:`aggregation_request_digest` (what participants compare before answering).

The names load lazily (PEP 562): ``import secfpp.crypto`` imports no submodule, and the
first use of a name imports only the module that defines it, so a command that needs
``SystemRandom`` does not pay for the DP accountant.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from secfpp.crypto.aggregation import (
        decode_cluster_mean,
        decode_cluster_sum,
        member_sums,
        prepare_update,
    )
    from secfpp.crypto.clustering import (
        ClusteringConfig,
        Membership,
        StepResult,
        inherit_prompts,
        secpc_step,
    )
    from secfpp.crypto.committee import (
        CommitteeMismatchError,
        plan_committee,
        round_committee,
        verify_committee,
    )
    from secfpp.crypto.errors import (
        CryptoError,
        DecodeError,
        OffsetCheckError,
        ParameterError,
        PrivacyBudgetError,
        RefusalError,
        ShareAuthenticationError,
        WireFormatError,
    )
    from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec
    from secfpp.crypto.refusal import aggregation_request_digest, distance_request_digest
    from secfpp.crypto.rng import DeterministicRandom, RandomSource, SystemRandom
    from secfpp.crypto.secpc import Distances, ReferenceSets, coded_distances, decode_distances
    from secfpp.crypto.transport import (
        KeyPair,
        KeyRing,
        ShareContext,
        generate_keypair,
        load_private_key,
        load_public_key,
        open_share,
        private_key_bytes,
        public_key_bytes,
        seal_share,
    )
    from secfpp.crypto.wire import (
        pack_field_matrix,
        pack_field_vector,
        unpack_field_matrix,
        unpack_field_vector,
    )

_SURFACE: dict[str, tuple[str, ...]] = {
    "params": ("CodeSpec", "CryptoParams", "FieldSpec"),
    "errors": (
        "CryptoError",
        "DecodeError",
        "OffsetCheckError",
        "ParameterError",
        "PrivacyBudgetError",
        "RefusalError",
        "ShareAuthenticationError",
        "WireFormatError",
    ),
    "rng": ("DeterministicRandom", "RandomSource", "SystemRandom"),
    "transport": (
        "KeyPair",
        "KeyRing",
        "ShareContext",
        "generate_keypair",
        "load_private_key",
        "load_public_key",
        "open_share",
        "private_key_bytes",
        "public_key_bytes",
        "seal_share",
    ),
    "wire": (
        "pack_field_matrix",
        "pack_field_vector",
        "unpack_field_matrix",
        "unpack_field_vector",
    ),
    "secpc": ("Distances", "ReferenceSets", "coded_distances", "decode_distances"),
    "clustering": ("ClusteringConfig", "Membership", "StepResult", "inherit_prompts", "secpc_step"),
    "aggregation": ("decode_cluster_mean", "decode_cluster_sum", "member_sums", "prepare_update"),
    "committee": (
        "CommitteeMismatchError",
        "plan_committee",
        "round_committee",
        "verify_committee",
    ),
    "refusal": ("aggregation_request_digest", "distance_request_digest"),
}
_HOME = {name: module for module, names in _SURFACE.items() for name in names}

__all__ = [
    "ClusteringConfig",
    "CodeSpec",
    "CommitteeMismatchError",
    "CryptoError",
    "CryptoParams",
    "DecodeError",
    "DeterministicRandom",
    "Distances",
    "FieldSpec",
    "KeyPair",
    "KeyRing",
    "Membership",
    "OffsetCheckError",
    "ParameterError",
    "PrivacyBudgetError",
    "RandomSource",
    "ReferenceSets",
    "RefusalError",
    "ShareAuthenticationError",
    "ShareContext",
    "StepResult",
    "SystemRandom",
    "WireFormatError",
    "aggregation_request_digest",
    "coded_distances",
    "decode_cluster_mean",
    "decode_cluster_sum",
    "decode_distances",
    "distance_request_digest",
    "generate_keypair",
    "inherit_prompts",
    "load_private_key",
    "load_public_key",
    "member_sums",
    "open_share",
    "pack_field_matrix",
    "pack_field_vector",
    "plan_committee",
    "prepare_update",
    "private_key_bytes",
    "public_key_bytes",
    "round_committee",
    "seal_share",
    "secpc_step",
    "unpack_field_matrix",
    "unpack_field_vector",
    "verify_committee",
]


def __getattr__(name: str) -> Any:
    """Load a surface name from its module on first use (PEP 562)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
