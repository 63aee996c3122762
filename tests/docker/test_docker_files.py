"""Static checks of docker/ (no Docker engine runs on the build machines).

Every file a Dockerfile copies exists, every entrypoint is a console script of the
project, the torch pin matches dev.sh, every SECFPP_* variable the compose file sets
is a coordinator setting, the participant image is CPU by default and CUDA by build argument.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from secfpp.coordinator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
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
        # ARG BASE (docker/build.sh passes its debootstrap base) defaults to the official image
        assert instructions[0] == ("ARG", "BASE=python:3.11-slim-bookworm")
        assert all(r.split()[0] == "${BASE}" for k, r in instructions if k == "FROM")
        for keyword, rest in instructions:
            if keyword == "COPY" and not rest.startswith("--from="):  # from an earlier stage
                *sources, _ = rest.split()
                for source in sources:
                    assert (ROOT / source).exists(), f"{path.name}: COPY {source} does not exist"
            if keyword == "ENTRYPOINT":
                assert rest.startswith("[")
                program = yaml.safe_load(rest)[0]
                assert program in scripts, f"{path.name}: {program} is not a console script"
        assert any(k == "USER" and r != "root" for k, r in instructions), "runs as root"


def test_torch_pinned_in_one_place() -> None:
    """constraints.txt pins torch/torchvision; dev.sh and the images install through it."""
    pin = re.compile(r"(?<![\w-])torch(?:vision)?==[0-9.]+")
    assert set(pin.findall((ROOT / "constraints.txt").read_text())) == {
        "torch==2.14.1",
        "torchvision==0.29.1",
    }
    for path in (ROOT / "dev.sh", *DOCKER.glob("*.Dockerfile"), ROOT / "pyproject.toml"):
        text = path.read_text()
        assert not pin.findall(text), f"{path.name} pins torch itself: use constraints.txt"
        if "pip install" in text:
            assert "-c constraints.txt" in text, f"{path.name} installs without constraints.txt"


def test_compose_services_and_settings() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {
        "postgres",
        "migrate",
        "coordinator",
        "coordinator-1",
        "coordinator-2",
        "proxy",
        "participant",
    }
    fields = {f"SECFPP_{name.upper()}" for name in Settings.model_fields}
    for name in ("migrate", "coordinator", "coordinator-1", "coordinator-2"):
        service = services[name]
        build = service["build"]
        assert (DOCKER / build["context"] / build["dockerfile"]).resolve().is_file()
        for variable in service["environment"]:
            if variable.startswith("SECFPP_"):
                assert variable in fields, f"{name}: {variable} is not a coordinator setting"
        assert service["environment"]["SECFPP_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert services["coordinator"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    assert (DOCKER / "make-certs.sh").stat().st_mode & 0o111


def test_participant_image_is_cpu_by_default_and_cuda_by_build_arg() -> None:
    """TORCH=cpu (default) takes the pinned pair from PyTorch's CPU wheel index, TORCH=cuda
    PyPI's CUDA wheel; the build checks the wheel it got is that variant; the compose profile
    builds the CUDA one and reserves the GPUs."""
    text = (DOCKER / "participant.Dockerfile").read_text()
    instructions = _instructions(DOCKER / "participant.Dockerfile")
    assert ("ARG", "TORCH=cpu") in instructions
    run = next(r for k, r in instructions if k == "RUN" and "torch torchvision" in r)
    cpu = 'cpu) pip install -c constraints.txt --index-url "$TORCH_CPU_INDEX" torch torchvision'
    assert cpu in run
    assert "cuda) pip install -c constraints.txt torch torchvision ;;" in run
    assert "exit 1" in run  # any other TORCH value
    assert "cuda == (sys.argv[1] == 'cuda')" in run
    assert run.rstrip().endswith('"$TORCH"')
    assert "NVIDIA_VISIBLE_DEVICES=all" in text
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in text
    assert text.count("FROM ") == 1
    service = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]["participant"]
    assert service["build"]["args"] == {"TORCH": "cuda"}
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert service["command"][-2:] == ["--device", "cuda"]  # no silent fallback to the CPU


def test_pinned_torch_wheel_is_a_cuda_build() -> None:
    """The torch the venv got from PyPI for the dev.sh pin (the same wheel the image
    installs on linux/amd64) carries a CUDA version and the nvidia-* runtime wheels."""
    from importlib import metadata
    from importlib.util import find_spec

    spec = find_spec("torch")
    assert spec is not None
    assert spec.origin is not None
    version_py = (Path(spec.origin).parent / "version.py").read_text()
    assert metadata.version("torch").startswith("2.14.1")
    cuda = re.search(r"^cuda: .*= '([0-9.]+)'", version_py, re.MULTILINE)
    assert cuda is not None, "torch in the venv is a CPU-only build"
    requires = metadata.requires("torch") or []
    assert any(r.startswith("nvidia-cudnn") for r in requires)


def _requirement_name(spec: str) -> str:
    """``"uvicorn[standard]>=0.29"`` -> ``"uvicorn"`` (normalized: lower case, ``_`` -> ``-``)."""
    name = re.split(r"[\[<>=!~ ;]", spec.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


_REQUIREMENT = re.compile(r"^[A-Za-z][\w.-]*(\[[\w,]+\])?\s*(==|>=|<=|~=|!=|<|>)")


def _pip_install_arguments(run: str) -> list[str]:
    """The words after each ``pip install`` of a shell command, up to its end (``&&``, ``;``)."""
    words = shlex.split(run.replace(";;", " ; "), posix=True)
    out: list[str] = []
    for i in range(len(words) - 1):
        if words[i : i + 2] == ["pip", "install"]:
            for word in words[i + 2 :]:
                if word in ("&&", ";", "||", "|") or word.endswith(";"):
                    break
                out.append(word)
    return out


@pytest.mark.parametrize("role", ["coordinator", "participant"])
def test_each_image_installs_its_extra(role: str) -> None:
    """Each image installs the project's extra of its role (no hand-copied dependency list:
    what the extra carries is checked by tests/test_extras.py)."""
    run = " ".join(
        rest for keyword, rest in _instructions(DOCKER / f"{role}.Dockerfile") if keyword == "RUN"
    )
    assert f'".[{role}]"' in run, f"{role}.Dockerfile does not install .[{role}]"
    listed = {_requirement_name(s) for s in _pip_install_arguments(run) if _REQUIREMENT.match(s)}
    assert not listed, f"{role}.Dockerfile lists dependencies by hand: {sorted(listed)}"
    assert _requirement_name("uvicorn[standard]>=0.29") == "uvicorn"
    assert _pip_install_arguments('pip install -c c.txt "numpy>=2" x && rm -rf y') == [
        "-c", "c.txt", "numpy>=2", "x",
    ]  # fmt: skip
    assert _requirement_name("open_clip_torch>=2.24") == "open-clip-torch"


def test_every_data_file_of_the_installed_packages_is_package_data() -> None:
    """The images install the project non-editable: a file the code reads at run time (e.g.
    secfpp/federation/backbones.json) lands in site-packages only when package-data
    names it."""
    import fnmatch
    import subprocess

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["secfpp*"]
    # secfpp/<part> links to the top-level folder <part>: package secfpp.a.b is folder a/b
    parts = sorted(p.name for p in (ROOT / "secfpp").iterdir() if p.is_symlink())
    assert parts == ["coordinator", "crypto", "migrations", "participant"]
    data = setuptools["package-data"]
    # the linked parts are tracked under their top-level folder; secfpp's own subpackages
    # (wire, federation, process) under secfpp/
    own = sorted(
        f"secfpp/{p.name}" for p in (ROOT / "secfpp").iterdir() if p.is_dir() and not p.is_symlink()
    )
    tracked = subprocess.run(
        ["git", "ls-files", *parts, *own], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    missing = []
    for name in tracked:
        if name.endswith(".py") or "/tests/" in name:
            continue
        relative = name.removeprefix("secfpp/")  # package secfpp.a.b is folder a/b
        covered = False
        for package, patterns in data.items():
            prefix = package.removeprefix("secfpp.").replace(".", "/") + "/"
            if relative.startswith(prefix):
                covered |= any(fnmatch.fnmatch(relative[len(prefix) :], p) for p in patterns)
        if not covered:
            missing.append(name)
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
    assert "secfpp/federation/backbones.json" in tracked
