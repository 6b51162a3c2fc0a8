"""The router service."""
