"""The agent_lab benchmark suite; run it with ``.venv/bin/python -m bench`` (see run_all)."""
