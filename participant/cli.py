"""``secfpp-participant``: the daemon an organization runs next to its data.

Typical use::

    secfpp-participant enroll --coordinator https://coord.example:8443 \\
        --ca-bundle ca.pem --token sfe_... --name hospital-a --state ./state
    secfpp-participant run --state ./state --data ./images
    secfpp-participant status --state ./state

``enroll`` creates the X25519 key pair (0600) and registers it; ``run`` loops: fetch
the task, train / share / compute, upload, with retries on network errors and 5xx and a
clear stop on a 4xx that explains what was refused; ``status`` shows where it stands.
Killing the daemon at any point and running it again continues the round it was in.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from participant.client import CoordinatorClient, CoordinatorUnavailableError, RequestRefusedError
from participant.state import StateDir, StateError

__all__ = ["main"]

log = logging.getLogger("secfpp.participant")

EXIT_REFUSED = 2
EXIT_UNAVAILABLE = 3
EXIT_CONFIG = 4


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="secfpp-participant",
        description="SecFPP participant daemon: learns CLIP prompts with the federation "
        "without revealing data, prompts or updates.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'secfpp-participant COMMAND --help' for the options of a command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("enroll", help="create keys and register with the coordinator")
    p.add_argument("--coordinator", required=True, help="coordinator URL, e.g. https://host:8443")
    p.add_argument("--token", required=True, help="one-time enrollment token from the admin")
    p.add_argument("--name", required=True, help="display name of this organization")
    p.add_argument("--ca-bundle", help="PEM CA bundle that signed the coordinator's certificate")
    p.add_argument("--state", required=True, type=Path, help="state directory to create")

    p = sub.add_parser("run", help="take part in rounds until the federation is done")
    p.add_argument("--state", required=True, type=Path, help="state directory from 'enroll'")
    p.add_argument(
        "--data", required=True, help="image folder (root/<class>/*.png|jpg) or CSV of path,label"
    )
    p.add_argument("--classes", help="class list file (one name per line), optional")
    p.add_argument("--model", default="tiny-offline", help="open_clip model name")
    p.add_argument("--pretrained", help="checkpoint file or open_clip model directory")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--epochs", type=int, default=2, help="local epochs per round")
    p.add_argument("--lr", type=float, default=0.002, help="SGD learning rate")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 lets several participants share a machine)",
    )
    p.add_argument("--rounds", type=int, help="stop after this many rounds (default: all)")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between task polls")
    p.add_argument("--no-progress-bar", action="store_true")
    p.add_argument(
        "--zero-shot-template",
        default="a photo of a {}.",
        help="hand-written prompt of the zero-shot baseline ({} = class name)",
    )

    p = sub.add_parser("status", help="show enrollment, round progress and last metrics")
    p.add_argument("--state", required=True, type=Path)
    p.add_argument("--offline", action="store_true", help="do not ask the coordinator")
    return parser


def _client(identity: dict[str, object]) -> CoordinatorClient:
    ca = identity.get("ca_bundle")
    return CoordinatorClient.connect(
        str(identity["coordinator_url"]),
        ca_bundle=str(ca) if ca else None,
        token=str(identity["api_token"]),
    )


def _enroll(args: argparse.Namespace) -> int:
    from participant.enrollment import enroll

    client = CoordinatorClient.connect(args.coordinator, ca_bundle=args.ca_bundle)
    try:
        ident = enroll(
            client,
            StateDir(args.state),
            coordinator_url=args.coordinator,
            enrollment_token=args.token,
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
    from participant.engine import Engine
    from participant.learning import configure_threads
    from participant.trainer import TrainerSettings, build_trainer

    configure_threads(args.threads)
    state = StateDir(args.state)
    identity = state.identity()
    name = identity.get("display_name", f"participant-{identity['index']}")

    def say(text: str) -> None:
        log.info("[%s] %s", name, text)

    settings = TrainerSettings(
        data=args.data,
        classes=args.classes,
        model=args.model,
        pretrained=args.pretrained,
        device=args.device,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
    )
    trainer = build_trainer(
        settings,
        identity["config"],
        participant_id=int(identity["index"]),
        cache_dir=args.state / "features",
        on_progress=say,
        progress_bar=not args.no_progress_bar and sys.stderr.isatty(),
    )
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
    client = _client(identity)
    try:
        engine = Engine(client, state, trainer, poll_s=args.poll, on_progress=say)
        handled = engine.run(rounds=args.rounds)
    finally:
        client.close()
    say(f"done: {handled} rounds")
    return 0


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
            shown["coordinator"] = {
                k: task.get(k) for k in ("round", "stage", "action", "deadline", "cluster")
            }
        except (CoordinatorUnavailableError, RequestRefusedError) as exc:
            shown["coordinator"] = f"unreachable: {exc}"
        finally:
            client.close()
    print(json.dumps(shown, indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    from participant.learning import LearningError

    try:
        command = {"enroll": _enroll, "run": _run, "status": _status}[args.command]
        return command(args)
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
    except (StateError, LearningError) as exc:
        log.error("%s", exc)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
