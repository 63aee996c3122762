"""docker/compose.yaml checked against the images it runs and the programs in them.

For every service: its image is the one ``docker/build.sh`` builds from the Dockerfile the
service names (or a pinned external image); its command, with the image's ENTRYPOINT, is
parsed by that entry point's own argument parser (``[project.scripts]`` of pyproject.toml),
and so are the commands the file's comments tell an operator to run; every environment
variable name is one the program reads (the coordinator's settings class, the participant
CLI's token variables, uvicorn's ``FORWARDED_ALLOW_IPS``); every mount lands on a volume the
Dockerfile declares or on a path the service's command or environment names, every declared
volume is mounted, and every absolute path in the environment lies under a mount. A name that
does not exist fails; the damaged copies below show each check failing.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import io
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker.test_compose import resolved
from tests.support.docker import DOCKER, REPO

SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
# Images compose pulls: each pinned, with the environment names and mount points its
# documentation defines (only those the file uses are needed here).
EXTERNAL = {
    "postgres:16-bookworm": {
        "environment": {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"},
        "mounts": {"/var/lib/postgresql/data"},
    },
    "nginx:1.28-bookworm": {
        "environment": set(),
        "mounts": {"/etc/nginx/conf.d/default.conf", "/certs"},
    },
}
READ_ONLY = {"/data", "/weights", "/certs", "/certs/ca.pem"}  # never written by a service


def dockerfile(role: str) -> dict[str, Any]:
    """ENTRYPOINT, CMD (exec form), VOLUMEs and ARG names of ``docker/<role>.Dockerfile``."""
    text = re.sub(r"\\\n", " ", (DOCKER / f"{role}.Dockerfile").read_text())
    out: dict[str, Any] = {"volumes": [], "args": set(), "text": text}
    for line in text.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        if keyword in ("ENTRYPOINT", "CMD"):
            out[keyword.lower()] = json.loads(rest)
        elif keyword == "VOLUME":
            out["volumes"] += json.loads(rest)
        elif keyword == "ARG":
            out["args"].add(rest.split("=")[0].strip())
    return out


def entry_point(script: str) -> Callable[[list[str]], Any]:
    module, _, function = SCRIPTS[script].partition(":")
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


class _Parsed(Exception):  # noqa: N818 - a signal, not an error
    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


@contextlib.contextmanager
def _stop_after_parsing() -> Iterator[None]:
    """The first ``parse_args`` of an entry point parses for real, then stops the program."""
    real = argparse.ArgumentParser.parse_args

    def parse(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Parsed(real(self, *args, **kwargs))

    argparse.ArgumentParser.parse_args = parse  # type: ignore[assignment]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = real  # type: ignore[method-assign]


def parse_command(script: str, argv: list[str]) -> str | None:
    """None when ``script argv`` parses, else argparse's message."""
    if script not in SCRIPTS:
        return f"{script} is not a console script of pyproject.toml"
    stderr = io.StringIO()
    with _stop_after_parsing(), contextlib.redirect_stderr(stderr):
        try:
            entry_point(script)(argv)
        except _Parsed:
            return None
        except SystemExit:
            return f"{script} {shlex.join(argv)}: {stderr.getvalue().strip()}"
    return f"{script} {shlex.join(argv)} did not parse its arguments first"


def documented_commands(text: str) -> dict[str, list[list[str]]]:
    """``... run --rm SERVICE ARGS`` commands in the file's comments: SERVICE -> [ARGS]."""
    comment = "\n".join(
        line.strip()[1:].strip() for line in text.splitlines() if line.strip().startswith("#")
    )
    comment = re.sub(r"\\\n", " ", comment)
    out: dict[str, list[list[str]]] = {}
    for match in re.finditer(r"run --rm ([a-z0-9-]+) (.*)", comment):
        out.setdefault(match.group(1), []).append(shlex.split(match.group(2)))
    return out


