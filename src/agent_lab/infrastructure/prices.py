"""The price table: the ``genai-prices`` package's bundled data, plus user overrides.

``genai-prices`` (maintained by the Pydantic team) ships its price data inside the
package, so lookups never touch the network; this adapter never starts the package's
optional updater. Loading the data takes a few tenths of a second the first time:
call ``load()`` from a worker thread (``await asyncio.to_thread(table.load)``) before
pricing calls on an event loop.

Overrides come from the config file, as a top-level ``[prices]`` table or inside
``[agent_lab]``::

    [prices."my-finetune"]
    input_per_mtok = 0.30
    output_per_mtok = 1.20
    cached_input_per_mtok = 0.15
"""

from __future__ import annotations

import functools
import threading
import tomllib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_lab.application.pricing import OverriddenPrices, Price, PriceTable, PriceTier
from agent_lab.domain.errors import ConfigError

LIBRARY = "genai-prices"


class GenaiPriceTable:
    """Prices of hosted models from ``genai-prices``' bundled data.

    Args:
        provider_id: Look models up at this provider only (e.g. ``openai``,
            ``openrouter``); by default the provider is inferred from the model name,
            and a ``provider/model`` name is tried at that provider.
        base_url: The endpoint the calls went to; when it is a provider the library
            knows (``https://api.openai.com/v1``, ``https://openrouter.ai/api/v1``),
            models are looked up there first.
        clock: Prices in force at this moment (prices change over time).
    """

    def __init__(
        self,
        *,
        provider_id: str | None = None,
        base_url: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._provider_id = provider_id
        self._base_url = base_url
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, Price | None] = {}

    def load(self) -> None:
        """Load the bundled data now (blocking, a few tenths of a second)."""
        _snapshot()

    def price_of(self, model: str) -> Price | None:
        key = model.strip().lower()
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._lookup(key)
            return self._cache[key]

    def _lookup(self, model: str) -> Price | None:
        candidates: list[tuple[str | None, str | None, str]] = []
        if self._base_url and self._provider_id is None:
            candidates.append((None, self._base_url, model))
        candidates.append((self._provider_id, None, model))
        prefix, slash, rest = model.partition("/")
        if slash and self._provider_id is None:
            candidates.append((prefix, None, rest))
        for provider_id, url, model_ref in candidates:
            try:
                provider, info = _snapshot().find_provider_model(model_ref, None, provider_id, url)
            except LookupError:
                continue
            source = f"{LIBRARY} {version(LIBRARY)}: {provider.id}/{info.id}"
            return _price_from(info.get_prices(self._clock()), source)
        return None


@functools.cache
def _snapshot() -> Any:
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


def _price_from(prices: Any, source: str) -> Price | None:
    """A ``Price`` from the library's model price, or ``None`` if it is not per token."""
    fields = {
        "input_per_mtok": getattr(prices, "input_mtok", None),
        "output_per_mtok": getattr(prices, "output_mtok", None),
        "cached_input_per_mtok": getattr(prices, "cache_read_mtok", None),
    }
    if fields["input_per_mtok"] is None or fields["output_per_mtok"] is None:
        return None
    base = {name: _base(value) for name, value in fields.items()}
    thresholds = sorted({t.start for value in fields.values() for t in _tiers_of(value)})
    tiers = tuple(
        PriceTier(above=start, **{name: _at(value, start) for name, value in fields.items()})
        for start in thresholds
    )
    return Price(**base, tiers=tiers, source=source)


def _tiers_of(value: Any) -> list[Any]:
    return list(getattr(value, "tiers", []) or [])


def _base(value: Any) -> Decimal | None:
    if value is None:
        return None
    return Decimal(value.base) if hasattr(value, "base") else Decimal(value)


def _at(value: Any, prompt_tokens: int) -> Decimal | None:
    """The rate of a possibly tiered price for a prompt past ``prompt_tokens``."""
    rate = _base(value)
    for tier in sorted(_tiers_of(value), key=lambda tier: tier.start):
        if tier.start <= prompt_tokens:
            rate = Decimal(tier.price)
    return rate


def price_overrides(config: Mapping[str, Any]) -> dict[str, Price]:
    """The ``prices`` table of a parsed config file (top level or under ``agent_lab``).

    Raises:
        ConfigError: the table or one of its entries is malformed.
    """
    section = config.get("agent_lab")
    table = config.get("prices", section.get("prices") if isinstance(section, dict) else None)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError("prices must be a table of model names")
    overrides: dict[str, Price] = {}
    for model, entry in table.items():
        try:
            overrides[model] = Price.model_validate({**_as_table(model, entry), "source": "config"})
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f'prices."{model}": {problem}') from None
    return overrides


def _as_table(model: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f'prices."{model}" must be a table')
    return {key: str(value) if isinstance(value, float) else value for key, value in entry.items()}


def load_price_overrides(path: Path) -> dict[str, Price]:
    """The price overrides of a TOML config file (``{}`` when it has none).

    Raises:
        ConfigError: the file is missing, is not TOML, or has a malformed price.
    """
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return price_overrides(config)


def price_table(
    overrides: Mapping[str, Price] | None = None,
    *,
    provider_id: str | None = None,
    base_url: str | None = None,
) -> PriceTable:
    """The lab's price table: ``overrides`` win over ``genai-prices``' data."""
    library = GenaiPriceTable(provider_id=provider_id, base_url=base_url)
    return OverriddenPrices(overrides or {}, library)
