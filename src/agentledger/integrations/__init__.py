"""Adapters that let other agent frameworks keep their conversation state in a ledger.

Each module is one framework and imports it lazily, failing with the ``pip install`` line of
its extra: ``openai_agents`` (the OpenAI Agents SDK's ``Session`` protocol) and
``pydantic_ai`` (pydantic-ai's message history). This package imports nothing, so importing
one adapter never needs another framework installed.
"""
