"""The shipped offline backbone: a standard open_clip CLIP, loaded by name, knowing each domain."""

from __future__ import annotations

import json
import time
from pathlib import Path

import open_clip
import pytest
import torch
from open_clip.model import CLIP
from open_clip.transformer import TextTransformer, Transformer, VisionTransformer

from demo.data import DOMAINS, PRETRAINING_DOMAINS
from secfpp.participant.backbones import (
    TINY_OFFLINE,
    TINY_TEST,
    WEIGHTS_DIR,
    offline,
    register_offline_models,
    tiny_offline_checkpoint_path,
)
from secfpp.participant.backbones.zeroshot import (
    Preprocess,
    Tokenizer,
    images_to_tensor,
    zeroshot_accuracy,
)

MAX_CHECKPOINT_BYTES = 20 * 1024 * 1024


@pytest.fixture(scope="module")
def tiny_offline() -> tuple[CLIP, Preprocess, Tokenizer]:
    torch.set_num_threads(1)
    register_offline_models()
    model, _, preprocess = open_clip.create_model_and_transforms(
        TINY_OFFLINE, pretrained=tiny_offline_checkpoint_path()
    )
    model.eval()
    return model, preprocess, open_clip.get_tokenizer(TINY_OFFLINE)


def test_register_is_idempotent() -> None:
    names = register_offline_models()
    paths_before = len(open_clip.factory._MODEL_CONFIG_PATHS)
    assert register_offline_models() == names == (TINY_OFFLINE, TINY_TEST)
    assert len(open_clip.factory._MODEL_CONFIG_PATHS) == paths_before
    assert set(names) <= set(open_clip.list_models())


def test_tiny_offline_is_a_standard_open_clip_clip(
    tiny_offline: tuple[CLIP, Preprocess, Tokenizer],
) -> None:
    model, _, tokenizer = tiny_offline
    assert type(model) is CLIP  # the class ViT-B-16 builds, so CoOp takes the same code path
    assert isinstance(model.visual, VisionTransformer)
    assert isinstance(model.transformer, Transformer)
    assert not isinstance(model.transformer, TextTransformer)  # built-in text tower, not custom
    assert model.token_embedding.num_embeddings == 49408
    assert model.positional_embedding.shape == (32, 128)
    assert model.visual.image_size == (32, 32)
    assert tokenizer(["a photo of the digit seven."]).shape == (1, 32)


def test_checkpoint_is_small_fp16_and_matches_its_record() -> None:
    path = Path(tiny_offline_checkpoint_path())
    assert path.stat().st_size <= MAX_CHECKPOINT_BYTES
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float16}
    record = json.loads((WEIGHTS_DIR / f"{TINY_OFFLINE}.json").read_text())
    assert record["checkpoint_bytes"] == path.stat().st_size
    assert record["model_config"] == open_clip.get_model_config(TINY_OFFLINE)


@pytest.mark.parametrize("domain", sorted(PRETRAINING_DOMAINS))
def test_zeroshot_on_held_out_data_is_well_above_chance(
    tiny_offline: tuple[CLIP, Preprocess, Tokenizer], domain: str
) -> None:
    model, preprocess, tokenizer = tiny_offline
    spec = DOMAINS[domain]
    held_out = spec.load("test", seed=0)  # the split the pretraining script held out
    accuracy = zeroshot_accuracy(
        model,
        tokenizer,
        images_to_tensor(held_out.images, preprocess),
        held_out.labels,
        spec.class_names,
        [spec.prompt_template],
    )
    chance = 1 / len(spec.class_names)
    assert accuracy >= 3 * chance
    recorded = json.loads((WEIGHTS_DIR / f"{TINY_OFFLINE}.json").read_text())
    assert accuracy == pytest.approx(recorded["zeroshot_accuracy_test"][domain], abs=0.03)


def test_tiny_test_builds_instantly_and_runs_forward() -> None:
    torch.manual_seed(0)
    register_offline_models()
    start = time.perf_counter()
    model = open_clip.create_model(TINY_TEST)
    assert time.perf_counter() - start < 1.0
    tokenizer = open_clip.get_tokenizer(TINY_TEST)
    images = torch.randn(2, 3, 32, 32)
    image_features, text_features, logit_scale = model(images, tokenizer(["a one.", "a two."]))
    assert image_features.shape == text_features.shape == (2, 32)
    assert torch.allclose(image_features.norm(dim=-1), torch.ones(2))
    assert logit_scale.item() == pytest.approx(1 / 0.07)


def test_missing_checkpoint_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(offline, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"pretrain_tiny_clip\.py"):
        tiny_offline_checkpoint_path()
