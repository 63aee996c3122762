"""The participant's compute on CUDA: training steps, a round's client work, the privacy overhead.

Prints a table (not a test) and, with ``--out``, writes it as Markdown with the date, the
machine and the command. For each backbone (``tiny-offline``, the shipped one; ``ViT-B-16``
with random weights, which time exactly like trained ones) and each precision (fp32, and
fp16 autocast on CUDA), on the device asked for:

* **step**: one optimizer step of the SecFPP strategy (global + local context, the text tower
  run for every class, cross-entropy on cached image features, backward through the text
  tower into the context), mean over ``--steps`` steps after one warm-up pass, synchronized;
* **round training**: ``--epochs`` passes over ``--images`` cached image features, as a
  daemon trains in one round (``PromptTrainer`` calls the strategy the same way);
* **peak memory**: ``torch.cuda.max_memory_allocated`` over the round (CUDA only);
* **privacy overhead**: the crypto a participant adds to that round, on the CPU as the daemon
  runs it: quantize + LCC-share + seal its update of ``n_ctx x width`` entries for a committee
  (``bench.crypto.committee.aggregation``: one participant's share, one member's open + sum), as a
  fraction of the round's training time (the clustering vector, 128 entries, adds little).

Without CUDA the benchmark runs on the CPU and says so in its first line; ``--device cuda``
then fails with that message instead. One process, one torch thread on the CPU.

Usage: ``python -m bench.participant.cuda [--quick] [--device auto|cuda|cpu] [--out
docs/results/cuda.md]``
"""

from __future__ import annotations

import os

# The privacy overhead is CPU time of one thread (time.process_time counts every thread): on a
# many-core GPU host, BLAS and OpenMP would otherwise spread the field products over all cores
# and the figure would sum them. Set before numpy and torch load their thread pools.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import contextlib
import datetime as dt
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.crypto.committee import aggregation, setting
from secfpp.participant.learning import get_strategy, load_backbone
from secfpp.participant.learning.runtime import configure_threads

CLASSES = [f"class {i}" for i in range(10)]


@dataclass(frozen=True)
class Row:
    model: str
    precision: str
    step_ms: float
    round_s: float
    peak_mib: float | None
    share_s: float
    member_s: float

    @property
    def overhead(self) -> float:
        return (self.share_s + self.member_s) / self.round_s


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_training(
    model: str, device: torch.device, *, autocast: bool, images: int, epochs: int, steps: int
) -> tuple[float, float, float | None, int]:
    """(ms per step, s per round, peak MiB or None, context width) for one backbone."""
    backbone = load_backbone(
        model, None, device=device.type, init_seed=0, allow_random_weights=model != "tiny-offline"
    )
    if not autocast:  # the prompt learner enters backbone.autocast(): make it a no-op
        object.__setattr__(backbone, "autocast", contextlib.nullcontext)
    strategy = get_strategy("secfpp", backbone=backbone, classnames=CLASSES, n_ctx=16, seed=0)
    width = int(strategy.prompt().shape[-1])
    generator = torch.Generator().manual_seed(0)
    dim = int(backbone.model.visual.output_dim)
    features = torch.nn.functional.normalize(torch.randn(images, dim, generator=generator), dim=1)
    labels = torch.randint(0, len(CLASSES), (images,), generator=generator)
    batch = strategy.config.batch_size
    few = features[: batch * 2], labels[: batch * 2]
    strategy.train_round(*few, epochs=1)  # warm-up: kernels, allocator, caches
    _sync(device)
    start = time.perf_counter()
    done = 0
    while done < steps:
        done += strategy.train_round(*few, epochs=1).metrics.steps
    _sync(device)
    step_ms = (time.perf_counter() - start) / done * 1e3
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    strategy.train_round(features, labels, epochs=epochs)
    _sync(device)
    round_s = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return step_ms, round_s, peak, width


def privacy_cost(entries: int, n: int) -> tuple[float, float]:
    """CPU seconds of one participant's share + seal and one member's open + sum."""
    s = setting(n, collusion=0.1, dropout=0.25, committee=n > 128)
    cost = aggregation(s, entries, sample=1)
    return cost.share_s, cost.member_s


def run(args: argparse.Namespace) -> tuple[str, list[Row]]:
    cuda = torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        raise SystemExit("CUDA is not available on this machine (torch.cuda.is_available())")
    device = torch.device("cuda" if (cuda and args.device != "cpu") else "cpu")
    configure_threads(1)  # CPU ops and the privacy cost run on one thread, also beside CUDA
    where = (
        f"CUDA: {torch.cuda.get_device_name(device)}"
        if device.type == "cuda"
        else "CUDA was not available: run on the CPU"
        if not cuda
        else "CPU (asked for)"
    )
    rows = []
    models = ["tiny-offline"] if args.quick else ["tiny-offline", "ViT-B-16"]
    precisions = [False, True] if device.type == "cuda" else [False]
    for model in models:
        for autocast in precisions:
            step_ms, round_s, peak, width = time_training(
                model,
                device,
                autocast=autocast,
                images=args.images,
                epochs=args.epochs,
                steps=args.steps,
            )
            share_s, member_s = privacy_cost(16 * width, args.participants)
            rows.append(
                Row(
                    model,
                    "fp16 autocast" if autocast else "fp32",
                    step_ms,
                    round_s,
                    peak,
                    share_s,
                    member_s,
                )
            )
            print(f"  {model} {rows[-1].precision}: {step_ms:.1f} ms/step", file=sys.stderr)
    return where, rows


def markdown(where: str, rows: list[Row], args: argparse.Namespace, seconds: float) -> str:
    load = os.getloadavg()
    head = (
        "# The participant's compute on CUDA (`python -m bench.participant.cuda`)\n\n"
        f"*Generated by `python -m bench.participant.cuda {' '.join(args.argv)}` on "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC in {seconds:.0f} s; {where}; "
        f"host {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f}; torch {torch.__version__}.*\n\n"
        f"SecFPP strategy, n_ctx = 16, {len(CLASSES)} classes, batch 32; a round is "
        f"{args.epochs} epochs over {args.images} cached image features. Privacy overhead: "
        f"one participant's share + seal of its update and one committee member's open + "
        f"sum at N = {args.participants} (CPU, one thread), over the round's training time.\n\n"
        "| backbone | precision | ms / step | s / round | peak GPU MiB | share + seal s | "
        "open + sum s | privacy overhead |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
    )
    body = "".join(
        f"| {r.model} | {r.precision} | {r.step_ms:.1f} | {r.round_s:.2f} | "
        f"{'-' if r.peak_mib is None else f'{r.peak_mib:.0f}'} | {r.share_s:.3f} | "
        f"{r.member_s:.3f} | {r.overhead:.1%} |\n"
        for r in rows
    )
    return head + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.participant.cuda", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny-offline only, few steps")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--images", type=int, default=240, help="images per round")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per backbone")
    parser.add_argument("--participants", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="write the table as Markdown")
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    args.argv = raw
    if args.quick:
        args.images, args.steps, args.participants = 64, 4, 16
    start = time.perf_counter()
    where, rows = run(args)
    text = markdown(where, rows, args, time.perf_counter() - start)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
