"""The PostgreSQL session store: one database shared by many processes and hosts.

Install the ``postgres`` extra (``pip install 'agent-lab[postgres]'``); the public
class is ``agent_lab.infrastructure.postgres.store.PostgresSessionStore``.
"""
