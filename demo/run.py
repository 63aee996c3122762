"""The main job: a real SecFPP federation on this machine, with no network.

1. builds a multi-domain split (default ``two-domain``: half the participants classify
   handwritten digits, half printed letters, each with its own class names and
   Dirichlet label skew inside its domain; data ships inside installed packages) and
   writes one image folder per participant;
2. generates a local CA and a server certificate;
3. starts the coordinator (SQLite, TLS) as a process, creates a federation over HTTPS;
4. enrolls N participants and runs each as its own ``secfpp-participant`` process on
   the shipped ``tiny-offline`` CLIP;
5. starts rounds one after the other and shows stage, per-participant accuracy and the
   clusters in words (who is in which cluster, from which true domain, what changed);
6. exports the personalized prompt of one participant per domain
   (``secfpp-participant export``) and classifies a few held-out images of its domain with
   it (``secfpp-participant predict``);
7. prints a report (accuracy before and after, clusters against the true domains, the
   exported models and their predictions, the privacy guarantees in force, artifacts) and
   writes a PNG plot.

Every child process is stopped when the demo ends, whatever happened.

Usage: ``python -m demo [--setting two-domain] [--participants 8] [--rounds 6]``
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from demo.partition import SETTINGS, setting_partition, write_image_folders
from demo.processes import ProcessGroup, answers_readyz, wait_ready
from demo.report import DemoRecord, Export, cluster_purity, describe_clusters, plot, render
from secfpp.federation import DEFAULT_SIGNAL, SIGNALS, ClusteringPolicy

__all__ = ["main"]

TINY = "tiny-offline"


def _say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    """A coordinator process with TLS, its admin client, and participant processes."""

    def __init__(
        self,
        work: Path,
        procs: ProcessGroup,
        url: str,
        admin: httpx.Client,
        certs: Any,
        env: dict[str, str],
    ) -> None:
        self.work, self.procs, self.url, self.admin, self.certs, self.env = (
            work,
            procs,
            url,
            admin,
            certs,
            env,
        )

    @classmethod
    def start(cls, work: Path, procs: ProcessGroup, *, tick_s: float = 0.5) -> Deployment:
        """Generate a CA and server certificate, start the coordinator, wait until ready."""
        from secfpp.coordinator.tls import generate_certificates

        certs = generate_certificates(work / "certs", ["localhost", "127.0.0.1"])
        port = _free_port()
        url = f"https://127.0.0.1:{port}"
        admin_token = secrets.token_urlsafe(24)
        env = dict(
            os.environ,
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            SECFPP_DATABASE_URL=f"sqlite:///{work / 'coordinator.db'}",
            SECFPP_ADMIN_TOKEN=admin_token,
            SECFPP_TLS_CERTFILE=str(certs.server_cert),
            SECFPP_TLS_KEYFILE=str(certs.server_key),
            SECFPP_TICK_INTERVAL_S=str(tick_s),
        )
        coordinator = procs.start(
            "coordinator",
            [
                sys.executable,
                "-m",
                "secfpp.coordinator.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--migrate",
            ],
            env=env,
        )
        admin = httpx.Client(
            base_url=url,
            verify=ssl.create_default_context(cafile=str(certs.ca_cert)),
            timeout=30,
            headers={"Authorization": f"Bearer {admin_token}"},
        )
        wait_ready(
            answers_readyz(admin),
            coordinator,
            timeout_s=60,
            log=procs.log_path("coordinator"),
            interval_s=0.5,
        )
        return cls(work, procs, url, admin, certs, env)

    def close(self) -> None:
        """Close the admin client; call it before the process group stops the coordinator.
        An idle keep-alive TLS connection left open holds uvicorn's graceful shutdown (it
        waits for the connection to close), so the group's SIGTERM ended in its SIGKILL 5 s
        later, and the coordinator's lifespan never ran its shutdown."""
        self.admin.close()

    def create_federation(self, body: dict[str, Any]) -> dict[str, Any]:
        r = self.admin.post("/v1/federations", json=body)
        r.raise_for_status()
        federation: dict[str, Any] = r.json()
        return federation

    def enroll(self, fid: str, names: list[str]) -> list[Path]:
        """Enroll one participant per name (in parallel processes); their state directories."""
        tokens = self.admin.post(
            f"/v1/federations/{fid}/enrollment-tokens", json={"count": len(names)}
        ).json()["tokens"]
        states = [self.work / "state" / f"participant-{p}" for p in range(len(names))]
        children = [
            self.procs.start(
                f"enroll-{p}",
                [
                    sys.executable,
                    "-m",
                    "secfpp.participant.cli",
                    "enroll",
                    "--coordinator",
                    self.url,
                    "--name",
                    name,
                    "--ca-bundle",
                    str(self.certs.ca_cert),
                    "--state",
                    str(states[p]),
                ],
                # In the environment, not in argv: /proc/PID/environ is readable by the
                # owner only, /proc/PID/cmdline by every local user.
                env={**self.participant_env, "SECFPP_ENROLLMENT_TOKEN": token},
            )
            for p, (name, token) in enumerate(zip(names, tokens, strict=True))
        ]
        for p, child in enumerate(children):
            if child.wait(120) != 0:
                raise RuntimeError(
                    f"participant {p} failed to enroll; see {self.procs.log_path(f'enroll-{p}')}"
                )
        return states

    @property
    def participant_env(self) -> dict[str, str]:
        """The daemons' environment: the coordinator's, less the admin token."""
        return {k: v for k, v in self.env.items() if k != "SECFPP_ADMIN_TOKEN"}

    @staticmethod
    def index(state: Path) -> int:
        """The LCC index the coordinator gave the participant of ``state``."""
        return int(json.loads((state / "identity.json").read_text())["index"])

    def start_participant(
        self,
        p: int,
        state: Path,
        data: Path,
        *,
        checkpoint: str | None,
        epochs: int,
        template: str,
    ) -> Any:
        """``secfpp-participant run`` for participant ``p`` on ``tiny-offline`` from
        ``checkpoint`` (None: no --model / --pretrained, the federation's pinned model)."""
        backbone = [] if checkpoint is None else ["--model", TINY, "--pretrained", checkpoint]
        return self.procs.start(
            f"participant-{p}",
            [
                sys.executable,
                "-m",
                "secfpp.participant.cli",
                "run",
                "--state",
                str(state),
                "--data",
                str(data),
                *backbone,
                "--epochs",
                str(epochs),
                "--threads",
                "1",
                "--poll",
                "0.5",
                "--zero-shot-template",
                template,
                "--no-progress-bar",
            ],
            env=self.participant_env,
        )


