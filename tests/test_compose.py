"""compose.yaml and the Dockerfile, checked without a Docker engine.

compose.yaml is validated against the Compose Specification's JSON schema (a copy in
tests/data/compose-spec/, see its README), then against the code: every service runs a
real `chat-agent` subcommand or a known image, every variable it sets is one
shared/config.py reads, every port is the configured default.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from shared.config import PARSERS, PROJECT_ROOT, Settings, load_settings
from services import up
from services.cli import TARGETS, build_parser

COMPOSE = PROJECT_ROOT / "compose.yaml"
DOCKERFILE = PROJECT_ROOT / "Dockerfile"
SCHEMA = Path(__file__).parent / "data" / "compose-spec" / "compose-spec.json"
# process-level variables the services do not read through shared/config.py
PROCESS_VARS = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "HF_HUB_OFFLINE"}
CONFIG_VARS = {name.upper() for name in PARSERS}
WORKERS = ("router", "lookup", "agent")
_VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, env: dict[str, str] | None = None) -> Any:
    """Compose's ${VAR}, ${VAR:-default}, $VAR and $$ (the shell's $), with `env`."""
    env = env or {}
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name") or match.group("bare")
        return env.get(name) or (match.group("default") or "")

    return _VAR.sub(sub, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    """compose.yaml as `docker compose config` would see it with no variables set."""
    return interpolate(raw)


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def test_compose_matches_the_compose_specification(raw: dict[str, Any], validator: Any) -> None:
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)
    # and the schema does refuse what Compose refuses
    broken = copy.deepcopy(raw)
    broken["services"]["gateway"]["comand"] = ["chat-agent", "gateway"]
    broken["services"]["agent"]["deploy"]["replicas"] = [2]
    assert len(list(validator.iter_errors(broken))) >= 2


def test_services_run_real_subcommands_or_images(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(up.SERVICES) <= set(services)  # gateway, router, lookup, agent
    parser = build_parser()
    for name, service in services.items():
        argv = command_of(service)
        if "image" in service and "build" not in service:
            assert name == "valkey" and service["image"].startswith("valkey/valkey:")
            assert argv[:1] == ["valkey-server"] and "--appendonly" in argv and argv[argv.index("--appendonly") + 1] == "yes"
            assert service["healthcheck"]["test"] == ["CMD", "valkey-cli", "ping"]
            assert any(v.endswith(":/data") for v in service["volumes"])
            continue
        assert service["build"] == "." and service["image"].startswith("chat-agent:")
        if name == "turingdb":  # the wheel's console script, kept in the foreground
            script = " ".join(argv)
            assert argv[:2] == ["sh", "-c"] and "exec turingdb start " in script and "-i 0.0.0.0" in script
            entry_points = {e.name for e in importlib.metadata.distribution("turingdb").entry_points}
            assert "turingdb" in entry_points
            assert service["stdin_open"] is True
            continue
        assert argv[0] == "chat-agent", f"{name}: {argv}"
        args = parser.parse_args(argv[1:])
        module, func = TARGETS[args.target].split(":")
        assert callable(getattr(importlib.import_module(module), func))
        if name in up.SERVICES:
            assert args.target == name
    for worker in WORKERS:
        assert int(services[worker]["deploy"]["replicas"]) >= 1


def test_depends_on_names_services_with_the_right_conditions(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            else:
                assert condition == "service_completed_successfully" and services[dependency].get("restart") == "no"
    for name in ("gateway", "lookup", "agent"):
        assert services[name]["depends_on"]["graph-load"]["condition"] == "service_completed_successfully"
    assert services["graph-load"]["depends_on"]["turingdb"]["condition"] == "service_healthy"


def test_environment_is_what_shared_config_reads(raw: dict[str, Any], compose: dict[str, Any]) -> None:
    names: set[str] = set()
    for name, service in compose["services"].items():
        env = service.get("environment") or {}
        assert isinstance(env, dict), f"{name}: environment as a mapping"
        names |= set(env)
    unknown = names - CONFIG_VARS - PROCESS_VARS
    assert not unknown, f"not read by shared/config.py: {sorted(unknown)}"
    # every ${VAR:-default} in the file names a known variable
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", COMPOSE.read_text()))
    assert used - CONFIG_VARS - {"CHAT_AGENT_TAG"} == set()
    # the defaults are valid settings, and the same for every app service
    app = {n: s for n, s in compose["services"].items() if "build" in s}
    envs = {json.dumps(s["environment"], sort_keys=True) for s in app.values()}
    assert len(envs) == 1
    settings = load_settings({k: str(v) for k, v in next(iter(app.values()))["environment"].items()})
    defaults = Settings()
    assert settings.gateway_port == defaults.gateway_port and settings.turingdb_port == defaults.turingdb_port
    assert settings.gateway_host == "0.0.0.0" and settings.turingdb_url in compose["services"]
    valkey = urlsplit(settings.valkey_url)
    assert valkey.hostname in compose["services"] and valkey.port == 6379
    assert (PROJECT_ROOT / settings.embedding_model).is_dir()  # the committed model, copied into the image
    assert settings.llm_provider == defaults.llm_provider and settings.rate_limit_per_minute == defaults.rate_limit_per_minute
    # a value from the shell wins over the default
    assert interpolate(raw["x-environment"], {"LLM_PROVIDER": "mistral"})["LLM_PROVIDER"] == "mistral"


def test_ports_and_healthchecks_match_the_config(compose: dict[str, Any]) -> None:
    from services.gateway.routes_health import routes

    defaults = Settings()
    services = compose["services"]
    published = [str(p) for p in services["gateway"]["ports"]]
    assert [p.rsplit(":", 1)[1] for p in published] == [str(defaults.gateway_port)]
    assert all(p.startswith("127.0.0.1:") for p in published)  # not on every interface of the host
    for port_spec in (p for s in services.values() for p in s.get("ports", [])):
        assert str(port_spec).rsplit(":", 1)[1] in {str(defaults.gateway_port)}
    gateway_check = " ".join(services["gateway"]["healthcheck"]["test"])
    url = re.search(r"'(http://[^']+)'", gateway_check).group(1)  # type: ignore[union-attr]
    assert urlsplit(url).port == defaults.gateway_port and urlsplit(url).path in {r.path for r in routes}
    turing_check = services["turingdb"]["healthcheck"]["test"]
    assert urlsplit(re.search(r"'(http://[^']+)'", turing_check[-1]).group(1)).port == defaults.turingdb_port  # type: ignore[union-attr]
    for test in (services["gateway"]["healthcheck"]["test"], turing_check):
        assert test[:3] == ["CMD", "python", "-c"]
        compile(test[3], "healthcheck", "exec")
    from shared.graph.server import answers

    assert callable(answers)


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_builds_the_project_image() -> None:
    steps = dockerfile_instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    parser = build_parser()
    cmd = json.loads(next(rest for word, rest in steps if word == "CMD"))
    assert cmd[0] == "chat-agent" and parser.parse_args(cmd[1:]).target == "gateway"
    for word, rest in steps:
        if word == "RUN":
            for part in re.split(r"&&", rest):
                argv = shlex.split(part.split(">")[0])
                if argv and argv[0] == "chat-agent" and argv[1:] != ["--help"]:
                    parser.parse_args(argv[1:])
                if argv[:2] == ["pip", "install"]:
                    assert "." in argv  # the project, with the pins of pyproject.toml
        if word == "ENV":
            for pair in rest.split():
                assert pair.split("=")[0] in CONFIG_VARS | PROCESS_VARS | {"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK"}
    user = [rest for word, rest in steps if word == "USER"]
    assert user and user[-1] not in ("root", "0")
    ignored = [line.strip() for line in (PROJECT_ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    copied = [src for word, rest in steps if word == "COPY" for src in rest.split()[:-1]]
    assert {"data/", "models/", "shared/", "services/", "pyproject.toml"} <= set(copied)
    for src in copied:
        assert (PROJECT_ROOT / src).exists(), src
        assert src.rstrip("/") not in ignored
    assert ".venv" in ignored and ".state" in ignored and ".git" in ignored
