"""Running the participant daemon: start-up checks, the protocol loop, exit codes.

At start the daemon reads its whole state directory (:meth:`StateDir.check`) and then
compares it with what the coordinator knows about its API token (``GET
/v1/participants/me``: federation, participant, LCC index, registered public key). Any
damage or mismatch stops it with one line on stderr and a distinct exit status, before
it trains, writes or uploads anything. While running it waits out outages of the
coordinator or its database (see :mod:`participant.client`) and exits only on what
retrying cannot fix.

Exit statuses (``secfpp-participant run``; a systemd unit restarts on the others):

=====  ====================  ==========================================================
 0     done                  the federation's last round (or ``--rounds``) was handled,
                             or the federation ended (finished, aborted): one line says
                             why and where the final prompt is
 2     refused               a request was refused (4xx) for a reason other than below
 3     unavailable           the coordinator failed past ``--give-up-after`` or kept
                             answering 500
 4     damaged state/config  a state file is missing or damaged, or the data/model is
                             unusable (the message names the file and the remedy), or
                             the backbone is not the one the federation pins (another
                             model, other weights, or random weights; docs/using-the-model.md)
 5     revoked               the coordinator rejected the API token (401/403): revoked,
                             rotated or someone else's
 6     state mismatch        the state directory belongs to another enrollment
 8     untrusted certificate the coordinator's TLS certificate failed verification (CA
                             not in the CA bundle, expired, other host name) or the CA
                             bundle file is missing; not retried
=====  ====================  ==========================================================
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from secfpp.crypto.transport import load_private_key, public_key_bytes
from secfpp.participant.client import (
    AccessRevokedError,
    CoordinatorClient,
    CoordinatorUnavailableError,
    RequestRefusedError,
    RetryPolicy,
    UntrustedCertificateError,
)
from secfpp.participant.engine import Engine, Trainer
from secfpp.participant.state import StateDir, StateError, StateMismatchError, check_enrollment
from secfpp.wire.messages import MeResponse

__all__ = [
    "EXIT_CONFIG",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_REVOKED",
    "EXIT_UNAVAILABLE",
    "EXIT_UNTRUSTED_CERTIFICATE",
    "guarded",
    "serve",
    "verify_enrollment",
]

log = logging.getLogger("secfpp.participant")

EXIT_OK = 0
EXIT_REFUSED = 2
EXIT_UNAVAILABLE = 3
EXIT_CONFIG = 4
EXIT_REVOKED = 5
EXIT_MISMATCH = 6
EXIT_UNTRUSTED_CERTIFICATE = 8


def verify_enrollment(
    client: CoordinatorClient, state: StateDir, identity: dict[str, Any]
) -> MeResponse:
    """The coordinator's ``/me``; :class:`StateMismatchError` unless the state matches it."""
    public = public_key_bytes(load_private_key(state.private_key()).public_key())
    me = client.me()
    check_enrollment(identity, public, me)
    return me


def serve(
    state_dir: Path,
    make_trainer: Callable[[dict[str, Any]], Trainer],
    *,
    poll_s: float = 1.0,
    rounds: int | None = None,
    retry: RetryPolicy | None = None,
    on_progress: Callable[[str], None] | None = None,
    timeout_s: float = 60.0,
) -> tuple[int, str]:
    """Check the state, check it against the coordinator, then take part in rounds.

    ``make_trainer(identity)`` builds the local trainer, only after both checks passed.
    Returns the number of rounds handled and the engine's last words (why it stopped and
    where the final prompt is); raises what :func:`guarded` maps to statuses.
    """
    state = StateDir(state_dir)
    identity = state.check()
    token = identity.get("api_token")
    if not token:
        raise StateError(
            f"{state.root / state.IDENTITY} holds no API token: install one with "
            "'secfpp-participant set-token'"
        )
    ca = identity.get("ca_bundle")
    client = CoordinatorClient.connect(
        str(identity["coordinator_url"]),
        ca_bundle=str(ca) if ca else None,
        token=str(token),
        retry=retry,
        timeout_s=timeout_s,
    )
    try:
        me = verify_enrollment(client, state, identity)
        trainer = make_trainer({**identity, "config": identity.get("config") or me.config})
        engine = Engine(client, state, trainer, poll_s=poll_s, on_progress=on_progress)
        handled = engine.run(rounds=rounds)
        return handled, engine.ended
    finally:
        client.close()


def guarded(command: Callable[[], int]) -> int:
    """Run ``command``; what retrying cannot fix becomes one log line and an exit status."""
    try:
        return command()
    except AccessRevokedError as exc:
        log.error(
            "the coordinator rejected this participant's API token (%s %s: %s): it was "
            "revoked, rotated or belongs to someone else. Install the new token with "
            "'secfpp-participant set-token', or enroll again",
            exc.status,
            exc.code,
            exc.detail,
        )
        return EXIT_REVOKED
    except RequestRefusedError as exc:
        log.error(
            "the coordinator refused a request: %s (code %s). %s",
            exc.detail,
            exc.code,
            "Check the enrollment token, the state directory and the federation.",
        )
        return EXIT_REFUSED
    except CoordinatorUnavailableError as exc:
        log.error("the coordinator is unreachable: %s", exc)
        return EXIT_UNAVAILABLE
    except UntrustedCertificateError as exc:
        log.error("%s", exc)
        return EXIT_UNTRUSTED_CERTIFICATE
    except StateMismatchError as exc:
        log.error("%s", exc)
        return EXIT_MISMATCH
    except StateError as exc:
        log.error("%s", exc)
        return EXIT_CONFIG
    except Exception as exc:
        # Learning errors (bad data or model) are configuration problems too; the module
        # is looked up lazily so that the state checks never import torch.
        learning = sys.modules.get("secfpp.participant.learning.errors")
        if learning is not None and isinstance(exc, learning.LearningError):
            log.error("%s", exc)
            return EXIT_CONFIG
        raise
