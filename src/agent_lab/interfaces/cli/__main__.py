"""``python -m agent_lab.interfaces.cli`` runs the command line."""

from agent_lab.interfaces.cli.commands import main

main()
