"""Pretrain the shipped ``tiny-offline`` CLIP contrastively on image-caption pairs, on one thread.

Usage (from the repository root; about 8 minutes on one shared CPU thread; needs Debian's
``dataset-fashion-mnist``, see :mod:`demo.data.fashion`)::

    python scripts/pretrain_tiny_clip.py            # writes participant/backbones/weights/
    python scripts/pretrain_tiny_clip.py --steps 50 --out /tmp/tiny   # a quick trial run

Data: the training splits of the four offline domains (:data:`demo.data.DOMAINS`):
handwritten digits, printed digits, printed letters, Fashion-MNIST clothing. Each step draws
``batch_size / 4`` images per domain (with replacement), shifts each by up to 2 pixels, and pairs
each with a caption drawn from the templates that fit it: domain-neutral ones ("a photo of the
digit seven.", "a photo of a sneaker.") or ones for its own domain ("a handwritten seven.").

Loss: CLIP's symmetric InfoNCE with a learnable logit scale ``s`` (init 1/0.07, capped at 100),
over the batch's *distinct* captions. With only 46 classes a batch holds many images of one class,
so a plain one-to-one InfoNCE would push apart true pairs; as in UniCL (Yang et al., 2022) the
targets are instead every caption that fits an image: with ``M[i, j] = 1`` when caption ``j`` names
image ``i``'s class with a template neutral or for ``i``'s domain, ``L = (CE(s F T^T, rownorm(M))
+ CE(s T F^T, rownorm(M^T))) / 2`` for unit image and text embeddings ``F`` (B x D), ``T`` (U x D).

Optimiser: AdamW (betas 0.9/0.98, weight decay 0.1 on weight matrices only), linear warm-up then
cosine decay, gradient norm clipped at 1. Everything is seeded and single-threaded, so a rerun on
the same torch build reproduces the checkpoint.

Output: ``tiny-offline.pt`` (fp16 state dict, loadable by ``open_clip.create_model(...,
pretrained=path)``) and ``tiny-offline.json`` (seed, steps, data, timing and the zero-shot accuracy
of the *saved fp16 weights* on each domain's held-out split, through open_clip's own preprocess).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import hashlib
import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import open_clip
import torch
from open_clip.model import CLIP
from open_clip.transformer import text_global_pool
from torch.nn.functional import normalize, pad

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages first

from demo.data.fashion import FASHION_NAMES
from demo.data.synthetic import (
    DIGIT_NAMES,
    LETTER_NAMES,
    PRETRAINING_DOMAINS,
    DomainData,
)
from demo.data.synthetic import DOMAINS as REGISTERED
from secfpp.participant.backbones.offline import (
    TINY_OFFLINE,
    WEIGHTS_DIR,
    register_offline_models,
)
from secfpp.participant.backbones.zeroshot import (
    Preprocess,
    Tokenizer,
    images_to_tensor,
    zeroshot_accuracy,
)

#: Only the four pretraining domains (the registry also holds the held-out ones).
DOMAINS = {name: REGISTERED[name] for name in PRETRAINING_DOMAINS}

#: Captions for every digit image, whichever domain.
DIGIT_TEMPLATES = (
    "a photo of the digit {}.",
    "a photo of a {}.",
    "the digit {}.",
    "a picture of the number {}.",
    "an image of a {}.",
)
#: Captions for every letter image (letters come from one domain; class names read "letter q").
LETTER_TEMPLATES = (
    "a photo of the {}.",
    "a photo of a {}.",
    "the {}.",
    "a printed {}.",
    "a typed {}.",
    "the {} in a printed font.",
    "an image of the {}.",
)
#: Captions for every clothing image (one domain; the zero-shot prompt is "a photo of a {}.").
CLOTHING_TEMPLATES = (
    "a photo of a {}.",
    "a photo of the {}.",
    "a {}.",
    "an image of a {}.",
    "a picture of a {}.",
    "a product photo of a {}.",
    "a grayscale photo of a {}.",
)
#: Captions that also say how the digit was made, for that domain only.
DOMAIN_TEMPLATES: dict[str, tuple[str, ...]] = {
    "handwritten_digits": (
        "a handwritten {}.",
        "a handwritten digit {}.",
        "the number {} written by hand.",
        "a scan of a handwritten {}.",
        "a white {} drawn on black.",
    ),
    "printed_digits": (
        "a printed {}.",
        "a printed digit {}.",
        "the digit {} in a printed font.",
        "a typed number {}.",
        "a dark {} printed on light paper.",
    ),
    "printed_letters": (),
    "fashion": (),
}
CLASS_NAMES: tuple[str, ...] = DIGIT_NAMES + LETTER_NAMES + FASHION_NAMES  # global class index


def neutral_templates(name: str) -> tuple[str, ...]:
    """The domain-neutral captions for class ``name`` (digit, letter or clothing)."""
    if name in DIGIT_NAMES:
        return DIGIT_TEMPLATES
    if name in LETTER_NAMES:
        return LETTER_TEMPLATES
    if name in FASHION_NAMES:
        return CLOTHING_TEMPLATES
    raise ValueError(f"Argument 'name' must be a digit, letter or clothing class, not {name!r}")


@dataclass(frozen=True)
class CaptionBank:
    """Every caption, tokenized once, and which (domain, global class) each one fits.

    ``fits[k]`` is a ``(n_captions,)`` bool mask for key ``k = domain_index * n_classes + class``.
    """

    texts: list[str]
    tokens: torch.Tensor  # (n_captions, context_length) int64
    fits: torch.Tensor  # (n_domains * n_classes, n_captions) bool


def build_caption_bank(tokenizer: Tokenizer) -> CaptionBank:
    domains = list(DOMAINS)
    texts: list[str] = []
    fits_rows: list[list[tuple[int, int]]] = []  # per caption: the (domain, class) keys it fits
    for class_index, name in enumerate(CLASS_NAMES):
        owners = [d for d, spec in DOMAINS.items() if name in spec.class_names]
        for template in neutral_templates(name):
            texts.append(template.format(name))
            fits_rows.append([(domains.index(d), class_index) for d in owners])
        for domain in owners:
            for template in DOMAIN_TEMPLATES[domain]:
                texts.append(template.format(name))
                fits_rows.append([(domains.index(domain), class_index)])
    fits = torch.zeros(len(domains) * len(CLASS_NAMES), len(texts), dtype=torch.bool)
    for caption, keys in enumerate(fits_rows):
        for domain_index, class_index in keys:
            fits[domain_index * len(CLASS_NAMES) + class_index, caption] = True
    return CaptionBank(texts=texts, tokens=tokenizer(texts), fits=fits)


def encode_text_prefix(model: CLIP, tokens: torch.Tensor) -> torch.Tensor:
    """``model.encode_text(tokens, normalize=True)`` on the shortest prefix that holds every EOT.

    Exact, not an approximation: the text transformer is causal (position ``p`` attends to
    positions ``<= p`` only) and the pooled feature is read at the EOT position, so positions after
    the last EOT cannot change it. Captions are at most ~10 tokens of the 32-token context, so this
    makes the text tower about 3x cheaper during pretraining; ``main`` checks the equality.
    """
    n = int(tokens.argmax(dim=-1).max()) + 1  # EOT has the largest token id
    prefix = tokens[:, :n]
    x = model.token_embedding(prefix) + model.positional_embedding[:n]
    x = model.transformer(x, attn_mask=model.attn_mask[:n, :n])
    x = text_global_pool(model.ln_final(x), prefix, model.text_pool_type)
    return normalize(x @ model.text_projection, dim=-1)


def to_pixels(images: np.ndarray, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``(N, 32, 32, 3)`` uint8 -> ``(N, 3, 32, 32)`` float, as open_clip's preprocess at 32 px."""
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0)
    return (pixels - mean[:, None, None]) / std[:, None, None]


