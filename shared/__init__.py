"""The library every chat-agent service imports: contracts, config, bus, graph, retrieval."""
