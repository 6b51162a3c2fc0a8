"""The lookup service."""