def random_shift(pixels: torch.Tensor, rng: np.random.Generator, max_shift: int) -> torch.Tensor:
    """Translate each image by up to ``max_shift`` pixels, replicating the border."""
    size = pixels.shape[-1]
    padded = pad(pixels, (max_shift,) * 4, mode="replicate")
    offsets = rng.integers(0, 2 * max_shift + 1, size=(len(pixels), 2))
    return torch.stack(
        [padded[i, :, dy : dy + size, dx : dx + size] for i, (dy, dx) in enumerate(offsets)]
    )


def multi_positive_clip_loss(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    logit_scale: torch.Tensor,
    fits: torch.Tensor,
) -> torch.Tensor:
    """Symmetric InfoNCE with every fitting pair a positive (see the module docstring)."""
    logits = logit_scale.exp() * image_features @ text_features.T  # (B, U)
    targets = fits.float()
    image_to_text = -(targets / targets.sum(1, keepdim=True) * logits.log_softmax(1)).sum(1)
    text_to_image = -(targets / targets.sum(0, keepdim=True) * logits.log_softmax(0)).sum(0)
    return (image_to_text.mean() + text_to_image.mean()) / 2


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, parameter in model.named_parameters():
        is_matrix = parameter.ndim >= 2 and "embedding" not in name and "token" not in name
        (decay if is_matrix else no_decay).append(parameter)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6)