def environment_names(script: str) -> set[str]:
    """The environment variables the program of ``script`` reads."""
    module = importlib.import_module(SCRIPTS[script].partition(":")[0])
    if script == "secfpp-participant":
        return {module.ENROLLMENT_TOKEN_ENV, module.API_TOKEN_ENV}
    settings = importlib.import_module(module.__name__.rpartition(".")[0] + ".settings").Settings
    prefix = settings.model_config["env_prefix"]
    names = {f"{prefix}{name}".upper() for name in settings.model_fields}
    import uvicorn.config

    assert "FORWARDED_ALLOW_IPS" in Path(uvicorn.config.__file__).read_text()
    return names | {"FORWARDED_ALLOW_IPS"}


def _under(path: str, mount: str) -> bool:
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def problems(doc: dict[str, Any], text: str) -> list[str]:
    """Every mismatch between the (interpolated) compose file and the images."""
    found: list[str] = []
    documented = documented_commands(text)
    build_sh = (DOCKER / "build.sh").read_text()
    for name, service in doc["services"].items():
        image = service.get("image", "")
        mounts = [str(m).split(":") for m in service.get("volumes", [])]
        targets = {m[1] for m in mounts}
        environment = service.get("environment", {})
        if "build" not in service:
            if image not in EXTERNAL:
                found.append(f"{name}: image {image!r} is neither built here nor a pinned one")
                continue
            for variable in environment:
                if variable not in EXTERNAL[image]["environment"]:
                    found.append(f"{name}: {image} reads no {variable}")
            for target in targets - EXTERNAL[image]["mounts"]:
                found.append(f"{name}: {image} uses no {target}")
            continue
        build = service["build"]
        role = Path(build["dockerfile"]).name.removesuffix(".Dockerfile")
        if not (DOCKER / build["context"] / build["dockerfile"]).resolve().is_file():
            found.append(f"{name}: no Dockerfile {build['dockerfile']}")
            continue
        spec = dockerfile(role)
        repository, _, tag = image.partition(":")
        if repository != f"secfpp-{role}" or 'image="secfpp-$role"' not in build_sh:
            found.append(f"{name}: image {image!r} is not the secfpp-{role} build.sh builds")
        for arg, value in build.get("args", {}).items():
            if arg not in spec["args"]:
                found.append(f"{name}: {role}.Dockerfile has no ARG {arg}")
            elif f"{value})" not in spec["text"]:
                found.append(f"{name}: {role}.Dockerfile does not know {arg}={value}")
            elif arg == "TORCH" and not tag.endswith(f"-{value}"):
                found.append(f"{name}: a TORCH={value} image is tagged ...-{value} (build.sh)")
        script = (service.get("entrypoint") or spec["entrypoint"])[0]
        argv = service.get("command", spec["cmd"])
        commands = [argv, *documented.get(name, [])]
        for command in commands:
            error = parse_command(script, [str(a) for a in command])
            if error:
                found.append(f"{name}: {error}")
        readable = environment_names(script) if script in SCRIPTS else set()
        for variable in environment:
            if variable not in readable:
                found.append(f"{name}: {script} reads no {variable}")
        paths = [str(a) for c in commands for a in c] + [str(v) for v in environment.values()]
        paths = [p for p in paths if p.startswith("/")]
        for target in targets:
            if target not in spec["volumes"] and not any(_under(p, target) for p in paths):
                found.append(f"{name}: mount {target} is neither a VOLUME nor used")
        for volume in spec["volumes"]:
            if volume not in targets:
                found.append(f"{name}: VOLUME {volume} of {role}.Dockerfile is not mounted")
        for path in paths:
            if not any(_under(path, t) for t in targets):
                found.append(f"{name}: {path} lies under no mount")
        for _source, target, *mode in mounts:
            if target in READ_ONLY and mode != ["ro"]:
                found.append(f"{name}: {target} must be mounted read-only")
    return found


