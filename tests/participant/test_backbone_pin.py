"""The daemon runs only the federation's pinned backbone: model and weights fingerprint.

``secfpp-participant run`` is driven in-process against the real coordinator app; the data
directory does not exist, so a run that gets past the backbone check stops at the data
(proving the check comes first: nothing is read, trained or shared on a wrong backbone).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from secfpp.participant import cli
from secfpp.participant.backbones import tiny_offline_checkpoint_path
from secfpp.participant.learning import load_backbone
from secfpp.participant.learning.backbone import state_fingerprint
from tests.participant.test_cli_tokens import ADMIN, coordinator, enroll_argv, http
from tests.support.asgi import TestClient

__all__ = ["coordinator", "http"]  # fixtures used by name

TINY_SHA = "aee66db94bc496ad0d4496665d9f53d7215607507c63adb4add5914061e1a39f"


def _enrolled(client: TestClient, tmp_path: Path, backbone: Any) -> Path:
    body = {
        "name": "pin",
        "n_participants": 4,
        "backbone": backbone,
        "tolerance": {"reduced_dim": 4},
    }
    r = client.post("/v1/federations", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    token = client.post(
        f"/v1/federations/{fid}/enrollment-tokens", json={"count": 1}, headers=ADMIN
    ).json()["tokens"][0]
    (tmp_path / "token").write_text(token)
    state = tmp_path / "state"
    assert cli.main(enroll_argv(state, "--token-file", str(tmp_path / "token"))) == 0
    return state


def _run(state: Path, *extra: str) -> int:
    argv = ["run", "--state", str(state), "--data", str(state.parent / "no-data"), *extra]
    return cli.main(argv)


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_wrong_weights_are_refused(
    coordinator: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = "ab" * 32
    state = _enrolled(coordinator, tmp_path, {"model": "tiny-offline", "weights_sha256": other})
    with caplog.at_level(logging.ERROR):
        assert _run(state) == cli.EXIT_CONFIG
    message = caplog.text
    assert f"fingerprint {TINY_SHA}" in message
    assert f"pins {other}" in message
    assert "no-data" not in message  # refused before the data was looked at
    assert not (state / "rounds").exists()


def test_the_pinned_weights_pass_the_check(
    coordinator: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = _enrolled(coordinator, tmp_path, {"model": "tiny-offline"})  # shipped pin
    with caplog.at_level(logging.ERROR):
        assert _run(state) == cli.EXIT_CONFIG  # no --model: the federation's
    assert "no-data" in caplog.text
    assert "pins" not in caplog.text


def test_random_weights_are_refused_outside_tests(
    coordinator: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seeded = load_backbone("tiny-test", None, device="cpu", init_seed=0, allow_random_weights=True)
    pin = {"model": "tiny-test", "weights_sha256": seeded.fingerprint}
    state = _enrolled(coordinator, tmp_path, pin)
    with caplog.at_level(logging.ERROR):
        assert _run(state) == cli.EXIT_CONFIG
    assert "model 'tiny-test' has no weights" in caplog.text
    assert "--allow-random-weights-for-testing" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR):  # the loud test-only switch: seeded, so pinnable
        assert _run(state, "--allow-random-weights-for-testing") == cli.EXIT_CONFIG
    assert "no-data" in caplog.text
    assert "no weights" not in caplog.text


def test_another_model_is_refused(
    coordinator: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = _enrolled(coordinator, tmp_path, {"model": "tiny-offline"})
    with caplog.at_level(logging.ERROR):
        code = _run(state, "--model", "tiny-test", "--allow-random-weights-for-testing")
    assert code == cli.EXIT_CONFIG
    assert "pins backbone model 'tiny-offline' but this participant loaded 'tiny-test'" in (
        caplog.text
    )


def test_fingerprint_is_the_same_for_every_file_format(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    shipped = load_backbone("tiny-offline", device="cpu")
    assert shipped.fingerprint == TINY_SHA
    state = torch.load(tiny_offline_checkpoint_path(), map_location="cpu", weights_only=True)
    fp32 = tmp_path / "tiny-fp32.safetensors"
    save_file({k: v.float().contiguous() for k, v in state.items()}, fp32)
    fp16 = tmp_path / "tiny-fp16.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, fp16)
    for path in (fp32, fp16):
        assert load_backbone("tiny-offline", str(path), device="cpu").fingerprint == TINY_SHA
    # one changed value changes it
    key = "text_projection"
    state[key] = state[key].clone()
    state[key][0, 0] += 1
    changed = tmp_path / "changed.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, changed)
    assert load_backbone("tiny-offline", str(changed), device="cpu").fingerprint != TINY_SHA
    # the precision the model is held in does not matter either
    assert state_fingerprint(shipped.model.half()) == TINY_SHA


def test_the_fingerprint_command_prints_the_pin(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fingerprint", "--model", "tiny-offline"]) == 0
    assert capsys.readouterr().out.strip() == TINY_SHA


def test_the_shipped_records_agree() -> None:
    import json

    from secfpp.federation.backbones import known_fingerprint
    from secfpp.participant.backbones import WEIGHTS_DIR

    record = json.loads((WEIGHTS_DIR / "tiny-offline.json").read_text())
    assert record["weights_sha256"] == known_fingerprint("tiny-offline") == TINY_SHA


def test_the_coordinators_catalog_agrees_with_open_clip() -> None:
    """secfpp/federation/backbones.json (the widths the torch-free coordinator derives
    prompt.dim from) is what open_clip and the shipped configs say; regenerate it with
    scripts/backbone_catalog.py after upgrading open_clip."""
    import json

    import open_clip

    from secfpp.federation.backbones import CATALOG, text_width
    from secfpp.participant.backbones import register_offline_models

    register_offline_models()
    models = json.loads(CATALOG.read_text())["models"]
    assert {"ViT-B-16", "ViT-L-14", "tiny-offline", "tiny-test"} <= set(models)
    for name in models:
        config = open_clip.get_model_config(name)
        assert config is not None, name
        assert text_width(name) == config["text_cfg"]["width"], name
    assert text_width("ViT-B-16") == 512