def evaluate(
    model: CLIP,
    tokenizer: Tokenizer,
    preprocess: Preprocess,
    tests: dict[str, DomainData],
) -> dict[str, float]:
    """Zero-shot accuracy per domain with the domain's own prompt, through ``preprocess``."""
    model.eval()
    return {
        name: zeroshot_accuracy(
            model,
            tokenizer,
            images_to_tensor(data.images, preprocess),
            data.labels,
            data.class_names,
            [DOMAINS[name].prompt_template],
        )
        for name, data in tests.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--batch-size", type=int, default=128, help="divisible by 4 (domains)")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--max-shift", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--log-every", type=int, default=40)
    parser.add_argument(
        "--eval-every", type=int, default=0, help="also print held-out zero-shot accuracy (slower)"
    )
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    register_offline_models()

    print("loading data ...", flush=True)
    domains = list(DOMAINS)
    trains = {name: spec.load("train", seed=args.seed) for name, spec in DOMAINS.items()}
    tests = {name: spec.load("test", seed=args.seed) for name, spec in DOMAINS.items()}

    model = open_clip.create_model(TINY_OFFLINE)  # random init
    tokenizer = open_clip.get_tokenizer(TINY_OFFLINE)
    mean = torch.tensor(model.visual.preprocess_cfg["mean"])
    std = torch.tensor(model.visual.preprocess_cfg["std"])
    _, _, preprocess = open_clip.create_model_and_transforms(TINY_OFFLINE)
    sample = trains["printed_letters"].images[:8]
    if not torch.allclose(
        to_pixels(sample, mean, std), images_to_tensor(sample, preprocess), atol=1e-5
    ):
        raise RuntimeError("the training pixels differ from open_clip's preprocess")

    pixels = {name: to_pixels(data.images, mean, std) for name, data in trains.items()}
    global_labels = {
        name: torch.as_tensor([CLASS_NAMES.index(data.class_names[y]) for y in data.labels])
        for name, data in trains.items()
    }
    bank = build_caption_bank(tokenizer)
    with torch.no_grad():
        full = model.encode_text(bank.tokens[:32], normalize=True)
        if not torch.allclose(encode_text_prefix(model, bank.tokens[:32]), full, atol=1e-5):
            raise RuntimeError("the prefix text encoder differs from open_clip's encode_text")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{TINY_OFFLINE}: {n_params:,} parameters; {len(bank.texts)} captions", flush=True)

    optimizer = make_optimizer(model, args.lr, args.weight_decay)
    per_domain = args.batch_size // len(domains)
    model.train()
    start = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.steps, args.lr, args.warmup)
        batch, keys = [], []
        for domain_index, name in enumerate(domains):
            rows = torch.as_tensor(rng.integers(0, len(pixels[name]), size=per_domain))
            batch.append(pixels[name][rows])
            keys.append(domain_index * len(CLASS_NAMES) + global_labels[name][rows])
        images = random_shift(torch.cat(batch), rng, args.max_shift)
        fits = bank.fits[torch.cat(keys)]  # (B, n_captions)
        chosen = [int(rng.choice(np.flatnonzero(row.numpy()))) for row in fits]
        captions = torch.as_tensor(sorted(set(chosen)))

        image_features = model.encode_image(images, normalize=True)
        text_features = encode_text_prefix(model, bank.tokens[captions])
        loss = multi_positive_clip_loss(
            image_features, text_features, model.logit_scale, fits[:, captions]
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            print(
                f"step {step + 1:4d}/{args.steps}  loss {loss.item():.3f}  "
                f"scale {model.logit_scale.exp().item():5.1f}  "
                f"{time.perf_counter() - start:6.1f} s",
                flush=True,
            )
        if args.eval_every and (step + 1) % args.eval_every == 0:
            live = evaluate(model, tokenizer, preprocess, tests)
            print("  zero-shot " + "  ".join(f"{k} {v:.1%}" for k, v in live.items()), flush=True)
            model.train()
    train_seconds = time.perf_counter() - start

    args.out.mkdir(parents=True, exist_ok=True)
    checkpoint = args.out / f"{TINY_OFFLINE}.pt"
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save(state, checkpoint)

    from secfpp.participant.learning.backbone import state_fingerprint

    # Evaluate what ships: the fp16 file, loaded by name through open_clip.
    shipped, _, preprocess = open_clip.create_model_and_transforms(
        TINY_OFFLINE, pretrained=str(checkpoint)
    )
    accuracy = evaluate(shipped, tokenizer, preprocess, tests)
    for name, value in accuracy.items():
        chance = 1 / len(DOMAINS[name].class_names)
        print(f"zero-shot {name:20s} {value:6.1%}  (chance {chance:.1%})")

    record = {
        "model": TINY_OFFLINE,
        "model_config": open_clip.get_model_config(TINY_OFFLINE),
        "parameters": n_params,
        "checkpoint": checkpoint.name,
        "checkpoint_bytes": checkpoint.stat().st_size,
        "checkpoint_sha256": hashlib.sha256(checkpoint.read_bytes()).hexdigest(),
        # the fingerprint federations pin (of the loaded tensors, whatever the file format);
        # after retraining, also run scripts/backbone_catalog.py for the coordinator's copy
        "weights_sha256": state_fingerprint(shipped),
        "dtype": "float16",
        "seed": args.seed,
        "steps": args.steps,
        "batch_size": per_domain * len(domains),
        "lr": args.lr,
        "warmup": args.warmup,
        "weight_decay": args.weight_decay,
        "max_shift": args.max_shift,
        "threads": args.threads,
        "train_seconds": round(train_seconds, 1),
        "final_loss": round(float(loss.item()), 4),
        "final_logit_scale": round(float(model.logit_scale.exp().item()), 2),
        "data": {
            name: {"train": len(trains[name]), "test": len(tests[name]), "split_seed": args.seed}
            for name in domains
        },
        "captions": {
            "digits": list(DIGIT_TEMPLATES),
            "letters": list(LETTER_TEMPLATES),
            "clothing": list(CLOTHING_TEMPLATES),
            **{name: list(t) for name, t in DOMAIN_TEMPLATES.items()},
        },
        "zeroshot_prompt": {name: spec.prompt_template for name, spec in DOMAINS.items()},
        "zeroshot_accuracy_test": {name: round(v, 4) for name, v in accuracy.items()},
        "chance": {name: round(1 / len(spec.class_names), 4) for name, spec in DOMAINS.items()},
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "open_clip": open_clip.__version__,
        },
    }
    (args.out / f"{TINY_OFFLINE}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {checkpoint} ({checkpoint.stat().st_size / 1e6:.1f} MB), {train_seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
