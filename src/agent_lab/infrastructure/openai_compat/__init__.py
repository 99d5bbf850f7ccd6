"""openai_compat."""
