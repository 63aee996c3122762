"""The ``secfpp-participant`` commands around the model: fingerprint, export, predict, evaluate.

::

    secfpp-participant fingerprint --model ViT-B-16 --pretrained vit-b-16.safetensors
    secfpp-participant export --state ./state [--out model.safetensors]
    secfpp-participant predict --model-file model.safetensors --data new-images/ [--top-k 3]
    secfpp-participant evaluate --model-file model.safetensors --data labelled/

``fingerprint`` prints the SHA-256 of a backbone's loaded weights (what a federation pins in
``backbone.weights_sha256``). ``export`` writes the personalized prompt of the last published
round (:mod:`participant.export`); ``predict`` writes a CSV (``path,prediction,probability``
and, with ``--top-k K``, the next ``K - 1`` classes) to ``--out`` or standard output;
``evaluate`` prints the accuracy on a labelled folder (``root/<class>/*``) or ``path,label``
CSV. Torch is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_model_commands"]


def _backbone_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pretrained",
        help="the backbone's checkpoint file or open_clip model directory (default: the "
        "shipped weights of tiny-offline, or the file the daemon trained with)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=["auto", "cuda", "cpu"],
        help="where the backbone runs (auto: CUDA when available)",
    )


def add_model_commands(sub: Any) -> None:
    """Add the four commands to the ``secfpp-participant`` sub-parsers ``sub``."""
    p = sub.add_parser(
        "fingerprint",
        help="print the SHA-256 fingerprint of a backbone's weights (for backbone.weights_sha256)",
        allow_abbrev=False,
    )
    p.add_argument("--model", required=True, help="open_clip model name, e.g. ViT-B-16")
    _backbone_options(p)
    p.set_defaults(handler=_fingerprint)

    p = sub.add_parser(
        "export",
        help="write the personalized prompt of the last published round to a file",
        allow_abbrev=False,
    )
    p.add_argument("--state", required=True, type=Path, help="state directory of 'run'")
    p.add_argument(
        "--out", type=Path, help="file to write (default: STATE/personalized.safetensors)"
    )
    _backbone_options(p)
    p.set_defaults(handler=_export)

    p = _model_file_command(
        sub,
        "predict",
        "classify images with an exported model (CSV out)",
        "image folder (searched recursively) or CSV of paths",
    )
    p.add_argument("--out", type=Path, help="CSV file to write (default: standard output)")
    p.add_argument("--top-k", type=int, default=1, help="classes per image (default: 1)")
    p.set_defaults(handler=_predict)

    p = _model_file_command(
        sub,
        "evaluate",
        "accuracy of an exported model on a labelled folder or CSV",
        "labelled folder (root/<class>/*) or CSV of path,label",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=_evaluate)


def _model_file_command(sub: Any, name: str, what: str, data: str) -> argparse.ArgumentParser:
    """A command that reads an exported model file and a ``--data`` set."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=what, allow_abbrev=False)
    p.add_argument("--model-file", required=True, type=Path, help="file from 'export'")
    p.add_argument("--data", required=True, help=data)
    _backbone_options(p)
    return p


def _fingerprint(args: argparse.Namespace) -> int:
    from secfpp.participant.learning.backbone import load_backbone

    backbone = load_backbone(args.model, args.pretrained, device=args.device)
    print(backbone.fingerprint)
    return 0


def _export(args: argparse.Namespace) -> int:
    from secfpp.participant.export import export_personalized

    done = export_personalized(args.state, args.out, pretrained=args.pretrained, device=args.device)
    shown = "-" if done.held_out_accuracy is None else f"{done.held_out_accuracy:.4f}"
    print(
        f"exported the personalized prompt of round {done.round} to {done.path} "
        f"(held-out accuracy {shown}); the file stays on this machine"
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    from secfpp.participant.learning.errors import LearningConfigError
    from secfpp.participant.personalized import list_images, load_personalized

    model = load_personalized(args.model_file, pretrained=args.pretrained, device=args.device)
    k = args.top_k
    if not 1 <= k <= len(model.classnames):
        raise LearningConfigError("--top-k", f"must be in [1, {len(model.classnames)}], not {k}")
    paths = list_images(args.data)
    scores = model.scores(model.features(paths))
    probabilities = model.probabilities(scores)
    order = scores.argsort(dim=1, descending=True, stable=True)[:, :k].numpy()
    header = ["path", "prediction", "probability"]
    for rank in range(2, k + 1):
        header += [f"prediction_{rank}", f"probability_{rank}"]
    out = args.out.open("w", newline="", encoding="utf-8") if args.out else sys.stdout
    try:
        writer = csv.writer(out)
        writer.writerow(header)
        for path, row, probs in zip(paths, order, probabilities, strict=True):
            cells: list[str] = [str(path)]
            for c in row:
                cells += [model.classnames[int(c)], f"{probs[int(c)]:.6f}"]
            writer.writerow(cells)
    except BrokenPipeError:  # `predict ... | head`: the reader left; not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's exit flush must not raise again
    finally:
        if args.out:
            out.close()
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from secfpp.participant.personalized import load_personalized

    model = load_personalized(args.model_file, pretrained=args.pretrained, device=args.device)
    result = model.evaluate(args.data)
    if args.json:
        print(
            json.dumps(
                {
                    "accuracy": result.accuracy,
                    "correct": result.correct,
                    "images": result.images,
                    "per_class": {k: list(v) for k, v in result.per_class.items()},
                }
            )
        )
    else:
        print(
            f"accuracy {result.accuracy:.4f} ({result.correct} of {result.images} images, "
            f"{len(result.per_class)} classes) on {args.data}"
        )
    return 0
