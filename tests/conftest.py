"""Fixtures live in tests/fixtures/, one module per real component."""

pytest_plugins = [
    "tests.fixtures.valkey",
    "tests.fixtures.turingdb",
    "tests.fixtures.llm",
    "tests.fixtures.gateway",
]