def _federation(args: argparse.Namespace, width: int) -> dict[str, Any]:
    return {
        "name": "secfpp-demo",
        "strategy": "secfpp",
        "n_participants": args.participants,
        "prompt": {"n_ctx": args.n_ctx, "dim": width, "init_std": 0.02, "init_seed": args.seed},
        "reduction": {"method": "jl", "seed": args.seed, "signal": args.signal},
        "tolerance": {
            "reduced_dim": 128,
            # no dropout_fraction: 0.25, or fewer where 2R - T > N needs it (8 members: 1)
            "collusion_fraction": 0.25,
            "min_aggregation_size": 3,
            "max_clusters": 4,
        },
        "clustering": {"false_split_rate": args.false_split_rate},
        "rounds": {"total": args.rounds, "warmup_rounds": 0, "lr_global": 1.0},
        "deadlines": {"sharing_s": 240, "distances_s": 120, "aggregation_s": 120},
        "operators_see_distances": False,
    }


def _guarantees(config: dict[str, Any]) -> list[str]:
    c = config["crypto"]
    n = config["n_participants"]
    kc, tc = c["clustering_code"]["k"], c["clustering_code"]["t"]
    ka, ta = c["aggregation_code"]["k"], c["aggregation_code"]["t"]
    what = {
        "data-balanced": "mean of per-class mean image embeddings",
        "data": "mean image embedding",
        "prompt": "reduced prompt",
    }[config["reduction"]["signal"]]
    return [
        f"clustering (SecPC) of each participant's {what} on Lagrange-coded shares: "
        f"K={kc}, T={tc}; any {tc} colluding participants learn nothing about another's; "
        f"{n - (2 * (kc + tc - 1) + 1)} dropouts tolerated; field GF(2^61-1) with "
        f"{c['clustering_field']['bits']} fractional bits; only whole squared distances are "
        "decoded (one chunk), every centre averages at least "
        f"{max(int(c.get('min_reference_size', 3)), 3)} participants, and every threshold "
        "exceeds N/2",
        f"cluster-wise aggregation on shares: K={ka}, T={ta}; {n - (ka + ta)} dropouts "
        f"tolerated; GF({c['aggregation_field']['prime']}), updates clipped to L2 "
        f"{c['l2_clip']} and entries to {c['aggregation_field']['clip']}",
        "the coordinator learned only squared distances to cluster centres and per-cluster "
        "sums (min aggregation size "
        f"{c['min_aggregation_size']}); participants refuse overlapping or too-small sets",
        "shares travel end-to-end sealed (X25519 + HKDF-SHA256 + AES-256-GCM); the "
        "coordinator stores ciphertext only; transport is TLS with the demo's own CA",
        "local prompts never leave the participants; no DP noise is added in this demo "
        "(privacy is cryptographic)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--setting",
        choices=sorted(SETTINGS),
        default="two-domain",
        help="which domains the participants hold (docs: demo/partition.py SETTINGS)",
    )
    parser.add_argument("--participants", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=2, help="local epochs per round")
    parser.add_argument("--n-ctx", type=int, default=4, help="context tokens of the prompt")
    parser.add_argument(
        "--images",
        type=int,
        default=300,
        help="images per participant on average (before the 80/20 train/held-out split)",
    )
    parser.add_argument(
        "--signal",
        choices=SIGNALS,
        default=DEFAULT_SIGNAL,
        help="what SecPC clusters: the mean of each participant's per-class mean image "
        "embeddings (data-balanced, default), its plain mean image embedding (data) or its "
        "trained prompt's movement (prompt, the SecFPP paper's choice)",
    )
    parser.add_argument(
        "--false-split-rate",
        type=float,
        default=ClusteringPolicy().false_split_rate,
        help="a bound on the chance that a cluster holding a single group ever splits: "
        "SecPC spends it over the cluster's split tests, rate / (k (k + 1)) at the k-th "
        "(docs/protocol.md, 'Clustering step'; default %(default)s)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.5,
        help="Dirichlet concentration of the label skew inside each domain (0.5: strong)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path("runs/demo"))
    parser.add_argument(
        "--keep-open",
        action="store_true",
        help="keep the coordinator (and its dashboard) up after the last round, until Ctrl-C",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    work = args.workdir.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    from secfpp.participant.backbones import register_offline_models, tiny_offline_checkpoint_path

    register_offline_models()
    checkpoint = tiny_offline_checkpoint_path()
    import open_clip

    width = int(open_clip.get_model_config("tiny-offline")["text_cfg"]["width"])

    spec = SETTINGS[args.setting]
    _say(
        f"setting {args.setting}: {spec.description}; {args.participants} participants, "
        f"Dirichlet alpha={args.alpha} inside each domain"
    )
    setting = setting_partition(
        args.setting,
        args.participants,
        alpha=args.alpha,
        seed=args.seed,
        images_per_participant=args.images,
    )
    parts = setting.parts
    folders = write_image_folders(parts, work / "data")
    domains = {p.participant: p.domain.name for p in parts}
    templates = {
        p.participant: setting.prompt_templates[setting.true_domain[p.participant]] for p in parts
    }

    record = DemoRecord(domains)
    with ProcessGroup(work / "logs") as procs:
        deployment = Deployment.start(work, procs)
        _say(f"coordinator up at {deployment.url} (TLS, SQLite at {work / 'coordinator.db'})")
        _say(_dashboard_note(deployment))
        federation = deployment.create_federation(_federation(args, width))
        fid = federation["id"]
        states = deployment.enroll(fid, [f"org-{p}-{domains[p]}" for p in range(args.participants)])
        index_of = {deployment.index(state): p for p, state in enumerate(states)}
        for p, folder in enumerate(folders):
            deployment.start_participant(
                p,
                states[p],
                folder,
                checkpoint=checkpoint,
                epochs=args.epochs,
                template=templates[p],
            )
        admin = deployment.admin
        _say(f"{args.participants} participants enrolled and running (logs in {work / 'logs'})")
        config = federation["config"]
        rules = ClusteringPolicy.model_validate(config["clustering"]).false_split_rate
        for number in range(1, args.rounds + 1):
            _run_round(admin, fid, number, procs, record, index_of, rules)
        for p in range(args.participants):
            zs = work / "state" / f"participant-{p}" / "zero_shot.json"
            if zs.exists():
                record.zero_shot[p] = float(json.loads(zs.read_text())["accuracy"])
        for p in range(args.participants):
            procs.children[f"participant-{p}"].wait(60)
        _export_and_predict(work, states, parts, record)
        if args.keep_open:
            _finish(record, federation, work)
            _keep_open(deployment)
        deployment.close()
    if not args.keep_open:
        _finish(record, federation, work)
    _say(f"finished in {time.monotonic() - started:.0f} s; all processes stopped")
    return 0


def _finish(record: DemoRecord, federation: dict[str, Any], work: Path) -> None:
    """Write the plot and report.json, print the report."""
    png = plot(record, work / "demo.png")
    (work / "report.json").write_text(
        json.dumps(
            {
                "domains": record.domains,
                "zero_shot": record.zero_shot,
                "accuracy": record.accuracy,
                "clusters": record.clusters,
                "purity": {
                    r: cluster_purity(c, record.domains) for r, c in record.clusters.items()
                },
                "stages": record.stages,
            },
            indent=1,
        )
    )
    print(
        render(
            record,
            guarantees=_guarantees(federation["config"]),
            artifacts={
                "plot": png,
                "report": work / "report.json",
                "logs": work / "logs",
                "coordinator database": work / "coordinator.db",
                "participant state": work / "state",
                "CA certificate": work / "certs" / "ca.pem",
            },
        )
    )


HELD_OUT_IMAGES = 6


def _export_and_predict(work: Path, states: list[Path], parts: Any, record: DemoRecord) -> None:
    """For the first participant of each domain: ``secfpp-participant export`` its
    personalized prompt, then ``predict`` on a few images of its domain's test split (held
    out from every participant)."""
    import csv

    import numpy as np
    from PIL import Image

    from demo.data import load_domain

    firsts: dict[str, int] = {}
    for part in parts:
        firsts.setdefault(part.domain.name, part.participant)
    for domain, p in firsts.items():
        cli = [sys.executable, "-m", "secfpp.participant.cli"]
        done = subprocess.run(  # noqa: S603 - our own CLI
            [*cli, "export", "--state", str(states[p])], capture_output=True, text=True
        )
        if done.returncode != 0:
            _say(f"export of participant {p} failed: {done.stderr.strip()[-300:]}")
            continue
        model = states[p] / "personalized.safetensors"
        test = load_domain(domain, "test", seed=0)
        folder = work / "held-out" / domain
        folder.mkdir(parents=True, exist_ok=True)
        truth = {}
        # spread over the split (it is ordered by class): several classes, not one
        picks = np.linspace(0, len(test.labels) - 1, HELD_OUT_IMAGES).round().astype(int)
        for n, i in enumerate(picks):
            path = folder / f"{n}.png"
            Image.fromarray(test.images[i]).save(path)
            truth[str(path)] = test.class_names[int(test.labels[i])]
        out = work / "held-out" / f"{domain}-predictions.csv"
        predicted = subprocess.run(  # noqa: S603 - our own CLI
            [*cli, "predict", "--model-file", str(model), "--data", str(folder), "--out", str(out)],
            capture_output=True,
            text=True,
        )
        if predicted.returncode != 0:
            _say(f"predict with participant {p}'s model failed: {predicted.stderr[-300:]}")
            continue
        with out.open() as handle:
            rows = list(csv.DictReader(handle))
        record.exports[p] = Export(
            model,
            [(r["path"], r["prediction"], float(r["probability"]), truth[r["path"]]) for r in rows],
        )
        _say(f"participant {p}: personalized prompt exported to {model}; predictions in {out}")


def _dashboard_note(deployment: Deployment) -> str:
    """The dashboard's URL and a one-time login link (valid 15 minutes)."""
    r = deployment.admin.post("/v1/admin/dashboard-links")
    r.raise_for_status()
    return (
        f"dashboard: {deployment.url}/dashboard/ (CA: {deployment.certs.ca_cert}); "
        f"one-time login link, 15 min: {r.json()['url']}"
    )


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _keep_open(deployment: Deployment) -> None:
    """--keep-open: the coordinator stays up (participants have finished) until Ctrl-C
    or SIGTERM; either ends the demo through its normal exit, which stops every process."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with '&'
    signal.signal(signal.SIGTERM, _stop)
    _say("--keep-open: the coordinator stays up; press Ctrl-C to stop it")
    _say(_dashboard_note(deployment))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        _say("stopping")


def _run_round(
    admin: httpx.Client,
    fid: str,
    number: int,
    procs: ProcessGroup,
    record: DemoRecord,
    index_of: dict[int, int],
    rules: float,
) -> None:
    """One round, printed as it goes; ``rules`` is the federation's false-split rate."""
    deadline = time.monotonic() + 600
    while True:
        r = admin.post(f"/v1/federations/{fid}/rounds")
        if r.status_code == 201:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"round {number} could not start: {r.text}")
        time.sleep(0.5)
    _say(f"round {number} started")
    last = None
    while True:
        failed = procs.failed()
        if failed:
            raise RuntimeError(f"processes failed: {failed}; see {procs.log_dir}")
        status = admin.get(f"/v1/federations/{fid}/rounds/{number}").json()
        if status["stage"] != last:
            last = status["stage"]
            _say(f"round {number}: {last}")
        if last in ("published", "failed", "aborted"):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"round {number} did not finish in 10 minutes")
        time.sleep(0.5)
    record.stages[number] = last
    if last != "published":
        _say(f"round {number} {last}: {status.get('failure_reason')}")
    clusters = status.get("next_clusters") or status.get("clusters") or []
    record.clusters[number] = [sorted(index_of[m] for m in c["members"]) for c in clusters]
    for _ in range(40):  # participants report accuracy shortly after publication
        status = admin.get(f"/v1/federations/{fid}/rounds/{number}").json()
        metrics = status.get("metrics") or {}
        if len(metrics) >= len(index_of):
            break
        time.sleep(0.5)
    record.accuracy[number] = {
        index_of[int(i)]: float(m["accuracy"]) for i, m in metrics.items() if "accuracy" in m
    }
    shown = " ".join(f"{p}:{a:.2f}" for p, a in sorted(record.accuracy[number].items()))
    _say(f"round {number} published: held-out accuracy per participant {shown}")
    previous = record.clusters.get(number - 1)
    for line in describe_clusters(record.clusters[number], record.domains, previous):
        _say(f"  {line}")
    tests = _split_tests(status)
    if tests:
        _say(
            f"  split rule (false-split budget {rules:g}, spent over each cluster's tests: "
            f"a cluster splits when its p-value is at most its test's level): {tests}"
        )


def _split_tests(status: dict[str, Any]) -> str:
    """The clustering event's split statistics, e.g.
    ``cluster 0: W2/W1 0.21 (p 0.350, level 0.025)``: the p-value and the level it had to
    reach (``crypto.clustering.split_level``: the budget over the cluster's tests)."""
    for event in status.get("events") or []:
        detail = event.get("detail") or {}
        if "split_ratios" in detail:
            p_values = detail.get("split_p_values") or {}
            levels = detail.get("split_levels") or {}
            parts = []
            for c, r in sorted(detail["split_ratios"].items()):
                shown = [f"p {p_values[c]:.3f}"] if c in p_values else []
                shown += [f"level {levels[c]:.3g}"] if c in levels else []
                parts.append(
                    f"cluster {c}: W2/W1 {r:.3f}" + (f" ({', '.join(shown)})" if shown else "")
                )
            return ", ".join(parts)
    return ""


if __name__ == "__main__":
    sys.exit(main())
