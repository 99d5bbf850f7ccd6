"""Adapters: the OpenAI-compatible client, the SQLite store, the simulated provider."""
