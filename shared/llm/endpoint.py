"""Which OpenAI-compatible endpoint and model a role (agent or router) uses."""

from __future__ import annotations

from typing import Literal

import msgspec

from shared.config import ConfigError, Settings, require_provider_credentials

Role = Literal["agent", "router"]


class Endpoint(msgspec.Struct, frozen=True):
    provider: str
    base_url: str
    api_key: str
    model: str

    def describe(self) -> str:
        return f"{self.provider} {self.model} at {self.base_url}"


def resolve_endpoint(settings: Settings, role: Role) -> Endpoint:
    """The endpoint for `role`; the router uses ROUTER_PROVIDER, else LLM_PROVIDER."""
    provider = settings.effective_router_provider if role == "router" else settings.llm_provider
    if provider == "local":
        raise ConfigError("ROUTER_PROVIDER=local has no LLM endpoint")
    require_provider_credentials(settings, provider)
    if provider == "ollama":
        model = settings.ollama_router_model if role == "router" else settings.ollama_agent_model
        return Endpoint("ollama", settings.ollama_base_url, "ollama", model)
    if provider == "mistral":
        model = settings.mistral_router_model if role == "router" else settings.mistral_agent_model
        return Endpoint("mistral", settings.mistral_base_url, settings.mistral_api_key, model)
    model = settings.openai_router_model if role == "router" else settings.openai_agent_model
    return Endpoint("openai", settings.openai_base_url, settings.openai_api_key or "none", model)
