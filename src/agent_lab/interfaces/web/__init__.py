"""The web lab: a FastAPI server and a no-build page for running and comparing sessions.

For example::

    async with Lab(load_settings()) as lab:
        app = create_app(lab, token="s3cret")
        await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=8000)).serve()

See ``docs/web-lab.md`` for the protocol, reconnection and security model.
"""

from agent_lab.interfaces.web.app import create_app
from agent_lab.interfaces.web.hub import CLOSE_SLOW_CONSUMER, SessionHub
from agent_lab.interfaces.web.options import WebOptions

__all__ = ["CLOSE_SLOW_CONSUMER", "SessionHub", "WebOptions", "create_app"]
