"""Write the demo's offline images as class folders, the layout the participant daemon reads.

``python -m demo.folders --domain handwritten_digits --parts 3 --per-part 120 --out ./images``
writes ``./images/part-0/<class name>/*.png`` ... ``./images/part-2/...``: disjoint slices
of the domain's training split (``--split test`` for held-out images), one per participant,
so that a first federation can run on real folders without any download. Domains:
:data:`demo.data.DOMAINS` (``--list``). Each image is a 32 x 32 RGB PNG; the daemon resizes
as its backbone needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from demo.data import DOMAINS, load_domain

__all__ = ["write_folders"]


def write_folders(
    domain: str, out: Path, *, parts: int, per_part: int, split: str = "train", seed: int = 0
) -> list[Path]:
    """Write ``parts`` disjoint folders of ``per_part`` images each; return their paths.

    Raises:
        ValueError: unknown domain, or the split holds fewer than ``parts * per_part`` images.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; one of {', '.join(sorted(DOMAINS))}")
    if parts < 1 or per_part < 1:
        raise ValueError("--parts and --per-part must be at least 1")
    data = load_domain(domain, "test" if split == "test" else "train", seed=seed)
    need = parts * per_part
    if need > len(data):
        raise ValueError(f"{domain} {split} has {len(data)} images, fewer than {need} asked for")
    order = np.random.default_rng(seed).permutation(len(data))[:need]
    written = []
    for part in range(parts):
        root = out / f"part-{part}"
        for k, i in enumerate(order[part * per_part : (part + 1) * per_part]):
            folder = root / data.class_names[int(data.labels[i])]
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(data.images[i]).save(folder / f"{k:05d}.png")
        written.append(root)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.folders",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--domain", default="handwritten_digits", help="an offline domain")
    parser.add_argument("--parts", type=int, default=3, help="folders (one per participant)")
    parser.add_argument("--per-part", type=int, default=120, help="images per folder")
    parser.add_argument("--split", choices=["train", "test"], default="train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("images"))
    parser.add_argument("--list", action="store_true", help="list the domains and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(sorted(DOMAINS)))
        return 0
    try:
        paths = write_folders(
            args.domain,
            args.out,
            parts=args.parts,
            per_part=args.per_part,
            split=args.split,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
