"""``python -m agent_lab`` runs the ``agent-lab`` command line."""

from agent_lab.interfaces.cli import main

main()
