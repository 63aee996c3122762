"""One federated round through the built container images (buildah, no Docker engine).

``docker/build.sh --if-changed`` builds (or finds up to date) both images; then, all with
``buildah run --isolation chroot`` on the host network:

- ``docker/make-certs.sh`` makes the CA and server certificate with the coordinator image's
  ``secfpp-certs``;
- from ONE coordinator container: ``secfpp-migrate`` on a fresh PostgreSQL database, then
  ``secfpp-coordinator`` with TLS;
- from ONE participant container: three ``secfpp-participant enroll`` (the token in the
  environment) and three ``secfpp-participant run`` daemons on the shipped ``tiny-offline``
  backbone, each reading its own image folder mounted read-only;

to round 1 published with every participant's metrics, the federation finished and every
daemon exited 0. Then every process is stopped and every container removed (checked: none
of the test's containers or processes is left). With vfs storage each container is a full
copy of its image, so there are two containers plus one short-lived one for the
certificates.

Needs root (buildah's vfs storage), buildah and debootstrap (``bash dev.sh test`` installs
them as root), PostgreSQL; a missing one skips, and fails under ``CI=true``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from demo.processes import ProcessGroup, answers_readyz, wait_ready
from tests.support.databases import PG_HOST, PG_PORT, PG_USER, PostgresDatabases
from tests.support.docker import DOCKER, REPO, missing

pytestmark = [pytest.mark.containers, pytest.mark.slow, pytest.mark.postgres]

BUILDAH = ["buildah", "--storage-driver", "vfs"]
COORDINATOR = "localhost/secfpp-coordinator:latest"
PARTICIPANT = "localhost/secfpp-participant:latest"
UID = 10001  # USER of both Dockerfiles
N = 3


def _buildah(*args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [*BUILDAH, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Both images, built by docker/build.sh unless their sources are unchanged."""
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed; as root: apt-get install -y buildah debootstrap")
    if os.geteuid() != 0:
        missing("the container images are built and run with buildah's vfs storage as root")
    log = tmp_path_factory.mktemp("build") / "build.log"
    with log.open("w") as handle:
        done = subprocess.run(
            ["bash", str(DOCKER / "build.sh"), "--if-changed"],
            cwd=REPO,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=3000,
            check=False,
        )
    assert done.returncode == 0, log.read_text()[-4000:]
    return {"coordinator": COORDINATOR, "participant": PARTICIPANT}


class Containers:
    """Working containers made from images; all removed by :meth:`remove_all`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: list[str] = []

    def make(self, role: str, image: str) -> str:
        name = f"{self.prefix}-{role}"
        _buildah("from", "--pull=never", "--name", name, image)
        self.names.append(name)
        return name

    def run_argv(
        self, name: str, argv: list[str], *, env: dict[str, str], mounts: list[str]
    ) -> list[str]:
        """``buildah run`` of ``argv`` in container ``name`` as the image's user."""
        options = ["--isolation", "chroot", "--network", "host", "--user", f"{UID}:{UID}"]
        for key, value in env.items():
            options += ["-e", f"{key}={value}"]
        for mount in mounts:
            options += ["-v", mount]
        return [*BUILDAH, "run", *options, name, "--", *argv]

    def remove_all(self) -> None:
        for name in self.names:
            subprocess.run([*BUILDAH, "rm", name], capture_output=True, timeout=600, check=False)

    def left(self) -> set[str]:
        listed = _buildah("containers", "--format", "{{.ContainerName}}")
        return {n for n in listed.split() if n.startswith(self.prefix)}


def _image_folders(root: Path) -> list[Path]:
    from demo.folders import write_folders

    return write_folders("handwritten_digits", root, parts=N, per_part=60)


def _processes_naming(text: str) -> list[str]:
    """Command lines of live processes that contain ``text`` (leftovers of the test)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(cmdline)
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A folder the containers' user (uid 10001) can write to."""
    os.chown(tmp_path, UID, UID)
    return tmp_path