def compose_text() -> str:
    return (DOCKER / "compose.yaml").read_text()


def test_compose_services_match_the_images_and_programs() -> None:
    assert problems(resolved(), compose_text()) == []


def test_the_participant_mounts_weights_and_takes_the_enrollment_token() -> None:
    doc = resolved()
    participant = doc["services"]["participant"]
    assert "SECFPP_ENROLLMENT_TOKEN" in participant["environment"]
    assert any(str(v).split(":")[1:] == ["/weights", "ro"] for v in participant["volumes"])
    assert "/weights" in dockerfile("participant")["volumes"]
    enroll = documented_commands(compose_text())["participant"]
    assert [c[0] for c in enroll] == ["enroll"]
    assert "--token" not in enroll[0]  # the token travels in the environment


def _service(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda doc: doc["services"][name]


DAMAGES = {
    "misspelled-setting": (
        lambda d: _service("coordinator")(d)["environment"].update(SECFPP_TLS_CERTFLE="/certs/x"),
        "secfpp-coordinator reads no SECFPP_TLS_CERTFLE",
    ),
    "unknown-option": (
        lambda d: _service("coordinator")(d).update(command=["--hosts", "0.0.0.0"]),
        "unrecognized arguments: --hosts",
    ),
    "unknown-subcommand": (
        lambda d: _service("participant")(d).update(command=["serve", "--state", "/state"]),
        "invalid choice: 'serve'",
    ),
    "not-a-console-script": (
        lambda d: _service("migrate")(d).update(entrypoint=["secfpp-migrations"]),
        "secfpp-migrations is not a console script",
    ),
    "weights-not-mounted": (
        lambda d: _service("participant")(d)["volumes"].pop(2),
        "VOLUME /weights of participant.Dockerfile is not mounted",
    ),
    "unused-mount": (
        lambda d: _service("coordinator")(d)["volumes"].append("./certs:/etc/secfpp:ro"),
        "mount /etc/secfpp is neither a VOLUME nor used",
    ),
    "path-outside-mounts": (
        lambda d: _service("coordinator")(d)["environment"].update(
            SECFPP_TLS_KEYFILE="/secrets/key.pem"
        ),
        "/secrets/key.pem lies under no mount",
    ),
    "writable-data": (
        lambda d: _service("participant")(d)["volumes"].__setitem__(1, "./data:/data"),
        "/data must be mounted read-only",
    ),
    "unknown-build-arg": (
        lambda d: _service("participant")(d)["build"]["args"].update(TORCH_VERSION="2.0"),
        "participant.Dockerfile has no ARG TORCH_VERSION",
    ),
    "variant-tag": (
        lambda d: _service("participant")(d).update(image="secfpp-participant:latest"),
        "a TORCH=cuda image is tagged ...-cuda",
    ),
    "other-image": (
        lambda d: _service("coordinator")(d).update(image="secfpp-participant:latest"),
        "is not the secfpp-coordinator build.sh builds",
    ),
    "postgres-variable": (
        lambda d: _service("postgres")(d)["environment"].update(POSTGRES_PASSWD="x"),
        "postgres:16-bookworm reads no POSTGRES_PASSWD",
    ),
    "unpinned-external": (
        lambda d: _service("proxy")(d).update(image="nginx:latest"),
        "image 'nginx:latest' is neither built here nor a pinned one",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_each_check_fails_on_a_damaged_file(damage: str) -> None:
    change, expected = DAMAGES[damage]
    doc = copy.deepcopy(resolved())
    change(doc)
    found = problems(doc, compose_text())
    assert any(expected in p for p in found), found


def test_a_damaged_documented_command_fails() -> None:
    text = compose_text().replace("--ca-bundle /certs/ca.pem", "--ca /certs/ca.pem")
    found = problems(resolved(), text)
    assert any("participant: secfpp-participant enroll" in p for p in found), found
