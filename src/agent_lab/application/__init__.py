"""Use cases of Agent Lab: the runtime, the event agent, tools and the store port.

Nothing here performs framework I/O; adapters live in ``agent_lab.infrastructure``.
"""
