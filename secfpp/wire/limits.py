"""Every bound the API puts on what a caller may send: one table, part of the wire contract,
used by the federation configuration (:mod:`secfpp.federation`), the request
models (:mod:`coordinator.api.schemas.federations`) and the route parameters
(:mod:`coordinator.api.params`), so the OpenAPI schema states each range. It lives in
:mod:`secfpp.wire` (standard library only) so that the configuration, which the round core
reads, never imports the HTTP layer.

Where the numbers come from:

* **database integers** are 32-bit (``INTEGER`` on PostgreSQL): round numbers, round
  totals and warmup counts stop at ``INT32_MAX = 2**31 - 1``;
* **JSON interoperability** (I-JSON, RFC 7493): public seeds stay below ``2**53`` so a
  client that parses numbers as IEEE doubles reads the same seed;
* **the crypto core** (:mod:`crypto.params`): primes in ``(2, 2**62)``, of which the API
  takes those up to ``4.6e18`` (``MAX_PRIME``, exact in a double and in its decimal),
  ``bits`` in ``[0, 52]`` (exact in float64), codes with ``K + T - 1 < N``;
* **CLIP**: a text encoder has 77 positions, so no participant can train a prompt with
  more context vectors; the widest text transformers are 1280 wide, 4096 leaves room
  and keeps a global prompt below 2.5 MiB of float64;
* **time**: a stage deadline of at most 30 days and enrollment tokens of at most a year
  keep every ``now + timedelta`` far from ``datetime.max`` (year 9999);
* **text**: column widths, and no C0/C1 control characters (PostgreSQL text cannot hold
  NUL; logs and terminals must not receive escape sequences).

Every float bound is finite; ``NaN`` and ``Infinity`` are rejected before parsing
finishes (:mod:`coordinator.api.body`) and by the models (``allow_inf_nan=False``).
"""

from __future__ import annotations

from typing import Final

from secfpp.wire.types import MAX_PARTICIPANTS, PLAIN_TEXT_PATTERN, Label, PlainText

__all__ = [
    "DAY_S",
    "INT32_MAX",
    "JSON_SAFE_INT_MAX",
    "MAX_CLIP",
    "MAX_CODE_SIZE",
    "MAX_DEADLINE_S",
    "MAX_ENROLLMENT_TOKENS",
    "MAX_ENROLLMENT_TTL_S",
    "MAX_EPSILON_BUDGET",
    "MAX_INIT_STD",
    "MAX_JSON_DEPTH",
    "MAX_JSON_TOKENS",
    "MAX_LR_GLOBAL",
    "MAX_MERGE_FACTOR",
    "MAX_NOISE_MULTIPLIER",
    "MAX_N_CTX",
    "MAX_PAGE_LIMIT",
    "MAX_PARTICIPANTS",
    "MAX_PRIME",
    "MAX_PROMPT_DIM",
    "MAX_REDUCED_DIM",
    "MIN_DEADLINE_S",
    "PAGE_LIMIT_DEFAULT",
    "PLAIN_TEXT_PATTERN",
    "Label",
    "PlainText",
]

DAY_S: Final = 86_400

INT32_MAX: Final = 2**31 - 1
"""Largest round number, round total or warmup count (32-bit database integers)."""

JSON_SAFE_INT_MAX: Final = 2**53 - 1
"""Largest public seed: exactly representable as an IEEE double (RFC 7493)."""

# MAX_PARTICIPANTS (``N``: LCC evaluation points, envelopes per upload), PLAIN_TEXT_PATTERN,
# PlainText and Label are the wire schema's (secfpp.wire.types), imported above.

MAX_CODE_SIZE: Final = MAX_PARTICIPANTS
"""``K`` and ``T`` of an LCC code (``K + T - 1 < N`` is checked by the core)."""

MAX_PRIME: Final = 4_600_000_000_000_000_000
"""Largest field prime the API accepts. The core takes primes below ``2**62``
(``secfpp.crypto.field.MAX_PRIME``); the API stops at ``4.6e18``, a round decimal that is exact
in a double, so that a client holding a prime as a double and writing its shortest
decimal (as JavaScript and many JSON libraries do) never writes more than the bound: at
``2**62 - 1`` that decimal would read ``4611686018427387904``, which the core must
refuse. The defaults are ``2**61 - 1`` and ``2**31 - 1``."""

MAX_N_CTX: Final = 77
"""Context vectors of a prompt: CLIP's text encoder has 77 positions."""

MAX_PROMPT_DIM: Final = 4096
"""Width of a context vector (CLIP text widths are 512 to 1280)."""

MAX_REDUCED_DIM: Final = 4096
"""``r``: length of the reduced prompt SecPC clusters."""

MAX_CLIP: Final = 1e6
"""Clip bounds (``B`` per entry, ``C`` in L2): prompt entries and updates are O(1)."""

MAX_INIT_STD: Final = 10.0
"""Standard deviation of generation 0 (CoOp uses 0.02)."""

MAX_LR_GLOBAL: Final = 100.0
"""Global step size ``G <- G + lr_global * mean``."""

MAX_MERGE_FACTOR: Final = 100.0
"""SecPC merge factor on squared distances."""

MAX_NOISE_MULTIPLIER: Final = 1000.0
"""Gaussian noise multipliers (GDP ``sigma / sensitivity`` and LDP ``z_L``)."""

MAX_EPSILON_BUDGET: Final = 1e6
"""Privacy budget; any budget above it means no budget."""

MIN_DEADLINE_S: Final = 1.0
MAX_DEADLINE_S: Final = 30.0 * DAY_S
"""Seconds a stage stays open: 1 second to 30 days."""

MAX_ENROLLMENT_TOKENS: Final = MAX_PARTICIPANTS
"""Enrollment tokens issued by one request."""

MAX_ENROLLMENT_TTL_S: Final = 365 * DAY_S
"""Lifetime of an enrollment token: at most a year."""

MAX_JSON_DEPTH: Final = 32
"""Nesting of a JSON request body (the deepest document the API takes has depth 4)."""

MAX_JSON_TOKENS: Final = 2**18
"""JSON punctuation (``"[]{},:``) in a request body: every object a parse creates starts
at one, so this bounds the parsed document to 262,144 objects (a few MB). The largest
document the API takes, a share upload of 4,096 envelopes, has about 17 per envelope
(70,000 in all); any other has at most a few thousand."""

PAGE_LIMIT_DEFAULT: Final = 50
MAX_PAGE_LIMIT: Final = 200
"""Items per page of a list operation."""
