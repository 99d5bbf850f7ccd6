"""tool_backends."""
