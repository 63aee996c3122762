"""Fixtures for the learning tests: a tiny registered open_clip config, toy images on disk.

Until ``secfpp.participant.backbones`` lands on main, the ``tiny-test`` architecture is registered
here from a copy of its JSON (same name, same numbers); afterwards the package's own
registration is used.
"""

from __future__ import annotations

import json
from pathlib import Path

import open_clip
import pytest
import torch

from secfpp.participant.learning.backbone import Backbone, load_backbone
from tests.support.learning import TINY, TINY_CONFIG, write_toy_images


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        from secfpp.participant.backbones import register_offline_models
    except ImportError:
        if TINY not in open_clip.list_models():
            config_dir = tmp_path_factory.mktemp("model_configs")
            (config_dir / f"{TINY}.json").write_text(json.dumps(TINY_CONFIG))
            open_clip.add_model_config(config_dir)
    else:
        register_offline_models()
    return TINY


@pytest.fixture(scope="session")
def tiny_backbone(tiny_model_name: str) -> Backbone:
    return load_backbone(
        tiny_model_name, None, device="cpu", init_seed=0, allow_random_weights=True
    )


@pytest.fixture
def toy_folder(tmp_path: Path) -> Path:
    return write_toy_images(tmp_path / "images")
