"""``secfpp-participant``: the daemon an organization runs next to its data.

Typical use::

    secfpp-participant enroll --coordinator https://coord.example:8443 \\
        --ca-bundle ca.pem --token-file enrollment.txt --name hospital-a --state ./state
    secfpp-participant run --state ./state --data ./images
    secfpp-participant status --state ./state
    SECFPP_API_TOKEN=sfp_... secfpp-participant set-token --state ./state

``enroll`` creates the X25519 key pair (0600) and registers it; ``run`` checks its state
directory (locally, then against the coordinator) and loops: fetch the task, train /
share / compute, upload; it waits out coordinator and database outages and stops only
on what retrying cannot fix, with the exit statuses of :mod:`participant.daemon` (2
refused, 3 unavailable past ``--give-up-after``, 4 damaged state, 5 revoked token, 6
state of another enrollment, 8 untrusted TLS certificate); ``status`` shows where it stands;
``set-token`` installs the new API token after the admin rotated it.
Killing the daemon at any point and running it again continues the round it was in.

Tokens never travel on the command line, where every local user can read them (``ps``,
``/proc/PID/cmdline``): the enrollment token comes from ``--token-file FILE`` (``-``:
standard input) or ``SECFPP_ENROLLMENT_TOKEN``; the API token lives in the state
directory (``identity.json``, 0600) and a rotated one comes from ``--token-file`` or
``SECFPP_API_TOKEN``. A ``--token`` argument is refused.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from secfpp.participant.client import (
    CoordinatorClient,
    CoordinatorUnavailableError,
    RequestRefusedError,
    RetryPolicy,
)
from secfpp.participant.daemon import (
    EXIT_CONFIG,
    EXIT_MISMATCH,
    EXIT_REFUSED,
    EXIT_REVOKED,
    EXIT_UNAVAILABLE,
    guarded,
)
from secfpp.participant.state import StateDir, StateError
from secfpp.process.cli_help import CommandParser, DefaultsHelpFormatter

__all__ = [
    "EXIT_CONFIG",
    "EXIT_MISMATCH",
    "EXIT_REFUSED",
    "EXIT_REVOKED",
    "EXIT_UNAVAILABLE",
    "main",
]

log = logging.getLogger("secfpp.participant")

INTERACTIVE_RETRY = RetryPolicy(max_attempts=6, cap_s=10.0)
"""``enroll``, ``status`` and ``set-token`` give up after a few tries (someone waits)."""

ENROLLMENT_TOKEN_ENV = "SECFPP_ENROLLMENT_TOKEN"  # noqa: S105 - a variable name
API_TOKEN_ENV = "SECFPP_API_TOKEN"  # noqa: S105 - a variable name
MAX_TOKEN_CHARS = 200


class _RefuseTokenArgument(argparse.Action):
    """``--token`` is refused without echoing its value (it may be a live token)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string} is not accepted: a token on the command line is visible to "
            f"every local user (ps). Use --token-file FILE ('-' reads standard input) or "
            f"the environment variable {self.metavar}"
        )


def _token_options(p: argparse.ArgumentParser, env: str, what: str) -> None:
    p.add_argument(
        "--token-file",
        type=Path,
        help=f"file holding the {what} ('-': standard input); default: ${env}",
    )
    _refuse_token_argument(p, env)


def _refuse_token_argument(p: argparse.ArgumentParser, env: str) -> None:
    p.add_argument("--token", action=_RefuseTokenArgument, metavar=env, help=argparse.SUPPRESS)


