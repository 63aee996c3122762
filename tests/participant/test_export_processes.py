"""Real processes, a federation's whole life: created the README's way (no backbone, no
prompt.dim: the shipped ``tiny-offline`` is pinned) on autopilot, it runs its two rounds with
three ``secfpp-participant run`` daemons and no admin call after creation, ends ``finished:
rounds done``, and every daemon exits 0 saying so; ``secfpp-participant export`` then writes
one participant's personalized prompt, and
``evaluate`` / ``predict`` (each its own process) and the Python API reproduce exactly the
held-out accuracy the daemon reported to the coordinator, on the same held-out images.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from demo.partition import Domain, multi_domain_partition, write_image_folders
from demo.processes import ProcessGroup
from demo.run import Deployment

N = 3
ROUNDS = 2
IMAGES = 240  # 80 per participant: 64 to train, 16 held out


def _data(root: Path) -> list[Path]:
    from demo.data.synthetic import printed_digits

    data = printed_digits("train", seed=0)
    pick = np.sort(np.random.default_rng(1).choice(len(data), IMAGES, replace=False))
    domain = Domain(
        "digits", data.images[pick], data.labels[pick].astype(np.int64), data.class_names
    )
    return write_image_folders(multi_domain_partition([domain], N, alpha=100.0, seed=0), root)


def _held_out(folder: Path, index: int, target: Path) -> Path:
    """Copy the daemon's held-out split of ``folder`` (same split function, seed and
    participant index) to ``target/<class>/<file>``, keeping the file names and order."""
    from secfpp.participant.learning import load_dataset, split_dataset

    data = load_dataset(folder, transform=lambda image: image)
    _, test = split_dataset(data, test_fraction=0.2, seed=0, participant_id=index)
    for sample in test.samples:
        copy = target / sample.path.parent.name / sample.path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(sample.path, copy)
    return target


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "secfpp.participant.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_export_and_predict_reproduce_the_daemons_accuracy(tmp_path: Path) -> None:
    folders = _data(tmp_path / "data")
    with ProcessGroup(tmp_path / "logs") as procs:
        deployment = Deployment.start(tmp_path, procs, tick_s=0.3)
        federation = deployment.create_federation(
            {
                "name": "export-test",
                "n_participants": N,
                "prompt": {"n_ctx": 4},  # dim derived from the default backbone
                "tolerance": {
                    "reduced_dim": 16,
                    "dropout_fraction": 0.0,
                    "collusion_fraction": 0.34,
                    "min_aggregation_size": 2,
                },
                "rounds": {"total": ROUNDS, "schedule": "auto"},
                "deadlines": {"sharing_s": 240, "distances_s": 60, "aggregation_s": 60},
            }
        )
        config = federation["config"]
        assert config["backbone"]["model"] == "tiny-offline"
        assert config["prompt"]["dim"] == 128
        fid = federation["id"]
        states = deployment.enroll(fid, [f"org-{p}" for p in range(N)])
        for p in range(N):  # no --model, no --pretrained: the federation's pinned model
            deployment.start_participant(
                p, states[p], folders[p], checkpoint=None, epochs=2, template="a photo of a {}."
            )
        # autopilot: no POST .../rounds; the coordinator starts both rounds itself
        for p in range(N):
            log = procs.log_path(f"participant-{p}")
            assert procs.children[f"participant-{p}"].wait(600) == 0, log
            assert "federation finished: rounds done" in log.read_text(), log
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = deployment.admin.get(f"/v1/federations/{fid}/rounds/{ROUNDS}").json()
            if len(status.get("metrics") or {}) == N:
                break
            time.sleep(0.3)
        assert status["stage"] == "published"
        fed = deployment.admin.get(f"/v1/federations/{fid}").json()
        assert fed["status"]["state"] == "finished"
        assert fed["status"]["reason"] == "finished: rounds done"
        rounds = deployment.admin.get(f"/v1/federations/{fid}/rounds?limit=50").json()["items"]
        assert [r["number"] for r in rounds] == list(range(1, ROUNDS + 1))
        deployment.close()  # the coordinator then stops at once, not after the group's 5 s

    state = states[0]
    index = Deployment.index(state)
    reported = float(status["metrics"][str(index)]["accuracy"])
    recorded = json.loads((state / "rounds" / str(ROUNDS) / "metrics.json").read_text())
    assert reported == recorded["accuracy"]

    model = tmp_path / "org-0.safetensors"
    done = _cli("export", "--state", str(state), "--out", str(model))
    assert done.returncode == 0, done.stderr
    assert f"round {ROUNDS} to {model}" in done.stdout
    assert model.stat().st_mode & 0o077 == 0  # the personalized prompt stays private

    held_out = _held_out(folders[0], index, tmp_path / "held-out")
    evaluated = _cli("evaluate", "--model-file", str(model), "--data", str(held_out), "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert result["accuracy"] == reported  # exactly: same images, same code path
    n_images = sum(1 for _ in held_out.rglob("*.png"))
    assert result["images"] == n_images

    out = tmp_path / "predictions.csv"
    predicted = _cli(
        "predict", "--model-file", str(model), "--data", str(held_out), "--top-k", "3",
        "--out", str(out),
    )  # fmt: skip
    assert predicted.returncode == 0, predicted.stderr
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == n_images
    assert set(rows[0]) == {
        "path", "prediction", "probability", "prediction_2", "probability_2",
        "prediction_3", "probability_3",
    }  # fmt: skip
    right = sum(Path(r["path"]).parent.name == r["prediction"] for r in rows)
    assert right / n_images == reported
    for r in rows:
        assert 1 >= float(r["probability"]) >= float(r["probability_2"]) >= 0

    from secfpp import participant

    classifier = participant.load_personalized(model, device="cpu")
    assert classifier.evaluate(held_out).accuracy == reported
    first = sorted(held_out.rglob("*.png"))[:4]
    assert classifier.predict(first) == [r["prediction"] for r in rows[:4]]
    from PIL import Image

    images = [Image.open(path) for path in first]  # PIL images take the same path
    assert classifier.predict(images) == [r["prediction"] for r in rows[:4]]
    probabilities = classifier.predict_proba(first)
    assert probabilities.shape == (4, len(classifier.classnames))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
