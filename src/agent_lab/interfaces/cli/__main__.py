"""``python -m agent_lab.interfaces.cli`` runs the command line."""

from agent_lab.interfaces.cli import main

main()
