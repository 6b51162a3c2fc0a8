import pytest

from shared.config import ConfigError, load_settings, require_provider_credentials


def test_defaults_match_the_product() -> None:
    s = load_settings({})
    assert s.llm_provider == "ollama" and s.router_provider is None
    assert s.effective_router_provider == "ollama"
    assert s.ollama_base_url == "http://localhost:11434/v1"
    assert (s.ollama_agent_model, s.ollama_router_model) == ("qwen2.5:7b", "qwen2.5:3b")
    assert s.mistral_api_key == ""
    assert (s.mistral_agent_model, s.mistral_router_model) == ("mistral-large-latest", "mistral-small-latest")
    assert s.rag_confidence_threshold == 0.75 and s.vector_search_top_k == 5
    assert (s.turingdb_url, s.turingdb_port, s.turingdb_graph) == ("localhost", 1234, "reactome")
    assert s.embedding_model == "minishlab/potion-base-32M"
    assert s.vector_index_name == "reactome_minishlab_potion_base_32M"
    assert s.session_ttl_seconds == 7 * 24 * 3600
    assert (s.gateway_host, s.gateway_port, s.rate_limit_per_minute) == ("127.0.0.1", 8000, 30)


def test_values_are_parsed() -> None:
    s = load_settings({"ROUTER_PROVIDER": "LOCAL", "VECTOR_SEARCH_TOP_K": "12", "RAG_CONFIDENCE_THRESHOLD": "0.5"})
    assert s.effective_router_provider == "local"
    assert s.vector_search_top_k == 12 and s.rag_confidence_threshold == 0.5


@pytest.mark.parametrize(
    "name, value, accepts",
    [
        ("LLM_PROVIDER", "gpt", "one of ollama, mistral, openai"),
        ("RAG_CONFIDENCE_THRESHOLD", "1.5", "from 0 to 1"),
        ("RAG_CONFIDENCE_THRESHOLD", "high", "from 0 to 1"),
        ("TURINGDB_PORT", "70000", "from 1 to 65535"),
        ("VECTOR_SEARCH_TOP_K", "0", "from 1 to 100"),
        ("OLLAMA_BASE_URL", "localhost:11434", "http"),
        ("VALKEY_URL", "tcp://x", "redis://"),
        ("TURINGDB_GRAPH", "my graph", "letters, digits"),
    ],
)
def test_bad_value_is_one_clear_line(name: str, value: str, accepts: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({name: value})
    message = str(info.value)
    assert "\n" not in message and name in message and accepts in message


def test_mistral_needs_a_key() -> None:
    with pytest.raises(ConfigError, match="MISTRAL_API_KEY"):
        require_provider_credentials(load_settings({"LLM_PROVIDER": "mistral"}), "mistral")
    require_provider_credentials(load_settings({"MISTRAL_API_KEY": "k"}), "mistral")


def test_to_env_round_trips() -> None:
    from shared.config import to_env

    s = load_settings({"ROUTER_PROVIDER": "local", "TURINGDB_PORT": "4321", "KEY_PREFIX": "t1:"})
    assert load_settings(to_env(s)) == s