@pytest.mark.timeout(3600)
def test_one_round_through_the_built_images(
    images: dict[str, str], postgres: PostgresDatabases, workspace: Path
) -> None:
    work = workspace
    certs = work / "certs"
    done = subprocess.run(
        ["bash", str(DOCKER / "make-certs.sh")],
        env={**os.environ, "SECFPP_CERTS_DIR": str(certs),
             "SECFPP_COORDINATOR_IMAGE": images["coordinator"]},
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {p.name for p in certs.iterdir()} >= {"ca.pem", "server.pem", "server-key.pem"}
    for path in (certs, *certs.iterdir()):
        os.chown(path, UID, UID)  # the coordinator (uid 10001) reads its 0600 key
    folders = _image_folders(work / "data")
    state = work / "state"
    state.mkdir()
    os.chown(state, UID, UID)

    database = postgres.create()
    database_url = f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"
    admin_token = secrets.token_urlsafe(24)
    port = _free_port()
    url = f"https://127.0.0.1:{port}"
    prefix = f"secfpp-test-{secrets.token_hex(4)}"
    containers = Containers(prefix)
    try:
        with ProcessGroup(work / "logs", grace_s=20) as procs:
            coordinator = containers.make("coordinator", images["coordinator"])
            server_env = {
                "SECFPP_DATABASE_URL": database_url,
                "SECFPP_ADMIN_TOKEN": admin_token,
                "SECFPP_TLS_CERTFILE": "/certs/server.pem",
                "SECFPP_TLS_KEYFILE": "/certs/server-key.pem",
                "SECFPP_TICK_INTERVAL_S": "0.3",
                "OPENBLAS_NUM_THREADS": "1",
            }
            cert_mount = [f"{certs}:/certs:ro"]
            migrate = subprocess.run(
                containers.run_argv(
                    coordinator, ["secfpp-migrate", "head"],
                    env={"SECFPP_DATABASE_URL": database_url}, mounts=[],
                ),
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            assert migrate.returncode == 0, migrate.stderr
            assert "database at revision" in migrate.stdout
            server = procs.start(
                "coordinator",
                containers.run_argv(
                    coordinator,
                    ["secfpp-coordinator", "--host", "127.0.0.1", "--port", str(port)],
                    env=server_env,
                    mounts=cert_mount,
                ),
            )
            admin = httpx.Client(
                base_url=url,
                verify=ssl.create_default_context(cafile=str(certs / "ca.pem")),
                timeout=30,
                headers={"Authorization": f"Bearer {admin_token}"},
            )
            log = procs.log_path("coordinator")
            wait_ready(answers_readyz(admin), server, timeout_s=180, log=log, interval_s=0.5)
            federation = _create_federation(admin)
            fid = federation["id"]
            assert federation["config"]["backbone"]["model"] == "tiny-offline"
            tokens = admin.post(
                f"/v1/federations/{fid}/enrollment-tokens", json={"count": N}
            ).json()["tokens"]

            participant = containers.make("participant", images["participant"])
            mounts = [
                f"{state}:/state",
                f"{folders[0].parent}:/data:ro",
                f"{certs / 'ca.pem'}:/certs/ca.pem:ro",
            ]
            for p, token in enumerate(tokens):
                enrolled = subprocess.run(
                    containers.run_argv(
                        participant,
                        ["secfpp-participant", "enroll", "--coordinator", url,
                         "--name", f"org-{p}", "--ca-bundle", "/certs/ca.pem",
                         "--state", f"/state/participant-{p}"],
                        env={"SECFPP_ENROLLMENT_TOKEN": token}, mounts=mounts,
                    ),
                    capture_output=True, text=True, timeout=600, check=False,
                )  # fmt: skip
                assert enrolled.returncode == 0, enrolled.stderr
            for p in range(N):
                procs.start(
                    f"participant-{p}",
                    containers.run_argv(
                        participant,
                        ["secfpp-participant", "run", "--state", f"/state/participant-{p}",
                         "--data", f"/data/{folders[p].name}", "--device", "cpu",
                         "--epochs", "1", "--threads", "1", "--poll", "0.5",
                         "--no-progress-bar"],
                        env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
                        mounts=mounts,
                    ),
                )  # fmt: skip
            for p in range(N):
                log = procs.log_path(f"participant-{p}")
                assert procs.children[f"participant-{p}"].wait(1500) == 0, log.read_text()
                assert "federation finished: rounds done" in log.read_text()
            status = _published(admin, fid)
            assert status["stage"] == "published"
            assert len(status["metrics"]) == N
            fed = admin.get(f"/v1/federations/{fid}").json()
            assert fed["status"]["state"] == "finished"
            admin.close()
        # the with block stopped the coordinator's buildah run and its process group
        assert server.poll() is not None
    finally:
        containers.remove_all()
        postgres.drop(database)
    assert containers.left() == set()
    assert _processes_naming(prefix) == []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _create_federation(admin: httpx.Client) -> dict[str, Any]:
    r = admin.post(
        "/v1/federations",
        json={
            "name": "container-round",
            "n_participants": N,
            "prompt": {"n_ctx": 4},
            "tolerance": {
                "reduced_dim": 16,
                "dropout_fraction": 0.0,
                "collusion_fraction": 0.34,
                "min_aggregation_size": 2,
            },
            "rounds": {"total": 1, "schedule": "auto"},
            "deadlines": {"sharing_s": 600, "distances_s": 300, "aggregation_s": 300},
        },
    )
    assert r.is_success, r.text
    federation: dict[str, Any] = r.json()
    return federation


def _published(admin: httpx.Client, fid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = admin.get(f"/v1/federations/{fid}/rounds/1").json()
        if status.get("stage") == "published" and len(status.get("metrics") or {}) == N:
            break
        time.sleep(0.5)
    return status
