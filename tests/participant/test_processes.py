"""Real processes: a TLS coordinator and 6 participant daemons on loopback.

Three SecFPP rounds on a two-domain synthetic image set (handwritten digits and printed
letters, 3 participants with 300 images each, 1 local epoch, SecPC from round 1), after
which the two domains are in different clusters. In round 2 one daemon is killed with
SIGKILL while the round is in progress and started again on its state directory; the
federation still completes every round, and every process is gone at the end.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from demo.partition import Domain, multi_domain_partition, write_image_folders
from demo.processes import ProcessGroup
from demo.run import Deployment

N = 6
PER_DOMAIN = 900  # 300 images per participant


def _data(root: Path) -> list[Path]:
    from demo.data.synthetic import handwritten_digits, printed_letters

    domains = []
    for loader, name in ((handwritten_digits, "handwritten"), (printed_letters, "letters")):
        data = loader("train", seed=0)
        pick = np.sort(np.random.default_rng(0).choice(len(data), PER_DOMAIN, replace=False))
        domains.append(
            Domain(name, data.images[pick], data.labels[pick].astype(np.int64), data.class_names)
        )
    parts = multi_domain_partition(domains, N, alpha=100.0, seed=0, min_size=40)
    return write_image_folders(parts, root)


def _wait_stage(
    deployment: Deployment, fid: str, number: int, stages: set[str], timeout_s: float = 300
) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        failed = deployment.procs.failed()
        assert not failed, f"processes failed: {failed}"
        status = deployment.admin.get(f"/v1/federations/{fid}/rounds/{number}").json()
        if status["stage"] in stages:
            return status
        time.sleep(0.3)
    raise AssertionError(f"round {number} never reached {stages}")


@pytest.mark.slow
def test_six_daemons_three_rounds_with_a_sigkilled_participant(tmp_path: Path) -> None:
    from secfpp.participant.backbones import tiny_offline_checkpoint_path

    folders = _data(tmp_path / "data")
    with ProcessGroup(tmp_path / "logs") as procs:
        deployment = Deployment.start(tmp_path, procs, tick_s=0.3)
        federation = deployment.create_federation(
            {
                "name": "process-test",
                "strategy": "secfpp",
                "n_participants": N,
                "prompt": {"n_ctx": 4, "dim": 128, "init_std": 0.02, "init_seed": 0},
                "tolerance": {
                    "reduced_dim": 128,
                    "dropout_fraction": 0.2,
                    "collusion_fraction": 0.2,
                    "min_aggregation_size": 2,
                    "max_clusters": 3,
                },
                "rounds": {"total": 3, "warmup_rounds": 0},
                "deadlines": {"sharing_s": 120, "distances_s": 60, "aggregation_s": 60},
            }
        )
        fid = federation["id"]
        states = deployment.enroll(fid, [f"org-{p}" for p in range(N)])
        checkpoint = tiny_offline_checkpoint_path()

        def start(p: int) -> None:
            deployment.start_participant(
                p,
                states[p],
                folders[p],
                checkpoint=checkpoint,
                epochs=1,
                template="a photo of a {}.",
            )

        for p in range(N):
            start(p)
        tests: list[dict[str, object]] = []  # each round's split statistics
        for number in (1, 2, 3):
            assert deployment.admin.post(f"/v1/federations/{fid}/rounds").status_code == 201
            if number == 2:
                _wait_stage(deployment, fid, 2, {"sharing"})
                time.sleep(0.5)  # inside the round: training, sealing or uploading
                victim = procs.children["participant-0"]
                os.killpg(victim.pid, signal.SIGKILL)
                assert victim.wait(10) == -signal.SIGKILL
                start(0)  # same state directory: it must continue round 2
            status = _wait_stage(deployment, fid, number, {"published", "failed", "aborted"})
            assert status["stage"] == "published", status["failure_reason"]
            tests += [
                {
                    "round": number,
                    "split_ratios": e["detail"].get("split_ratios"),
                }
                for e in status["events"]
                if "split_ratios" in e["detail"]
            ]
        for p in range(N):
            assert procs.children[f"participant-{p}"].wait(120) == 0
        metrics = deployment.admin.get(f"/v1/federations/{fid}/metrics").json()
        assert [len(r["metrics"]) for r in metrics["rounds"]] == [N, N, N]
        progress = json.loads((states[0] / "rounds" / "3" / "progress.json").read_text())
        assert progress["outcome_done"]
        clusters = status["next_clusters"]
        assert sorted(m for c in clusters for m in c["members"]) == list(range(N))
        # No warm-up: every round tests the one cluster with a probe drawn from the round's
        # beacon (crypto.refset_rules). A split parts the domains; but a 3-of-6 probe holds
        # both domains in 9 of 10 draws, a weak axis (W2/W1 about 0.05, above the data
        # signal's 0.02), so three rounds part them only about a quarter of the time (the
        # refined probes of earlier versions, which the coordinator chose, did every time;
        # docs/protocol.md section 4). Either outcome, never a mixed split.
        by_domain = [
            sorted(deployment.index(states[p]) for p in range(N) if p // 3 == d) for d in (0, 1)
        ]
        found = sorted(sorted(c["members"]) for c in clusters)
        assert found in (sorted(by_domain), [list(range(N))]), tests
        with (tmp_path / "clusters.json").open("w") as handle:  # kept for the issue note
            json.dump(
                {
                    "domains": {deployment.index(s): p // 3 for p, s in enumerate(states)},
                    "clusters": clusters,
                    "split_tests": tests,
                },
                handle,
            )
        deployment.close()  # the coordinator then stops at once, not after the group's 5 s
    for child in procs.children.values():
        assert child.poll() is not None
