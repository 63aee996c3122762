"""Zero-shot accuracy of the shipped ``tiny-offline`` backbone on every built-in domain.

For each registered built-in domain (the four the backbone was pretrained on and the ones it
never saw), the held-out split (seed 0) is classified with the domain's hand-written prompt
(``DomainSpec.prompt_template``, e.g. ``"a photo of the digit {}."``), nothing learned, and
the table (accuracy, chance, ratio, role, whether the backbone saw the domain) is written to
``docs/results/zero-shot.md`` with the date, machine and command.

Usage: ``python scripts/zero_shot_domains.py [--out docs/results/zero-shot.md] [--limit N]``
(``--limit``: at most N held-out images per domain, a seeded choice; default all).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages first

from demo.data import DOMAINS, USER
from secfpp.participant.backbones import (
    register_offline_models,
    tiny_offline_checkpoint_path,
)
from secfpp.participant.backbones.zeroshot import images_to_tensor, zeroshot_accuracy
from secfpp.participant.learning import configure_threads, load_backbone

DEFAULT_OUT = Path("docs/results/zero-shot.md")


def measure(limit: int | None = None) -> list[dict[str, Any]]:
    """One row per built-in domain: name, role, pretrained, classes, images, accuracy, chance."""
    configure_threads(1)
    register_offline_models()
    backbone = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="cpu")
    model = cast(Any, backbone.model)
    model.eval()
    rows = []
    for name, spec in DOMAINS.items():
        if spec.role == USER:
            continue
        data = spec.load("test", seed=0)
        if limit is not None and len(data) > limit:
            pick = np.sort(np.random.default_rng(0).choice(len(data), limit, replace=False))
            data = data.subset(pick)
        accuracy = zeroshot_accuracy(
            model,
            backbone.tokenizer,
            images_to_tensor(data.images, backbone.preprocess),
            data.labels,
            spec.class_names,
            [spec.prompt_template],
        )
        chance = 1 / len(spec.class_names)
        rows.append(
            {
                "domain": name,
                "role": spec.role,
                "pretrained": spec.pretrained,
                "classes": len(spec.class_names),
                "images": len(data),
                "prompt": spec.prompt_template,
                "accuracy": accuracy,
                "chance": chance,
            }
        )
        print(f"{name:20} {accuracy:6.1%} (chance {chance:.1%})", flush=True)
    return rows


def _cpu() -> str:
    """The CPU's model name (Linux), else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def render(rows: list[dict[str, Any]], command: str, seconds: float) -> str:
    """The Markdown page."""
    lines = [
        "# Zero-shot accuracy of the shipped backbone, per domain",
        "",
        f"Measured {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {_cpu()} "
        f"({os.cpu_count()} CPUs, one torch thread, Python {platform.python_version()}) in "
        f"{seconds:.0f} s by `{command}`.",
        "",
        "`tiny-offline` classifies each domain's held-out split (seed 0) with the domain's "
        "hand-written prompt, nothing learned. *Pretrained* says whether the backbone's "
        "pretraining (`scripts/pretrain_tiny_clip.py`) used the domain's training split; "
        "*role* says whether the split rule's parameters may be chosen on the domain "
        "(`tuning`) or never (`held-out`, see `demo/data/symbols.py`). A domain the backbone "
        "never saw is near chance: its class names were never paired with its images, so "
        "only learned prompts (and SecPC's data signal) can use it.",
        "",
        "| domain | role | pretrained | classes | images | prompt | zero-shot | chance | ratio |",
        "|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['domain']} | {r['role']} | {'yes' if r['pretrained'] else 'no'} | "
            f"{r['classes']} | {r['images']} | `{r['prompt']}` | {r['accuracy']:.1%} | "
            f"{r['chance']:.1%} | {r['accuracy'] / r['chance']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--limit", type=int, default=None, help="held-out images per domain")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = measure(args.limit)
    command = "python scripts/zero_shot_domains.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, command.strip(), time.monotonic() - started))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