def read_token(path: Path | None, env: str, what: str) -> str:
    """The token from ``path`` ('-' is standard input) or else the environment variable
    ``env``; surrounding whitespace removed. Raises :class:`StateError` naming the source
    (never the token) when there is none or it is malformed."""
    if path is not None:
        source = "standard input" if str(path) == "-" else str(path)
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
        except OSError as exc:
            raise StateError(f"cannot read the {what} from {source}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise StateError(f"the {what} in {source} is not UTF-8 text") from None
    else:
        source = f"${env}"
        text = os.environ.get(env, "")
    token = text.strip()
    if not token:
        raise StateError(f"no {what}: pass --token-file FILE or set {env}")
    if len(token) > MAX_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise StateError(
            f"the {what} from {source} is not a token (one line of at most "
            f"{MAX_TOKEN_CHARS} printable characters)"
        )
    return token


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="secfpp-participant",
        allow_abbrev=False,
        description="SecFPP participant daemon: learns CLIP prompts with the federation "
        "without revealing data, prompts or updates.",
        formatter_class=DefaultsHelpFormatter,
        epilog="Run 'secfpp-participant COMMAND --help' for the options of a command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    p = sub.add_parser(
        "enroll", help="create keys and register with the coordinator", allow_abbrev=False
    )
    p.add_argument("--coordinator", required=True, help="coordinator URL, e.g. https://host:8443")
    _token_options(p, ENROLLMENT_TOKEN_ENV, "one-time enrollment token from the admin")
    p.add_argument("--name", required=True, help="display name of this organization")
    p.add_argument("--ca-bundle", help="PEM CA bundle that signed the coordinator's certificate")
    p.add_argument("--state", required=True, type=Path, help="state directory to create")

    p = sub.add_parser(
        "run", help="take part in rounds until the federation is done", allow_abbrev=False
    )
    _refuse_token_argument(p, API_TOKEN_ENV)
    p.add_argument("--state", required=True, type=Path, help="state directory from 'enroll'")
    p.add_argument(
        "--data",
        required=True,
        help="image folder (root/<class>/<image>: PNG, JPEG, BMP, GIF, TIFF, WebP, PPM) "
        "or CSV of path,label",
    )
    p.add_argument("--classes", help="class list file (one name per line), optional")
    p.add_argument(
        "--model",
        help="open_clip model name; default: the model the federation pins (tiny-offline "
        "when it pins none). Must be the pinned one",
    )
    p.add_argument(
        "--pretrained",
        help="checkpoint file or open_clip model directory (its fingerprint must be the "
        "federation's); not needed for tiny-offline",
    )
    p.add_argument(
        "--allow-random-weights-for-testing",
        action="store_true",
        help="TESTS ONLY: build the model with random weights (seed 0) when no --pretrained "
        "is given, instead of refusing. It learns nothing useful",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cuda", "cpu"],
        help="where the backbone runs (auto: CUDA when available)",
    )
    p.add_argument("--epochs", type=int, default=2, help="local epochs per round")
    p.add_argument("--lr", type=float, default=0.002, help="SGD learning rate")
    p.add_argument("--batch-size", type=int, default=32, help="images per training step")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 lets several participants share a machine)",
    )
    p.add_argument("--rounds", type=int, help="stop after this many rounds (default: all)")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between task polls")
    p.add_argument(
        "--give-up-after",
        type=float,
        metavar="SECONDS",
        help="exit (status 3) when one request has failed for this long; default: wait out "
        "coordinator and database outages however long they last",
    )
    p.add_argument(
        "--no-progress-bar", action="store_true", help="no progress bar even on a terminal"
    )
    p.add_argument(
        "--zero-shot-template",
        default="a photo of a {}.",
        help="hand-written prompt of the zero-shot baseline ({} = class name)",
    )

    p = sub.add_parser(
        "status", help="show enrollment, round progress and last metrics", allow_abbrev=False
    )
    p.add_argument("--state", required=True, type=Path, help="state directory from 'enroll'")
    p.add_argument("--offline", action="store_true", help="do not ask the coordinator")
    _refuse_token_argument(p, API_TOKEN_ENV)

    _model_commands(sub)

    p = sub.add_parser(
        "set-token",
        help="install the new API token after the admin rotated it",
        allow_abbrev=False,
    )
    p.add_argument("--state", required=True, type=Path, help="state directory from 'enroll'")
    _token_options(p, API_TOKEN_ENV, "new API token (sfp_...) from the admin")
    return parser


def _model_commands(sub: Any) -> None:
    """``fingerprint``, ``export``, ``predict``, ``evaluate`` (participant/model_commands.py)."""
    from secfpp.participant.model_commands import add_model_commands

    add_model_commands(sub)


def _client(identity: dict[str, object]) -> CoordinatorClient:
    ca = identity.get("ca_bundle")
    return CoordinatorClient.connect(
        str(identity["coordinator_url"]),
        ca_bundle=str(ca) if ca else None,
        token=str(identity["api_token"]),
        retry=INTERACTIVE_RETRY,
    )


