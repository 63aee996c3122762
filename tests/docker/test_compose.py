"""docker/compose.yaml validated without a Docker daemon.

1. The compose-spec JSON schema (the copy vendored by the pinned ``check-jsonschema``,
   ``--builtin-schema vendor.compose-spec``): unknown keys, wrong types, bad
   ``depends_on`` conditions. ``docker-compose config`` from PyPI (v1.29.2, the last
   release) cannot be installed beside this project: it requires ``PyYAML<6`` and
   ``jsonschema<4`` (the dev tools need PyYAML 6 and jsonschema 4), and v1 predates
   parts of the compose spec.
2. What ``docker compose config`` would also resolve: variable interpolation (each
   variable has a default or is required with a message), ``depends_on`` targets and
   profiles, declared volumes and networks, files that builds and bind mounts name,
   host ports per documented command, the proxy's address inside its subnet.
3. The profile ``replicas``: two identical coordinator replicas with health checks behind
   nginx (docker/nginx/secfpp.conf, parsed by ``crossplane``) that names exactly them.
"""

from __future__ import annotations

import copy
import ipaddress
import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from secfpp.coordinator.settings import Settings
from tests.support.docker import DOCKER, missing

COMPOSE = DOCKER / "compose.yaml"
NGINX = DOCKER / "nginx" / "secfpp.conf"
REQUIRED_VARIABLES = {"SECFPP_ADMIN_TOKEN"}
GENERATED_MOUNTS = {"./certs", "./certs/ca.pem"}  # made by docker/make-certs.sh
OPERATOR_MOUNTS = {"./data", "./weights"}  # the participant's images and CLIP weights
REPLICAS = ("coordinator-1", "coordinator-2")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def strings(node: Any) -> Iterable[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def interpolate(node: Any, env: dict[str, str]) -> Any:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR:?message}`` substitution."""
    if isinstance(node, dict):
        return {interpolate(k, env): interpolate(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env) for v in node]
    if not isinstance(node, str):
        return node

    def substitute(match: re.Match[str]) -> str:
        name, operator, argument = match.groups()
        value = env.get(name)
        unset = value is None if operator in ("-", "?") else not value
        if unset and operator in (":-", "-"):
            return str(argument)
        if unset and operator in (":?", "?"):
            raise KeyError(f"{name}: {argument}")
        return value or ""

    return VARIABLE.sub(substitute, node.replace("$$", "\0")).replace("\0", "$")


def resolved() -> dict[str, Any]:
    return interpolate(raw(), {"SECFPP_ADMIN_TOKEN": "test-admin-token"})


def closure(services: dict[str, Any], names: Iterable[str]) -> set[str]:
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(services[name].get("depends_on", {}))
    return seen


# -- 1. schema -------------------------------------------------------------------------
def check_schema(checker: Path, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compose_file_matches_the_compose_spec_schema(tool: Callable[[str], Path]) -> None:
    result = check_schema(tool("check-jsonschema"), COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: d["services"]["proxy"].update(healtcheck={}), id="typo-key"),
        pytest.param(
            lambda d: d["services"]["proxy"]["depends_on"]["coordinator-1"].update(
                condition="service_ready"
            ),
            id="bad-condition",
        ),
        pytest.param(lambda d: d["services"]["coordinator"].update(ports=8443), id="bad-type"),
    ],
)
def test_the_schema_check_rejects_a_damaged_file(
    tool: Callable[[str], Path], tmp_path: Path, damage: Callable[[dict[str, Any]], None]
) -> None:
    document = raw()
    damage(document)
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(document))
    result = check_schema(tool("check-jsonschema"), path)
    assert result.returncode != 0, result.stdout


# -- 2. what `docker compose config` resolves ----------------------------------------
def test_every_variable_has_a_default_or_is_required_with_a_message() -> None:
    required = set()
    for text in strings(raw()):
        for name, operator, argument in VARIABLE.findall(text):
            assert operator in (":-", ":?"), f"${{{name}}} needs a default or a message"
            if operator == ":?":
                assert argument, name
                required.add(name)
    assert required == REQUIRED_VARIABLES
    with pytest.raises(KeyError, match="SECFPP_ADMIN_TOKEN"):
        interpolate(raw(), {})


def test_references_resolve() -> None:
    doc = resolved()
    services = doc["services"]
    volumes, networks = set(doc.get("volumes", {})), set(doc.get("networks", {})) | {"default"}
    for name, service in services.items():
        profiles = set(service.get("profiles", []))
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
            needed = set(services[dependency].get("profiles", []))
            assert not needed or needed & profiles, f"{name} needs {dependency}'s profile"
        attached = service.get("networks", [])
        for network in attached if isinstance(attached, list) else list(attached):
            assert network in networks, f"{name}: undeclared network {network}"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                if source not in GENERATED_MOUNTS | OPERATOR_MOUNTS:
                    assert (DOCKER / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in volumes, f"{name}: undeclared volume {source}"
        if "build" in service:
            build = service["build"]
            assert (DOCKER / build["context"] / build["dockerfile"]).resolve().is_file()


def test_generated_certificates_cover_the_names_the_proxy_checks() -> None:
    script = (DOCKER / "make-certs.sh").read_text()
    assert "--host coordinator" in script  # proxy_ssl_name in docker/nginx/secfpp.conf


@pytest.mark.parametrize(
    ("profiles", "targets"),
    [
        pytest.param((), None, id="default-up"),
        pytest.param(("replicas",), ["proxy"], id="replicas-up-proxy"),
        pytest.param(("participant",), ["participant"], id="participant-up"),
    ],
)
def test_documented_commands_publish_each_host_port_once(
    profiles: tuple[str, ...], targets: list[str] | None
) -> None:
    services = resolved()["services"]
    if targets is None:
        started = {n for n, s in services.items() if not s.get("profiles")}
    else:
        started = closure(services, targets)
        assert all(set(services[n].get("profiles", [])) <= set(profiles) for n in targets)
    published = [str(port).split(":")[0] for n in started for port in services[n].get("ports", [])]
    assert len(published) == len(set(published)), published
    if "replicas" in profiles:
        assert "coordinator" not in started
        assert set(REPLICAS) <= started


def test_proxy_address_lies_in_its_subnet_and_is_the_only_trusted_forwarder() -> None:
    doc = resolved()
    subnet = ipaddress.ip_network(doc["networks"]["replicas"]["ipam"]["config"][0]["subnet"])
    proxy = doc["services"]["proxy"]
    address = ipaddress.ip_address(proxy["networks"]["replicas"]["ipv4_address"])
    assert address in subnet
    assert address not in (subnet.network_address, subnet.broadcast_address, subnet[1])
    for name in REPLICAS:
        assert doc["services"][name]["environment"]["FORWARDED_ALLOW_IPS"] == str(address)


# -- 3. replicas behind nginx ----------------------------------------------------------
def test_replicas_are_the_single_coordinator_with_health_checks() -> None:
    services = resolved()["services"]
    single = services["coordinator"]
    first, second = (copy.deepcopy(services[n]) for n in REPLICAS)
    assert first == second
    assert first["profiles"] == ["replicas"]
    environment = dict(first["environment"])
    environment.pop("FORWARDED_ALLOW_IPS")
    assert environment == single["environment"]
    for key in ("build", "user", "volumes", "depends_on", "restart"):
        assert first[key] == single[key], key
    assert "ports" not in first  # reachable only through the proxy
    assert first["expose"] == ["8443"]
    test = first["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert "https://127.0.0.1:8443/healthz" in test[-1]
    proxy = services["proxy"]
    assert proxy["profiles"] == ["replicas"]
    assert proxy["depends_on"] == {n: {"condition": "service_healthy"} for n in REPLICAS}
    assert "/readyz" in " ".join(proxy["healthcheck"]["test"])
    assert "./nginx/secfpp.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
    fields = {f"SECFPP_{name.upper()}" for name in Settings.model_fields}
    for name in (*REPLICAS, "coordinator", "migrate"):
        for variable in services[name]["environment"]:
            assert variable in fields | {"FORWARDED_ALLOW_IPS"}, f"{name}: {variable}"


def nginx_tree(tmp_path: Path) -> list[dict[str, Any]]:
    """The parsed configuration in its real context (an ``include`` inside ``http``)."""
    try:
        import crossplane
    except ImportError:
        missing("crossplane is not installed; install the dev extras (pyproject.toml pins it)")
    wrapper = tmp_path / "nginx.conf"
    wrapper.write_text(f"events {{}}\nhttp {{\n    include {NGINX};\n}}\n")
    result = crossplane.parse(str(wrapper), check_ctx=True, check_args=True, comments=False)
    assert result["status"] == "ok", result["errors"]
    return next(c["parsed"] for c in result["config"] if c["file"] == str(NGINX))


def walk(tree: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for directive in tree:
        yield directive
        yield from walk(directive.get("block", []))


def test_nginx_configuration_parses_and_proxies_to_the_replicas(tmp_path: Path) -> None:
    import crossplane.analyzer

    tree = nginx_tree(tmp_path)
    directives = list(walk(tree))
    unknown = {d["directive"] for d in directives} - set(crossplane.analyzer.DIRECTIVES)
    assert unknown <= {"http2"}, f"unknown (misspelled?) directives: {unknown}"  # nginx 1.25.1+

    def args(name: str) -> list[list[str]]:
        return [d["args"] for d in directives if d["directive"] == name]

    upstream = next(d for d in tree if d["directive"] == "upstream")
    servers = [d["args"][0] for d in upstream["block"] if d["directive"] == "server"]
    assert servers == [f"{n}:8443" for n in REPLICAS]
    assert all(a[0] == f"https://{upstream['args'][0]}" for a in args("proxy_pass"))
    assert len(args("proxy_pass")) == 2
    assert args("proxy_set_header").count(["X-Forwarded-For", "$remote_addr"]) == 1
    assert args("proxy_ssl_verify") == [["on"]]
    assert args("proxy_ssl_name") == [["coordinator"]]
    assert args("proxy_next_upstream") == [["error", "timeout"]]  # never replays a POST
    mounted = {"/certs/server.pem", "/certs/server-key.pem", "/certs/ca.pem"}
    for name in ("ssl_certificate", "ssl_certificate_key", "proxy_ssl_trusted_certificate"):
        assert args(name)[0][0] in mounted
    body = args("client_max_body_size")[0][0]
    assert body.endswith("m")
    assert int(body[:-1]) * 2**20 > Settings.model_fields["max_body_bytes"].default
    enroll = [d for d in directives if d["directive"] == "location" and "/v1/enroll" in d["args"]]
    assert len(enroll) == 1
    from secfpp.coordinator.api.routes.participants import enroll_router

    assert "/v1/enroll" in {getattr(r, "path", None) for r in enroll_router.routes}
