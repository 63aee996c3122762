"""A participant's personalized prompt as one portable file, and the classifier it makes.

``secfpp-participant export`` writes the prompt the daemon classified with after its last
published round (the cluster's global prompt ``G`` plus the local prompt ``L``; for
``feddpa`` the personalized ``w_i``) to a ``.safetensors`` file: one tensor ``ctx``
(``n_ctx x d``, float32) and string metadata::

    format                   secfpp-personalized-prompt/1
    backbone_model           open_clip model name, e.g. tiny-offline
    backbone_weights_sha256  fingerprint of the weights it was trained on
    classnames               JSON list, in label order
    n_ctx, dim, ctx_init     prompt shape and the fixed base phrase (JSON; null: none)
    strategy, federation_id, participant_index, round, held_out_accuracy, exported_at

:func:`load_personalized` loads the backbone the file names (its shipped weights for
``tiny-offline``, else the checkpoint given), refuses weights with another fingerprint,
and returns a :class:`PersonalizedClassifier`. Its :meth:`~PersonalizedClassifier.evaluate`
runs the daemon's own code path (:func:`participant.learning.data.load_dataset`,
:func:`participant.learning.features.compute_features`,
:func:`participant.learning.evaluation.accuracy`), so the accuracy on the daemon's held-out
images is the accuracy the daemon reported, exactly.

Class scores are cosine similarities ``s = f @ t.T`` between the unit image features ``f``
(``N x embed_dim``) and the class text features ``t`` (``C x embed_dim``) of the prompt;
``predict`` is ``argmax s`` (what :func:`accuracy` counts) and ``predict_proba`` is
``softmax(exp(logit_scale) * s)``, CLIP's own probabilities.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from PIL import Image

from secfpp.participant.learning.backbone import Backbone, load_backbone
from secfpp.participant.learning.data import (
    IMAGE_SUFFIXES,
    ImageDataset,
    Sample,
    load_dataset,
    read_image_folder,
)
from secfpp.participant.learning.errors import BackboneMismatchError, LearningError
from secfpp.participant.learning.evaluation import accuracy
from secfpp.participant.learning.features import compute_features
from secfpp.participant.learning.images import ImageDecodeError, decode_image, upright_rgb
from secfpp.participant.learning.prompt_learner import PromptLearner

__all__ = [
    "FORMAT",
    "Evaluation",
    "PersonalizedClassifier",
    "PersonalizedModelError",
    "PromptFile",
    "list_images",
    "load_personalized",
    "read_prompt_file",
    "write_prompt_file",
]

FORMAT = "secfpp-personalized-prompt/1"
_BATCH = 64  # images per image-encoder call, as the daemon's feature cache


class PersonalizedModelError(LearningError):
    """A model file is missing, not a SecFPP personalized prompt, or inconsistent."""

    code = "invalid_model_file"


@dataclass(frozen=True)
class PromptFile:
    """What a model file holds: the context ``ctx`` (``n_ctx x dim`` float32) and metadata."""

    ctx: torch.Tensor
    model: str
    weights_sha256: str
    classnames: tuple[str, ...]
    ctx_init: str | None
    info: dict[str, Any]

    @property
    def n_ctx(self) -> int:
        return int(self.ctx.shape[0])

    def metadata(self) -> dict[str, str]:
        """The safetensors metadata (every value a string; JSON where not plain text)."""
        return {
            "format": FORMAT,
            "backbone_model": self.model,
            "backbone_weights_sha256": self.weights_sha256,
            "classnames": json.dumps(list(self.classnames)),
            "n_ctx": str(self.n_ctx),
            "dim": str(int(self.ctx.shape[1])),
            "ctx_init": json.dumps(self.ctx_init),
            **{k: json.dumps(v) for k, v in self.info.items()},
        }


def write_prompt_file(prompt: PromptFile, path: Path) -> Path:
    """Write ``prompt`` to ``path`` (mode 0600, atomically: temporary file, fsync, rename)."""
    from safetensors.torch import save

    data = save({"ctx": prompt.ctx.detach().float().cpu().contiguous()}, prompt.metadata())
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def _field(meta: Mapping[str, str], key: str, path: Path) -> str:
    if key not in meta:
        raise PersonalizedModelError(f"model file {path} lacks the metadata field '{key}'")
    return meta[key]


def read_prompt_file(path: str | Path) -> PromptFile:
    """Read and check a model file written by :func:`write_prompt_file`.

    Raises:
        PersonalizedModelError: unreadable, another format, or shapes and metadata disagree.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load

    file = Path(path)
    try:
        raw = file.read_bytes()
        tensors = load(raw)
        meta = _metadata(raw)
    except (OSError, SafetensorError, ValueError) as exc:
        raise PersonalizedModelError(
            f"model file {file} cannot be read as safetensors: {exc}"
        ) from None
    if meta.get("format") != FORMAT:
        raise PersonalizedModelError(
            f"model file {file} is not a SecFPP personalized prompt (format "
            f"{meta.get('format')!r}, expected {FORMAT!r}); write one with "
            "'secfpp-participant export'"
        )
    try:
        classnames = json.loads(_field(meta, "classnames", file))
        ctx_init = json.loads(_field(meta, "ctx_init", file))
        n_ctx, dim = int(_field(meta, "n_ctx", file)), int(_field(meta, "dim", file))
    except (json.JSONDecodeError, ValueError) as exc:
        raise PersonalizedModelError(f"model file {file} has malformed metadata: {exc}") from None
    ctx = tensors.get("ctx")
    if ctx is None or tuple(ctx.shape) != (n_ctx, dim) or ctx.dtype != torch.float32:
        shape = None if ctx is None else tuple(ctx.shape)
        raise PersonalizedModelError(
            f"model file {file} must hold a float32 tensor 'ctx' of shape ({n_ctx}, {dim}), "
            f"not {shape}"
        )
    if not bool(torch.isfinite(ctx).all()):
        raise PersonalizedModelError(f"model file {file}: 'ctx' has non-finite values")
    if (
        not isinstance(classnames, list)
        or not classnames
        or not all(isinstance(c, str) and c for c in classnames)
        or len(set(classnames)) != len(classnames)
    ):
        raise PersonalizedModelError(
            f"model file {file}: 'classnames' must be a list of distinct non-empty names"
        )
    if ctx_init is not None and not isinstance(ctx_init, str):
        raise PersonalizedModelError(f"model file {file}: 'ctx_init' must be a phrase or null")
    known = {"format", "backbone_model", "backbone_weights_sha256", "classnames"}
    known |= {"n_ctx", "dim", "ctx_init"}
    info = {k: _json_or_text(v) for k, v in meta.items() if k not in known}
    return PromptFile(
        ctx=ctx,
        model=_field(meta, "backbone_model", file),
        weights_sha256=_field(meta, "backbone_weights_sha256", file),
        classnames=tuple(classnames),
        ctx_init=ctx_init,
        info=info,
    )


