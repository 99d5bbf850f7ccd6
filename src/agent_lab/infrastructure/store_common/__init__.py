"""What the SQLite and PostgreSQL session stores share: rows, rules and decisions.

Each store keeps its SQL (paramstyle, locking, fencing, error classification); the
functions here build the values it writes and read the rows it fetches, so both stores
apply one set of rules.
"""
