"""Static checks of docker/ (no Docker engine runs on the build machines).

Every file a Dockerfile copies exists, every entrypoint is a console script of the
project, the torch pin matches dev.sh, and every SECFPP_* variable the compose file sets
is a coordinator setting.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from coordinator.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def test_dockerfiles_copy_existing_paths_and_run_console_scripts() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    dockerfiles = sorted(DOCKER.glob("*.Dockerfile"))
    assert [p.name for p in dockerfiles] == ["coordinator.Dockerfile", "participant.Dockerfile"]
    for path in dockerfiles:
        instructions = _instructions(path)
        assert instructions[0][0] == "FROM"
        for keyword, rest in instructions:
            if keyword == "COPY":
                *sources, _ = rest.split()
                for source in sources:
                    assert (ROOT / source).exists(), f"{path.name}: COPY {source} does not exist"
            if keyword == "ENTRYPOINT":
                assert rest.startswith("[")
                program = yaml.safe_load(rest)[0]
                assert program in scripts, f"{path.name}: {program} is not a console script"
        assert any(k == "USER" and r != "root" for k, r in instructions), "runs as root"


def test_torch_pin_matches_dev_script() -> None:
    pins = set(re.findall(r"torch(?:vision)?==[0-9.]+", (ROOT / "dev.sh").read_text()))
    docker_pins = set(
        re.findall(r"torch(?:vision)?==[0-9.]+", (DOCKER / "participant.Dockerfile").read_text())
    )
    assert pins == docker_pins == {"torch==2.14.1", "torchvision==0.29.1"}


def test_compose_services_and_settings() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "coordinator"}
    fields = {f"SECFPP_{name.upper()}" for name in Settings.model_fields}
    for name in ("migrate", "coordinator"):
        service = services[name]
        build = service["build"]
        assert (DOCKER / build["context"] / build["dockerfile"]).resolve().is_file()
        for variable in service["environment"]:
            assert variable in fields, f"{name}: {variable} is not a coordinator setting"
        assert service["environment"]["SECFPP_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert services["coordinator"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    assert (DOCKER / "make-certs.sh").stat().st_mode & 0o111
