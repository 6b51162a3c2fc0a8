"""Settings from environment variables (bare names), checked once at start-up.

A bad value raises ConfigError whose message is one line naming the variable and
what it accepts; entry points print it and exit with status 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

PROVIDERS = ("ollama", "mistral", "openai")
ROUTER_PROVIDERS = (*PROVIDERS, "local")
LOG_FORMATS = ("json", "console")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A setting has a value the system cannot use."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    # LLM providers
    llm_provider: str = "ollama"
    router_provider: str | None = None
    ollama_base_url: str = "http://localhost:11434/v1"
    ollama_agent_model: str = "qwen2.5:7b"
    ollama_router_model: str = "qwen2.5:3b"
    mistral_api_key: str = ""
    mistral_base_url: str = "https://api.mistral.ai/v1"
    mistral_agent_model: str = "mistral-large-latest"
    mistral_router_model: str = "mistral-small-latest"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = ""
    openai_agent_model: str = "gpt-4o-mini"
    openai_router_model: str = "gpt-4o-mini"
    llm_timeout_seconds: float = 60.0
    llm_max_retries: int = 3
    llm_retry_backoff_seconds: float = 2.0
    # routing and retrieval
    rag_confidence_threshold: float = 0.75
    vector_search_top_k: int = 5
    agent_max_iterations: int = 32
    history_max_turns: int = 10
    # graph
    turingdb_url: str = "localhost"
    turingdb_port: int = 1234
    turingdb_graph: str = "reactome"
    embedding_model: str = "minishlab/potion-base-32M"
    vector_index_name: str = "reactome_minishlab_potion_base_32M"
    cypher_max_rows: int = 200
    cypher_timeout_seconds: float = 10.0
    # valkey and the bus
    valkey_url: str = ""
    key_prefix: str = "chat:"
    session_ttl_seconds: int = 7 * 24 * 3600
    event_retention_seconds: int = 7 * 24 * 3600
    visibility_timeout_seconds: float = 60.0
    max_deliveries: int = 5
    worker_concurrency: int = 8
    # gateway
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8000
    rate_limit_per_minute: int = 30
    rate_limit_per_address_per_minute: int | None = None  # unset: 10 x the per-user limit
    max_message_chars: int = 8000
    sse_ping_seconds: float = 15.0
    # process
    state_dir: str = ".state"
    log_level: str = "INFO"
    log_format: str = "json"

    @property
    def effective_router_provider(self) -> str:
        return self.router_provider or self.llm_provider

    @property
    def address_rate_limit(self) -> int:
        """Messages per minute from one client address, whatever user ids it sends."""
        return self.rate_limit_per_address_per_minute or 10 * self.rate_limit_per_minute

    @property
    def state_path(self) -> Path:
        path = Path(self.state_dir)
        return path if path.is_absolute() else PROJECT_ROOT / path


def _text(value: str) -> str:
    return value


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        low = value.strip().lower()
        if low not in choices:
            raise ValueError(f"one of {', '.join(choices)}")
        return low

    return parse


def _int(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        what = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(what) from None
        if number < low or (high is not None and number > high):
            raise ValueError(what)
        return number

    return parse


def _float(low: float, high: float | None = None, *, open_low: bool = False) -> Callable[[str], float]:
    def parse(value: str) -> float:
        bound = f"> {low}" if open_low else f">= {low}"
        what = f"a number {bound}" if high is None else f"a number from {low} to {high}"
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(what) from None
        if number != number or number < low or (open_low and number == low):
            raise ValueError(what)
        if high is not None and number > high:
            raise ValueError(what)
        return number

    return parse


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("an http:// or https:// URL")
    return value.rstrip("/")


def _valkey_url(value: str) -> str:
    if value and not value.startswith(("redis://", "rediss://", "valkey://", "valkeys://", "unix://")):
        raise ValueError("empty (start an embedded Valkey) or a redis://, rediss:// or unix:// URL")
    return value.replace("valkey://", "redis://", 1).replace("valkeys://", "rediss://", 1)


def _nonempty(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty value")
    return value.strip()


def _identifier(value: str) -> str:
    if not value or not all(ch.isalnum() or ch == "_" for ch in value):
        raise ValueError("letters, digits and underscores")
    return value


PARSERS: dict[str, Callable[[str], Any]] = {
    "llm_provider": _one_of(*PROVIDERS),
    "router_provider": _one_of(*ROUTER_PROVIDERS),
    "ollama_base_url": _url,
    "ollama_agent_model": _nonempty,
    "ollama_router_model": _nonempty,
    "mistral_api_key": _text,
    "mistral_base_url": _url,
    "mistral_agent_model": _nonempty,
    "mistral_router_model": _nonempty,
    "openai_base_url": _url,
    "openai_api_key": _text,
    "openai_agent_model": _nonempty,
    "openai_router_model": _nonempty,
    "llm_timeout_seconds": _float(0, open_low=True),
    "llm_max_retries": _int(0, 20),
    "llm_retry_backoff_seconds": _float(0),
    "rag_confidence_threshold": _float(0, 1),
    "vector_search_top_k": _int(1, 100),
    "agent_max_iterations": _int(1, 256),
    "history_max_turns": _int(0, 100),
    "turingdb_url": _nonempty,
    "turingdb_port": _int(1, 65535),
    "turingdb_graph": _identifier,
    "embedding_model": _nonempty,
    "vector_index_name": _identifier,
    "cypher_max_rows": _int(1, 100_000),
    "cypher_timeout_seconds": _float(0, open_low=True),
    "valkey_url": _valkey_url,
    "key_prefix": _text,
    "session_ttl_seconds": _int(60),
    "event_retention_seconds": _int(60),
    "visibility_timeout_seconds": _float(0, open_low=True),
    "max_deliveries": _int(1, 1000),
    "worker_concurrency": _int(1, 10_000),
    "gateway_host": _nonempty,
    "gateway_port": _int(0, 65535),
    "rate_limit_per_minute": _int(1),
    "rate_limit_per_address_per_minute": _int(1),
    "max_message_chars": _int(1, 1_000_000),
    "sse_ping_seconds": _float(0, open_low=True),
    "state_dir": _nonempty,
    "log_level": _one_of("debug", "info", "warning", "error"),
    "log_format": _one_of(*LOG_FORMATS),
}


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read every setting from `env` (default os.environ); unset or empty means default."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for field, parse in PARSERS.items():
        name = field.upper()
        raw = env.get(name)
        if raw is None or (raw.strip() == "" and field not in ("valkey_url", "mistral_api_key", "openai_api_key", "key_prefix")):
            continue
        try:
            values[field] = parse(raw)
        except ValueError as exc:
            shown = raw if len(raw) <= 60 else raw[:57] + "..."
            raise ConfigError(f"{name}={shown!r} is not valid: expected {exc}") from None
    if "log_level" in values:
        values["log_level"] = values["log_level"].upper()
    values.update(overrides)
    return Settings(**values)


def require_provider_credentials(settings: Settings, provider: str) -> None:
    """Fail at start-up when a provider that needs a key has none."""
    if provider == "mistral" and not settings.mistral_api_key:
        raise ConfigError("MISTRAL_API_KEY is empty: it is required when LLM_PROVIDER or ROUTER_PROVIDER is mistral")


def to_env(settings: Settings) -> dict[str, str]:
    """The environment variables that reproduce `settings` in a child process."""
    env: dict[str, str] = {}
    for field in PARSERS:
        value = getattr(settings, field)
        if value is not None:
            env[field.upper()] = str(value)
    return env
