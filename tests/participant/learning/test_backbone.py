"""Loading the frozen backbone: sources, freezing, and errors that name the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import open_clip
import pytest
import torch

from secfpp.participant.learning.backbone import Backbone, load_backbone
from secfpp.participant.learning.errors import BackboneLoadError, LearningConfigError
from secfpp.participant.learning.runtime import configure_threads, resolve_device
from tests.support.learning import TINY_CONFIG


def test_backbone_is_frozen_in_eval_mode_on_cpu(tiny_backbone: Backbone) -> None:
    assert tiny_backbone.device == torch.device("cpu")
    assert all(not p.requires_grad for p in tiny_backbone.model.parameters())
    assert not tiny_backbone.model.training
    assert tiny_backbone.embed_dim == TINY_CONFIG["embed_dim"]
    assert tiny_backbone.text.width == TINY_CONFIG["text_cfg"]["width"]
    assert tiny_backbone.text.context_length == TINY_CONFIG["text_cfg"]["context_length"]


def test_encode_images_is_normalized(tiny_backbone: Backbone) -> None:
    features = tiny_backbone.encode_images(torch.randn(3, 3, 32, 32))
    assert features.shape == (3, 32)
    assert features.dtype == torch.float32
    torch.testing.assert_close(features.norm(dim=-1), torch.ones(3))


def test_seeded_random_init_is_reproducible(tiny_model_name: str) -> None:
    state = torch.random.get_rng_state()
    a = load_backbone(tiny_model_name, None, device="cpu", init_seed=3, allow_random_weights=True)
    b = load_backbone(tiny_model_name, None, device="cpu", init_seed=3, allow_random_weights=True)
    c = load_backbone(tiny_model_name, None, device="cpu", init_seed=4, allow_random_weights=True)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG untouched


def test_load_from_checkpoint_file(tiny_backbone: Backbone, tmp_path: Path) -> None:
    path = tmp_path / "tiny.pt"
    torch.save(tiny_backbone.model.state_dict(), path)
    loaded = load_backbone(tiny_backbone.name, str(path), device="cpu")
    assert loaded.fingerprint == tiny_backbone.fingerprint
    assert loaded.source == str(path)


def test_load_fp16_checkpoint(tiny_backbone: Backbone, tmp_path: Path) -> None:
    path = tmp_path / "tiny-fp16.pt"
    torch.save({k: v.half() for k, v in tiny_backbone.model.state_dict().items()}, path)
    loaded = load_backbone(tiny_backbone.name, str(path), device="cpu")
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(
        loaded.encode_images(images), tiny_backbone.encode_images(images), atol=5e-3, rtol=0
    )


def test_load_from_open_clip_model_directory(tiny_backbone: Backbone, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_CONFIG}))
    torch.save(tiny_backbone.model.state_dict(), folder / "open_clip_pytorch_model.bin")
    loaded = load_backbone("tiny-dir", str(folder), device="cpu")
    assert loaded.fingerprint == tiny_backbone.fingerprint
    assert loaded.name == "tiny-dir"


def test_missing_checkpoint_is_named(tiny_model_name: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pt"
    with pytest.raises(BackboneLoadError, match=re.escape(f"checkpoint {missing} does not exist")):
        load_backbone(tiny_model_name, str(missing), device="cpu")


def test_checkpoint_that_is_not_a_state_dict(tiny_model_name: str, tmp_path: Path) -> None:
    path = tmp_path / "list.pt"
    torch.save([torch.zeros(2)], path)
    with pytest.raises(
        BackboneLoadError, match=f"expected a state_dict for model '{tiny_model_name}' but"
    ) as info:
        load_backbone(tiny_model_name, str(path), device="cpu")
    assert str(path) in str(info.value)


def test_checkpoint_that_is_not_a_torch_file(tiny_model_name: str, tmp_path: Path) -> None:
    path = tmp_path / "garbage.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(
        BackboneLoadError, match=re.escape(f"checkpoint {path} is not a readable torch file")
    ):
        load_backbone(tiny_model_name, str(path), device="cpu")


def test_checkpoint_of_another_architecture(tiny_model_name: str, tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    torch.save({"visual.conv1.weight": torch.zeros(1)}, path)
    with pytest.raises(
        BackboneLoadError, match=re.escape(f"checkpoint {path} does not match model")
    ):
        load_backbone(tiny_model_name, str(path), device="cpu")


def test_model_directory_without_config_or_weights(tiny_model_name: str, tmp_path: Path) -> None:
    with pytest.raises(BackboneLoadError, match=r"has no open_clip_config\.json"):
        load_backbone(tiny_model_name, str(tmp_path), device="cpu")
    (tmp_path / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_CONFIG}))
    with pytest.raises(BackboneLoadError, match="has no weights file"):
        load_backbone(tiny_model_name, str(tmp_path), device="cpu")


def test_download_tag_needs_permission() -> None:
    assert "openai" in open_clip.list_pretrained_tags_by_model("ViT-B-16")
    with pytest.raises(BackboneLoadError, match="'openai' is a download tag"):
        load_backbone("ViT-B-16", "openai", device="cpu")


def test_unknown_model() -> None:
    with pytest.raises(BackboneLoadError, match="'no-such-model' is not a registered"):
        load_backbone("no-such-model", None, device="cpu")


def test_device_choice() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(LearningConfigError, match="'device' must be one of"):
        resolve_device("tpu")


def test_configure_threads() -> None:
    before = torch.get_num_threads()
    try:
        assert configure_threads(None) == 1
        assert configure_threads(2) == 2
        with pytest.raises(LearningConfigError, match="'n' must be an integer >= 1"):
            configure_threads(0)
    finally:
        torch.set_num_threads(before)


def _config_with(tmp_path: Path, name: str, patch_size: int) -> str:
    """Register a TINY_CONFIG variant ``name`` whose image grid differs (``patch_size``)."""
    folder = tmp_path / "configs"
    folder.mkdir()
    config = json.loads(json.dumps(TINY_CONFIG))
    config["vision_cfg"]["patch_size"] = patch_size
    (folder / f"{name}.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder)
    return name


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_checkpoint_of_another_shape_names_model_and_file(
    tiny_model_name: str, tmp_path: Path, suffix: str
) -> None:
    """The ViT-L-14-as-ViT-B-16 case in small: an fp16 checkpoint of the same architecture
    with another patch grid (4x4 patches of 8 px vs 8x8 of 4 px). open_clip alone tries to
    resize the position embedding and fails in torch ("not implemented for 'Half'")."""
    other = _config_with(tmp_path, "h8-tiny-patch4", patch_size=4)
    state = {k: v.half() for k, v in open_clip.create_model(other).state_dict().items()}
    path = tmp_path / f"other-shape{suffix}"
    if suffix == ".pt":
        torch.save(state, path)
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    with pytest.raises(BackboneLoadError) as caught:
        load_backbone(tiny_model_name, str(path), device="cpu")
    message = str(caught.value)
    assert message.startswith(f"checkpoint {path} does not match model '{tiny_model_name}'")
    assert "2 of its tensors have other shapes" in message
    assert "visual.conv1.weight is [32, 3, 4, 4], the model's is [32, 3, 8, 8]" in message
    assert "visual.positional_embedding is [65, 32], the model's is [17, 32]" in message
    assert "Half" not in message
    assert "\n" not in message


def test_checkpoint_shape_check_accepts_the_model_own_fp16_checkpoint(
    tiny_backbone: Backbone, tmp_path: Path
) -> None:
    """``module.``-prefixed, fp16 and wrapped in ``state_dict``: still the model's shapes."""
    path = tmp_path / "wrapped.pt"
    state = {f"module.{k}": v.half() for k, v in tiny_backbone.model.state_dict().items()}
    torch.save({"state_dict": state}, path)
    loaded = load_backbone(tiny_backbone.name, str(path), device="cpu")
    assert loaded.model.visual.positional_embedding.shape == (17, 32)


def test_shape_check_logs_nothing_about_its_throwaway_model(
    tiny_backbone: Backbone, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The meta-device build must not log open_clip's "Model initialized randomly"."""
    from secfpp.participant.learning.checkpoints import check_checkpoint_shapes

    path = tmp_path / "own.pt"
    torch.save(tiny_backbone.model.state_dict(), path)
    with caplog.at_level("DEBUG"):
        check_checkpoint_shapes(path, tiny_backbone.name)
    assert [r.getMessage() for r in caplog.records] == []
