"""Write ``secfpp/federation/backbones.json``: the text width of every open_clip model the
participant daemon can drive, and the weights fingerprint of the shipped backbone.

The coordinator runs without torch and open_clip (docker/coordinator.Dockerfile), so it
reads the widths it derives ``prompt.dim`` from out of this file. Regenerate it after
upgrading open_clip or retraining ``tiny-offline``::

    python scripts/backbone_catalog.py

Models whose text tower prompt learning cannot drive (Hugging Face text encoders, CoCa's
class token) are left out; a federation may still name them with an explicit
``prompt.dim`` (the daemon then checks the width itself).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "secfpp" / "federation" / "backbones.json"


def _configs() -> dict[str, dict[str, Any]]:
    spec = importlib.util.find_spec("open_clip")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    folders = [Path(next(iter(spec.submodule_search_locations))) / "model_configs"]
    folders.append(REPO / "participant" / "backbones" / "model_configs")
    configs = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            configs[path.stem] = json.loads(path.read_text())
    return configs


def catalog() -> dict[str, Any]:
    """``{"open_clip": version, "models": {name: {"text_width": w[, "weights_sha256"]}}}``."""
    import open_clip

    from secfpp.participant.backbones import TINY_OFFLINE
    from secfpp.participant.learning import load_backbone

    models: dict[str, dict[str, Any]] = {}
    for name, config in sorted(_configs().items()):
        text = config.get("text_cfg") or {}
        if "hf_model_name" in text or text.get("embed_cls") or "width" not in text:
            continue
        models[name] = {"text_width": int(text["width"])}
    shipped = load_backbone(TINY_OFFLINE, device="cpu")
    models[TINY_OFFLINE]["weights_sha256"] = shipped.fingerprint
    return {"open_clip": open_clip.__version__, "models": models}


def main() -> None:
    OUT.write_text(json.dumps(catalog(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