def _enroll(args: argparse.Namespace) -> int:
    from secfpp.participant.enrollment import enroll

    token = read_token(args.token_file, ENROLLMENT_TOKEN_ENV, "enrollment token")
    client = CoordinatorClient.connect(
        args.coordinator, ca_bundle=args.ca_bundle, retry=INTERACTIVE_RETRY
    )
    try:
        ident = enroll(
            client,
            StateDir(args.state),
            coordinator_url=args.coordinator,
            enrollment_token=token,
            display_name=args.name,
            ca_bundle=str(Path(args.ca_bundle).resolve()) if args.ca_bundle else None,
        )
    finally:
        client.close()
    print(
        f"enrolled '{args.name}' as participant {ident['index']} of federation "
        f"{ident['federation_id']}; state in {args.state}"
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    """Check the state (locally, then against the coordinator), build the trainer, loop."""
    from secfpp.participant.daemon import serve
    from secfpp.process.memory import retain_freed_memory

    retain_freed_memory()  # numpy temporaries reuse the heap (secfpp/process/memory.py)
    state = StateDir(args.state)
    name = args.state.name

    def say(text: str) -> None:
        log.info("[%s] %s", name, text)

    def make_trainer(identity: dict[str, Any]) -> Any:
        nonlocal name
        name = identity.get("display_name") or f"participant-{identity['index']}"
        return _build_trainer(args, state, identity, say)

    retry = RetryPolicy(give_up_after_s=args.give_up_after)
    handled, ended = serve(
        args.state,
        make_trainer,
        poll_s=args.poll,
        rounds=args.rounds,
        retry=retry,
        on_progress=say,
    )
    say(f"done: {handled} rounds; {ended}")
    return 0


def _build_trainer(
    args: argparse.Namespace,
    state: StateDir,
    identity: dict[str, Any],
    say: Callable[[str], None],
) -> Any:
    from secfpp.participant.federation import federation_config
    from secfpp.participant.learning import configure_threads
    from secfpp.participant.trainer import TrainerSettings, build_trainer

    configure_threads(args.threads)
    settings = TrainerSettings(
        data=args.data,
        classes=args.classes,
        model=args.model,
        pretrained=args.pretrained,
        device=args.device,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        allow_random_weights=args.allow_random_weights_for_testing,
    )
    trainer = build_trainer(
        settings,
        federation_config(identity["config"]),
        participant_id=int(identity["index"]),
        cache_dir=args.state / "features",
        on_progress=say,
        progress_bar=not args.no_progress_bar and sys.stderr.isatty(),
    )
    from secfpp.participant.export import record_training

    record_training(state, trainer.strategy, settings.strategy_overrides)  # for 'export'
    template = trainer.template_accuracy(args.zero_shot_template)
    initial = trainer.zero_shot()
    state.write_json(
        "zero_shot.json",
        {
            "template": args.zero_shot_template,
            "accuracy": template,
            "initial_prompt_accuracy": initial,
        },
    )
    say(
        f"held-out accuracy before training: zero-shot '{args.zero_shot_template}' "
        f"{template:.3f}, initial learned prompt {initial:.3f}"
    )
    return trainer


def _status(args: argparse.Namespace) -> int:
    state = StateDir(args.state)
    identity = state.identity()
    shown = {k: v for k, v in identity.items() if k not in ("api_token", "config")}
    shown["progress"] = state.progress()
    rounds = state.root / "rounds"
    if rounds.exists():
        numbers = sorted(int(p.name) for p in rounds.iterdir() if p.name.isdigit())
        metrics = [state.read_json(f"rounds/{n}/metrics.json", {}) for n in numbers]
        shown["metrics"] = {n: m for n, m in zip(numbers, metrics, strict=True) if m}
    if not args.offline:
        client = _client(identity)
        try:
            task = client.task()
            shown["coordinator"] = task.model_dump(
                mode="json", include={"round", "stage", "action", "deadline", "cluster"}
            )
        except (CoordinatorUnavailableError, RequestRefusedError) as exc:
            shown["coordinator"] = f"unreachable: {exc}"
        finally:
            client.close()
    print(json.dumps(shown, indent=2, default=str))
    return 0


def _set_token(args: argparse.Namespace) -> int:
    """Check the new token with the coordinator (it must name this participant), then
    write it into ``identity.json`` (atomically, 0600)."""
    state = StateDir(args.state)
    identity = state.identity()
    token = read_token(args.token_file, API_TOKEN_ENV, "API token")
    client = _client({**identity, "api_token": token})
    try:
        me = client.me()
    finally:
        client.close()
    if me.participant_id != identity["participant_id"]:
        raise StateError(
            f"the token belongs to participant {me.participant_id}, not to "
            f"{identity['participant_id']} of {args.state}"
        )
    state.write_json(state.IDENTITY, {**identity, "api_token": token})
    print(f"new API token installed in {args.state}")
    return 0


def _quiet_open_clip(record: logging.LogRecord) -> bool:
    """Drop open_clip's INFO lines (model parsing and building, tokenizer) without -v."""
    return record.levelno >= logging.WARNING or "open_clip" not in record.pathname


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    if not args.verbose:  # one line per request and poll would drown what matters
        logging.getLogger("httpx").setLevel(logging.WARNING)
        for handler in logging.getLogger().handlers:  # open_clip logs its steps on the root
            handler.addFilter(_quiet_open_clip)
    command = {"enroll": _enroll, "run": _run, "status": _status, "set-token": _set_token}.get(
        args.command, getattr(args, "handler", None)
    )
    assert command is not None, args.command
    return guarded(lambda: command(args))


if __name__ == "__main__":
    sys.exit(main())
