"""Adapters that plug agentledger into other agent frameworks; each module imports its framework
lazily."""
