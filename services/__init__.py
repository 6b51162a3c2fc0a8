"""The chat-agent services: gateway, router, lookup, agent."""
