"""User interfaces: the agent-lab CLI and the web lab."""