def _metadata(raw: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors byte string (its JSON header)."""
    size = int.from_bytes(raw[:8], "little")
    if len(raw) < 8 + size:
        raise ValueError("truncated header")
    header = json.loads(raw[8 : 8 + size])
    meta = header.get("__metadata__") or {}
    return {str(k): str(v) for k, v in meta.items()}


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def list_images(data: str | Path) -> list[Path]:
    """The images to classify: every image under a directory (recursively, sorted), or the
    first column of a CSV (``path[,...]``; an optional ``path`` header; paths relative to
    the CSV's directory)."""
    import csv

    location = Path(data)
    if location.is_dir():
        found = sorted(
            p
            for p in location.rglob("*")
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")
        )
        if not found:
            endings = ", ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)
            raise PersonalizedModelError(f"no image ({endings}) under {location}")
        return found
    try:
        with location.open(newline="", encoding="utf-8-sig") as handle:
            rows = [r for r in csv.reader(handle) if r and r[0].strip()]
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise PersonalizedModelError(f"image list {location} cannot be read: {exc}") from None
    if rows and rows[0][0].strip().lower() == "path":
        rows = rows[1:]
    paths = []
    for line, row in enumerate(rows, start=1):
        path = Path(row[0].strip())
        path = path if path.is_absolute() else location.parent / path
        if not path.is_file():
            raise PersonalizedModelError(f"{location}: row {line}: image {path} does not exist")
        paths.append(path)
    if not paths:
        raise PersonalizedModelError(f"image list {location} names no image")
    return paths


@dataclass(frozen=True)
class Evaluation:
    """Accuracy on a labelled set: ``correct / images``, and per class ``(correct, images)``."""

    accuracy: float
    correct: int
    images: int
    per_class: dict[str, tuple[int, int]]


class PersonalizedClassifier:
    """An image classifier from a personalized prompt on its frozen backbone.

    ``predict(images)`` gives class names, ``predict_proba(images)`` a ``(N, C)`` array in
    the order of :attr:`classnames`; images are file paths or PIL images.
    """

    def __init__(self, prompt: PromptFile, backbone: Backbone) -> None:
        self.prompt = prompt
        self.backbone = backbone
        self.learner = PromptLearner(
            backbone,
            prompt.classnames,
            n_ctx=prompt.n_ctx,
            use_global=True,
            use_local=False,
            init_std=0.0,
            ctx_init=prompt.ctx_init,
        )
        self.ctx = prompt.ctx.to(backbone.device)

    @property
    def classnames(self) -> tuple[str, ...]:
        return self.prompt.classnames

    @torch.no_grad()
    def features(self, images: Sequence[str | Path | Image.Image]) -> torch.Tensor:
        """Unit image features ``(N, embed_dim)``, in batches as the daemon encodes them."""
        paths = [x for x in images if not isinstance(x, Image.Image)]
        if len(paths) == len(images):
            samples = [Sample(Path(p), 0) for p in paths]
            dataset = ImageDataset(samples, self.classnames, self.backbone.preprocess, source="")
            return compute_features(self.backbone, dataset, batch_size=_BATCH)[0]
        chunks = []
        for start in range(0, len(images), _BATCH):
            batch = [self._pixels(x) for x in images[start : start + _BATCH]]
            chunks.append(self.backbone.encode_images(torch.stack(batch)).cpu())
        return torch.cat(chunks) if chunks else torch.empty(0, self.backbone.embed_dim)

    def _pixels(self, image: str | Path | Image.Image) -> torch.Tensor:
        """The backbone's input for one image, decoded as training decoded it
        (:mod:`secfpp.participant.learning.images`: upright, 8 bits, opaque on white)."""
        if isinstance(image, Image.Image):
            return self.backbone.preprocess(upright_rgb(image))
        try:
            return self.backbone.preprocess(decode_image(Path(image)))
        except (OSError, ImageDecodeError) as exc:
            raise PersonalizedModelError(f"image {image} cannot be read: {exc}") from None

    @torch.no_grad()
    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """Cosine similarities ``(N, C)`` of unit image features with the class texts."""
        text = self.learner.text_features(self.ctx)
        return (features.to(self.backbone.device).float() @ text.T).cpu()

    def probabilities(self, scores: torch.Tensor) -> NDArray[np.float64]:
        """CLIP's class probabilities ``softmax(exp(logit_scale) * scores)``, ``(N, C)``."""
        scale = float(self.backbone.logit_scale.float().exp())
        return torch.softmax(scale * scores.double(), dim=1).numpy()

    def predict_proba(self, images: Sequence[str | Path | Image.Image]) -> NDArray[np.float64]:
        """Class probabilities of ``images``, ``(N, C)`` (see :meth:`probabilities`)."""
        return self.probabilities(self.scores(self.features(images)))

    def predict(self, images: Sequence[str | Path | Image.Image]) -> list[str]:
        """The class name of each image (``argmax`` of its scores)."""
        best = self.scores(self.features(images)).argmax(dim=1)
        return [self.classnames[int(i)] for i in best]

    def evaluate(self, data: str | Path) -> Evaluation:
        """Accuracy on a labelled image folder ``root/<class>/*`` or ``path,label`` CSV, whose
        classes are among this model's (the daemon's own code path, see module docstring)."""
        dataset = self.labelled(data)
        features, labels = compute_features(self.backbone, dataset, batch_size=_BATCH)
        result = accuracy(self.learner, features, labels, ctx=self.ctx)
        predicted = self.scores(features).argmax(dim=1)
        per_class = {}
        for c, name in enumerate(self.classnames):
            mask = labels == c
            if bool(mask.any()):
                per_class[name] = (int((predicted[mask] == c).sum()), int(mask.sum()))
        return Evaluation(result, round(result * len(dataset)), len(dataset), per_class)

    def labelled(self, data: str | Path) -> ImageDataset:
        """The labelled images of ``data`` with labels in this model's class order. A folder
        may hold a part of the classes (in the model's order, as the daemon reads them);
        a class directory the model does not know is refused."""
        folder = Path(data)
        if not folder.is_dir():
            return load_dataset(
                folder, transform=self.backbone.preprocess, classnames=self.classnames
            )
        present = {p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")}
        unknown = sorted(present - set(self.classnames))
        if unknown:
            raise PersonalizedModelError(
                f"class directory {folder / unknown[0]} is not a class of this model "
                f"({', '.join(self.classnames)})"
            )
        subset = [c for c in self.classnames if c in present]
        read = read_image_folder(folder, transform=self.backbone.preprocess, classnames=subset)
        index = {name: i for i, name in enumerate(self.classnames)}
        samples = [Sample(s.path, index[subset[s.label]]) for s in read.samples]
        return ImageDataset(samples, self.classnames, read.transform, source=read.source)


def load_personalized(
    path: str | Path, *, pretrained: str | None = None, device: str = "auto"
) -> PersonalizedClassifier:
    """The classifier of a model file (see the module docstring).

    ``pretrained``: the backbone's checkpoint file or open_clip model directory (not needed
    for ``tiny-offline``, whose weights ship with the package).

    Raises:
        PersonalizedModelError: the file is not a valid personalized prompt.
        BackboneLoadError: the backbone's weights cannot be loaded.
        BackboneMismatchError: the weights are not the ones the prompt was trained on.
    """
    prompt = read_prompt_file(path)
    backbone = load_backbone(prompt.model, pretrained, device=device)
    if backbone.fingerprint != prompt.weights_sha256:
        raise BackboneMismatchError(
            f"model file {path} was trained on '{prompt.model}' weights {prompt.weights_sha256}, "
            f"but {backbone.source or 'the weights given'} have fingerprint "
            f"{backbone.fingerprint}: pass the federation's weights (--pretrained)"
        )
    return PersonalizedClassifier(prompt, backbone)


def finite_or_none(value: Any) -> float | None:
    """``value`` as a finite float, else None (for JSON metadata)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
